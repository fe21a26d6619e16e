"""What each Lambda handler calls, by its old names (DESIGN §3). The functions now import their own
module of ``pixivflow.handlers`` (each imports only what its function needs); this module keeps the
old names for callers that used them."""

from __future__ import annotations

from typing import Any

from .handlers import deliver as _deliver
from .handlers import execute as _execute
from .handlers import job_events as _job_events
from .handlers._sqs import PartialItemFailureResponse
from .handlers import stall_sweep as _stall_sweep
from .handlers import trigger as _trigger


def trigger(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return _trigger.handle(event, context)


def execute_batch(event: dict[str, Any], context: Any) -> PartialItemFailureResponse:
    return _execute.handle(event, context)


def deliver_batch(event: dict[str, Any], context: Any) -> PartialItemFailureResponse:
    return _deliver.handle(event, context)


def stall_sweep(event: Any, context: Any) -> dict[str, Any]:
    return _stall_sweep.handle(event, context)


def job_events(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return _job_events.handle(event, context)
