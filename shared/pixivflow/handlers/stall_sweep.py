"""Stall sweep, every SweepIntervalMinutes: the content of the event is ignored."""

from __future__ import annotations

from typing import Any


def handle(event: Any, context: Any) -> dict[str, Any]:
    """One tick: lease, sweep, missed fires."""
    from .. import runtime
    from ..services.sweep import tick

    return tick(runtime.get().wiring.sweeps).as_dict()
