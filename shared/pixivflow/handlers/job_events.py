"""Job events: the Workflow Protocol v1 HTTP surface (docs/explanation/jobs-protocol.md)."""

from __future__ import annotations

from typing import Any


def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
    from ..http.jobs_api import handle_http

    return handle_http(event, context)
