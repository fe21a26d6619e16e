"""Who may deliver a work on a route that another cell holds (docs/explanation/reservations.md).

A cell that re-runs its bound work and finds one of its routes held by another cell decides, from
the holder's cell and the holder's own row of that work on that route, which of three things is
true:

* ``HOLDS``: the holder's row is confirmed (delivered, or a duplicate the downstream attested), or
  is still the outbox's and may already be downstream (an attempt was recorded, or a worker
  claimed it): it will settle as delivered unless the downstream refuses it. This cell records the
  route as a duplicate and never sends it.
* ``UNCERTAIN``: the holder's row ended unconfirmed (cancelled, or failed for good) after a worker
  may have posted it. Nobody can say whether the route has the work: sending it could post it
  twice, trusting it could report a delivery nobody made. This cell records the route as failed,
  naming the holder, and sends nothing.
* ``ORPHANED``: nothing of the holder can ever deliver it: its row failed or was cancelled before
  any send, or it has no row and its cell has ended (or is gone). The reservation is taken over
  with a conditional write naming the holder, and this cell delivers the route itself.
* ``PENDING``: the holder's row is queued and no worker has claimed it yet, or the holder's cell is
  running and has not written its row: it may still deliver, or be cancelled before it sends, so
  this cell waits and decides again on its next run. (Trusting a queued row was found wrong by
  ``make check-protocol``: a job's cancel can still cancel it, and the truster would report a
  delivery nobody made.)
"""

from __future__ import annotations

from .model import CONFIRMED_LEDGER, Cell, Intent

HOLDS = "holds"
ORPHANED = "orphaned"
PENDING = "pending"
UNCERTAIN = "uncertain"


def holder_verdict(holder_cell: Cell | None, holder_row: Intent | None) -> str:
    """``HOLDS``, ``UNCERTAIN``, ``ORPHANED`` or ``PENDING`` for the cell holding a work on a route
    (module doc)."""
    if holder_row is not None:
        if holder_row.status in CONFIRMED_LEDGER:
            return HOLDS
        if holder_row.actionable:
            return PENDING  # still the outbox's: it may yet be delivered, fail, or be cancelled first
        # ended unconfirmed: a worker may have posted it, or none ever did
        return UNCERTAIN if holder_row.may_be_downstream else ORPHANED
    if holder_cell is None or holder_cell.terminal:
        return ORPHANED
    return PENDING


def holder_of(owner_key: str) -> tuple[str, str]:
    """The (slot id, target id) of the cell an owner key names (``model.cell_key``)."""
    slot_id, _, target_id = owner_key.rpartition("#")
    return slot_id, target_id


__all__ = ["HOLDS", "ORPHANED", "PENDING", "UNCERTAIN", "holder_of", "holder_verdict"]
