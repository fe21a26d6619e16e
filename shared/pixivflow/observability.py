"""One Logger, one Metrics and an optional Tracer for the whole package (Powertools).

Importing this module creates no AWS client and no Tracer: a Powertools ``Tracer()`` imports the
X-Ray SDK and patches botocore/httpx, which costs ~200 ms and is only worth it when the stack was
deployed with ``Tracing=Active``. ``start_tracing()`` is called once per cold start by
``pixivflow.runtime.build()`` before any client exists; it creates the Tracer only when tracing is
on (the template sets ``POWERTOOLS_TRACE_DISABLED=false`` exactly then).
"""

from __future__ import annotations

import os
import threading
from typing import Any

from aws_lambda_powertools import Logger, Metrics

SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME", "pixivflow")
NAMESPACE = os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "PixivFlow")
# What X-Ray subsegments are recorded for: every AWS call and every outgoing HTTP request.
TRACED_MODULES = ("botocore", "httpx")

logger = Logger(service=SERVICE)
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
