"""The rule a recovering cell applies to a route another cell holds (``domain.reservation``): trust
the holder only when its row is confirmed or possibly downstream; take the route over only when
nothing of the holder can ever send it; otherwise (a queued row, a running holder) wait."""

from __future__ import annotations

import pytest

from pixivflow.domain.cells import CellStatus
from pixivflow.domain.model import Cell, Intent, LedgerStatus, OutboxStatus
from pixivflow.domain.reservation import HOLDS, ORPHANED, PENDING, holder_of, holder_verdict


def _row(status: str, outbox: str, attempts: int = 0) -> Intent:
    return Intent(slot_id="a@2026-12-01T0800", target_id="cats", route="r1", work_type="illustration", work_id="501",
                  idempotency_key="k", status=status, outbox_status=outbox, attempts=attempts)


def _cell(status: str) -> Cell:
    return Cell(slot_id="a@2026-12-01T0800", target_id="cats", status=status, work_id="501")


@pytest.mark.parametrize(("row", "verdict"), [
    (_row(LedgerStatus.DELIVERED, OutboxStatus.DONE, 1), HOLDS),  # confirmed
    (_row(LedgerStatus.DUPLICATE, OutboxStatus.DONE, 1), HOLDS),  # the downstream attested it
    (_row(LedgerStatus.PENDING, OutboxStatus.PENDING), PENDING),  # queued, never claimed: may yet be cancelled
    (_row(LedgerStatus.PENDING, OutboxStatus.RETRY_WAIT, 2), HOLDS),  # in flight, retrying
    (_row(LedgerStatus.PENDING, OutboxStatus.PROCESSING), HOLDS),  # a worker may be posting it now
    (_row(LedgerStatus.FAILED, OutboxStatus.DEAD, 3), HOLDS),  # sent, answer lost or failed: may be downstream
    (_row(LedgerStatus.FAILED, OutboxStatus.DEAD, 0), ORPHANED),  # dead before any send
    (_row(LedgerStatus.PENDING, OutboxStatus.CANCELLED, 0), ORPHANED),  # cancelled before any send
])
def test_the_holders_row_decides_whatever_its_cell_says(row: Intent, verdict: str) -> None:
    for cell in (None, _cell(CellStatus.SELECTED), _cell(CellStatus.FAILED)):
        assert holder_verdict(cell, row) == verdict


@pytest.mark.parametrize(("cell", "verdict"), [
    (None, ORPHANED),  # the holder's slot is gone
    (_cell(CellStatus.FAILED), ORPHANED),
    (_cell(CellStatus.SUBMITTED), ORPHANED),  # ended without a row of this work on this route
    (_cell(CellStatus.SELECTED), PENDING),  # running: its row may come
    (_cell(CellStatus.DELIVERY_PENDING), PENDING),
])
def test_without_a_row_a_holder_that_ended_is_orphaned_and_a_running_one_is_waited_for(cell, verdict: str) -> None:
    assert holder_verdict(cell, None) == verdict


def test_an_owner_key_names_the_holders_slot_and_target() -> None:
    assert holder_of("late-tokyo@manual-1a2b#dogs") == ("late-tokyo@manual-1a2b", "dogs")
