"""A pytest plugin ``make mutants`` loads into every run of a mutant's tests: it notes which failing
tests met a request refused as malformed (a ``ValidationException`` from DynamoDB, moto or the
twins, or botocore's own ``ParamValidationError``) and writes ``{test id: met one}`` to the file
``PIXIVFLOW_MUTANT_PROBE`` names. A mutant all of whose failing tests met one did not weaken a
guard: it broke the request (a placeholder left unused, a syntax error), and its "kill" proves
nothing about the guard (tests/mutants/run.py, ``crashed``)."""

from __future__ import annotations

import json
import os
from typing import Any

_current: str | None = None
_met: set[str] = set()
_failed: dict[str, bool] = {}


def _mark() -> None:
    if _current is not None:
        _met.add(_current)


def pytest_configure(config: Any) -> None:
    from botocore import exceptions

    client_init = exceptions.ClientError.__init__
    param_init = exceptions.ParamValidationError.__init__

    def noted_client_error(self: Any, error_response: Any, operation_name: Any) -> None:
        client_init(self, error_response, operation_name)
        if ((error_response or {}).get("Error") or {}).get("Code") == "ValidationException":
            _mark()

    def noted_param_error(self: Any, **kwargs: Any) -> None:
        param_init(self, **kwargs)
        _mark()

    exceptions.ClientError.__init__ = noted_client_error  # type: ignore[method-assign]
    exceptions.ParamValidationError.__init__ = noted_param_error  # type: ignore[method-assign]


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    global _current
    _current = nodeid


def pytest_runtest_logreport(report: Any) -> None:
    if report.failed:
        _failed[report.nodeid] = _failed.get(report.nodeid, False) or report.nodeid in _met


def pytest_sessionfinish(session: Any, exitstatus: Any) -> None:
    out = os.environ.get("PIXIVFLOW_MUTANT_PROBE")
    if out:
        with open(out, "w", encoding="utf-8") as f:
            json.dump(_failed, f)
