"""Trigger: EventBridge Scheduler's input and the operator HTTP routes."""

from __future__ import annotations

from typing import Any


def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """HTTP API events go to the resolver; anything else is EventBridge Scheduler's input."""
    if isinstance(event, dict) and "requestContext" in event and "routeKey" in event:
        from ..http.trigger_api import handle_http

        return handle_http(event, context)
    from .. import runtime
    from ..services.trigger import handle_scheduled_fire

    return handle_scheduled_fire(runtime.get().wiring.triggers, event if isinstance(event, dict) else {}).as_dict()
