"""The rule a recovering cell applies to a route another cell holds (``domain.reservation``): trust
the holder only when its row is confirmed; take the route over only when nothing of the holder can
ever send it; send nothing and say so when its row ended after a post that may have reached the
route; otherwise (a row still in the outbox, a running holder) wait."""

from __future__ import annotations

import pytest

from pixivflow.domain.cells import CellStatus
from pixivflow.domain.model import Cell, Intent, LedgerStatus, OutboxStatus
from pixivflow.domain.reservation import HOLDS, ORPHANED, PENDING, UNCERTAIN, holder_of, holder_verdict


def _row(status: str, outbox: str, attempts: int = 0, claimed: str | None = None) -> Intent:
    return Intent(slot_id="a@2026-12-01T0800", target_id="cats", route="r1", work_type="illustration", work_id="501",
                  idempotency_key="k", status=status, outbox_status=outbox, attempts=attempts, unsettled_claim=claimed)


def _cell(status: str) -> Cell:
    return Cell(slot_id="a@2026-12-01T0800", target_id="cats", status=status, work_id="501")


@pytest.mark.parametrize(("row", "verdict"), [
    (_row(LedgerStatus.DELIVERED, OutboxStatus.DONE, 1), HOLDS),  # confirmed
    (_row(LedgerStatus.DUPLICATE, OutboxStatus.DONE, 1), HOLDS),  # the downstream attested it
    (_row(LedgerStatus.PENDING, OutboxStatus.PENDING), PENDING),  # queued, never claimed: may yet be cancelled
    (_row(LedgerStatus.PENDING, OutboxStatus.PENDING, 0, "dlv-1"), PENDING),  # deferred after a lapsed claim
    (_row(LedgerStatus.PENDING, OutboxStatus.RETRY_WAIT, 2), PENDING),  # retrying: may yet fail for good
    (_row(LedgerStatus.PENDING, OutboxStatus.PROCESSING, 0, "dlv-1"), PENDING),  # being posted: may be cancelled
    (_row(LedgerStatus.FAILED, OutboxStatus.DEAD, 3), UNCERTAIN),  # sent, answer lost or failed: may be downstream
    (_row(LedgerStatus.PENDING, OutboxStatus.CANCELLED, 0, "dlv-1"), UNCERTAIN),  # a worker may have posted it
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
