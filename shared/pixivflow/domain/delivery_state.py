"""DeliveryLedgerPort.stateFor: what the delivery ledger says about one cell."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Literal

from .model import CONFIRMED_LEDGER, Intent, LedgerStatus

State = Literal["live", "confirmed", "lost", "unknown"]

LOST_REASON = (
    "delivery intent reached a terminal failure without an ACK; "
    "failing the cell instead of re-selecting a different work"
)


@dataclass(frozen=True)
class DeliveryState:
    state: State
    work_id: str | None = None
    work_type: str | None = None
    reason: str | None = None


def in_flight(intent: Intent) -> bool:
    """A row that is still the outbox's: pending, and due to be (or being) attempted."""
    return intent.status == LedgerStatus.PENDING and intent.actionable


def delivery_state(routes: Iterable[str], intents: Iterable[Intent]) -> DeliveryState:
    """Aggregate per-route verdicts over the cell's intents.

    Per route: no intents -> not confirmed; any delivered/duplicate -> confirmed; else a
    pending intent whose outbox row is still actionable -> live; else (pending never queued,
    outbox terminal, or failed) -> lost. All routes confirmed -> confirmed; any live -> live;
    any lost -> lost; some confirmed -> live; otherwise unknown.
    """
    routes = list(dict.fromkeys(routes))
    intents = list(intents)
    confirmed_any = live_any = lost_any = False
    confirmed_all = bool(routes)
    first_work: tuple[str, str] | None = None
    for route in routes:
        rows = [i for i in intents if i.route == route]
        if not rows:
            confirmed_all = False
            continue
        confirmed = [i for i in rows if i.status in CONFIRMED_LEDGER]
        if confirmed:
            confirmed_any = True
            if first_work is None:
                first_work = (confirmed[0].work_id, confirmed[0].work_type)
            continue
        confirmed_all = False
        if any(in_flight(i) for i in rows):
            live_any = True
        else:
            lost_any = True
    if confirmed_all and first_work:
        return DeliveryState("confirmed", work_id=first_work[0], work_type=first_work[1])
    if live_any:
        return DeliveryState("live")
    if lost_any:
        return DeliveryState("lost", reason=LOST_REASON)
    if confirmed_any:
        return DeliveryState("live")
    return DeliveryState("unknown")
