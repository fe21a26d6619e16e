"""A pytest plugin ``make mutants`` loads into every run of a mutant's tests: it notes which failing
tests met a request refused as malformed (a ``ValidationException`` from DynamoDB, moto or the
twins, or botocore's own ``ParamValidationError``) and writes, to the file ``PIXIVFLOW_MUTANT_PROBE``
names, ``{"failed": [test ids], "met": {test id: [the refusals' messages]}}``. A mutant whose every
failing test met a refusal that the same test does not meet on the unmutated tree did not weaken a
guard: it broke the request (a placeholder left unused, a syntax error), and its "kill" proves
nothing about the guard (tests/mutants/run.py, ``crashed``). A test that meets refusals on purpose
(the contract tests compare what moto and the twins refuse) meets them on the unmutated tree too."""

from __future__ import annotations

import json
import os
from typing import Any

_current: str | None = None
_met: dict[str, list[str]] = {}
_failed: list[str] = []


def _mark(message: str) -> None:
    if _current is not None:
        seen = _met.setdefault(_current, [])
        if message not in seen:
            seen.append(message)


def pytest_configure(config: Any) -> None:
    from botocore import exceptions

    client_init = exceptions.ClientError.__init__
    param_init = exceptions.ParamValidationError.__init__

    def noted_client_error(self: Any, error_response: Any, operation_name: Any) -> None:
        client_init(self, error_response, operation_name)
        error = (error_response or {}).get("Error") or {}
        if error.get("Code") == "ValidationException":
            _mark(str(error.get("Message") or "")[:300])

    def noted_param_error(self: Any, **kwargs: Any) -> None:
        param_init(self, **kwargs)
        _mark(str(self)[:300])

    exceptions.ClientError.__init__ = noted_client_error  # type: ignore[method-assign]
    exceptions.ParamValidationError.__init__ = noted_param_error  # type: ignore[method-assign]


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    global _current
    _current = nodeid


def pytest_runtest_logreport(report: Any) -> None:
    if report.failed and report.nodeid not in _failed:
        _failed.append(report.nodeid)


def pytest_sessionfinish(session: Any, exitstatus: Any) -> None:
    out = os.environ.get("PIXIVFLOW_MUTANT_PROBE")
    if out:
        with open(out, "w", encoding="utf-8") as f:
            json.dump({"failed": _failed, "met": _met}, f)
