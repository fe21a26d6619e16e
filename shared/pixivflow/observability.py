"""One Logger, one Metrics and an optional Tracer for the whole package (Powertools).

Importing this module creates no AWS client and no Tracer: a Powertools ``Tracer()`` imports the
X-Ray SDK and patches botocore/httpx, which costs ~200 ms and is only worth it when the stack was
deployed with ``Tracing=Active``. ``start_tracing()`` is called once per cold start by
``pixivflow.runtime.build()`` before any client exists; it creates the Tracer only when tracing is
on (the template sets ``POWERTOOLS_TRACE_DISABLED=false`` exactly then).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from typing import Any

from aws_lambda_powertools import Logger, Metrics

from .domain.text import escape_invisible_json
from .ports import HEALTH_METRIC

SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME", "pixivflow")
NAMESPACE = os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "PixivFlow")
# What X-Ray subsegments are recorded for: every AWS call and every outgoing HTTP request.
TRACED_MODULES = ("botocore", "httpx")



def _log_json(record: Any) -> str:
    """Powertools' own serialisation (compact, UTF-8 kept), with bidi controls and invisible spaces
    written as ``\\uXXXX``: a tag or title carrying U+202E reads as it is in a log viewer, never
    reversed (domain/text.py)."""
    return escape_invisible_json(json.dumps(record, default=str, separators=(",", ":"), ensure_ascii=False))


logger = Logger(service=SERVICE, json_serializer=_log_json)
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)

_tracer: Any = None
_tracer_lock = threading.Lock()


def tracing_enabled() -> bool:
    """True when the deployment asked for X-Ray (``POWERTOOLS_TRACE_DISABLED`` explicitly false).

    Unset means off: local runs, the embedded runtime and tests never start a tracer."""
    return os.environ.get("POWERTOOLS_TRACE_DISABLED", "").strip().lower() in ("false", "0", "no")


def start_tracing() -> Any:
    """The process's Powertools Tracer, created (and botocore/httpx patched) on first call when
    tracing is enabled; None when it is not. Safe to call on every ``runtime.build()``."""
    global _tracer
    if not tracing_enabled():
        return None
    with _tracer_lock:
        if _tracer is None:
            from aws_lambda_powertools import Tracer  # deferred: pulls in aws-xray-sdk

            _tracer = Tracer(service=SERVICE, patch_modules=TRACED_MODULES)
        return _tracer


def tracer() -> Any:
    """The Tracer started by :func:`start_tracing`, or None."""
    return _tracer


_RESERVED = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class StructuredLog:
    """The ``Log`` port over a Powertools ``Logger`` (or anything with .info/.warning/.error taking
    ``extra=``): the fields become the line's keys, a field named like a LogRecord attribute
    gets a trailing underscore, and None fields are left out."""

    def __init__(self, target: Any = None) -> None:
        self._logger = target if target is not None else logger

    def __call__(self, level: str, message: str, **fields: Any) -> None:
        extra = {(f"{k}_" if k in _RESERVED else k): v for k, v in fields.items() if v is not None}
        try:
            getattr(self._logger, level)(message, extra=extra)
        except Exception:  # a log line never changes what the caller does
            pass


class EmfMetrics:
    """The ``Metrics`` port as CloudWatch embedded-metric-format lines (Powertools ``single_metric``).

    One blob per metric, flushed at once: no handler decorator has to remember to flush, and one
    metric's dimensions never leak into another's. The health profile (``PIXIVFLOW_METRICS=health``,
    template AlarmProfile) publishes the health series alone. The namespace is read per call:
    Lambda fixes the environment per function, but a process that imported the package before its
    environment was set (tests, the dev server) must still emit into the namespace it runs under now."""

    def count(self, name: str, value: float = 1, **dimensions: str) -> None:
        if name != HEALTH_METRIC and os.environ.get("PIXIVFLOW_METRICS", "full").strip().lower() == "health":
            return
        from aws_lambda_powertools.metrics import MetricUnit, single_metric

        namespace = os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or metrics.namespace
        with single_metric(name=name, unit=MetricUnit.Count, value=value, namespace=namespace) as m:
            for key, val in dimensions.items():
                m.add_dimension(name=key, value=str(val))
