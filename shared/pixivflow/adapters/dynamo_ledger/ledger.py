"""The ledger on DynamoDB (see the package docstring for the items): every role of
``ports.LEDGER_ROLES`` on one table, in parts that build on each other: ``items`` (the client and
the low-level writes), ``slots``, ``cells``, ``deliveries``, ``operator``, and here the multi-item
steps that touch several of them."""

from __future__ import annotations

from typing import Any, Iterable

from botocore.exceptions import ClientError

from ...domain.cells import ACTIVE_SLOT_STATES, CellStatus
from ...domain.model import Intent, OutboxStatus, SlotState
from .expressions import _NO_LIVE_LEASE, _Update
from .cells import failure_entry, failure_keys
from .keys import cell_sk, slot_pk
from .operator import OperatorItems


class DynamoLedger(OperatorItems):
    """Every role of the ledger (``ports.LEDGER_ROLES``) on one DynamoDB table. ``client`` is a
    low-level boto3 DynamoDB client."""

    # -- multi-item steps ------------------------------------------------------------
    def terminalise_slot(
        self,
        state: SlotState,
        *,
        fail_cells: Iterable[str],
        guard_cells: Iterable[str],
        slot_status: str,
        reason_code: str,
        reason_message: str,
        now_ms: int,
    ) -> bool:
        """Stall terminalisation in ONE transaction."""
        actions: list[dict[str, Any]] = []
        pk = {"S": slot_pk(state.slot.slot_id)}
        for target_id in fail_cells:
            if target_id not in state.cells:  # never written: it is born failed, if still absent
                actions.append(self._put_failed_unwritten(state, target_id, reason_code, reason_message, now_ms))
                continue
            upd = self._fail_cell_update(state.slot.slot_id, target_id, state.cells[target_id].status, reason_code,
                                         reason_message, now_ms)
            upd.when(_NO_LIVE_LEASE, now=now_ms)
            actions.append(self._action("Update", pk, cell_sk(target_id), upd))
        for target_id in guard_cells:
            if target_id not in state.cells:
                continue  # an unwritten cell has no lease to guard (and is failed above, or not at all)
            cond = _Update().when(_NO_LIVE_LEASE, now=now_ms)
            # ... and still in the status read: a cell the outbox settled after the read (it may be
            # terminal, its rollup logging the outcome right now) makes the stall refuse, or the slot
            # would end ``failed`` under a record and a line saying otherwise (the cells decide the
            # outcome).
            cond.when("#status = :guard_was", guard_was=state.cells[target_id].status)
            kw = self._marshal_update(cond)
            kw.pop("UpdateExpression", None)
            actions.append({"ConditionCheck": {"TableName": self._table, "Key": {"pk": pk, "sk": {"S": cell_sk(target_id)}}, **kw}})
        actions.append(self._action("Update", pk, "META", self._slot_terminal_update(slot_status, reason_message, now_ms,
                                                                             [state.slot.status])))
        return self._transact(actions)

    def cancel_cells(
        self,
        state: SlotState,
        *,
        cells: Iterable[str],
        intents: Iterable[Intent],
        slot_status: str | None,
        reason_code: str,
        reason_message: str,
        now_ms: int,
    ) -> bool:
        """A consumer cancel in ONE transaction: each open cell failed (its lease
        released), each actionable outbox row of theirs cancelled, and (``slot_status``) the slot
        made terminal. Every item is conditioned on the state the caller read, so a worker that
        claimed a row meanwhile (it may be posting right now) makes the whole step refuse."""
        actions: list[dict[str, Any]] = []
        pk = {"S": slot_pk(state.slot.slot_id)}
        for target_id in cells:
            if target_id not in state.cells:  # never written: it is born failed, if still absent
                actions.append(self._put_failed_unwritten(state, target_id, reason_code, reason_message, now_ms))
                continue
            upd = self._fail_cell_update(state.slot.slot_id, target_id, state.cells[target_id].status, reason_code,
                                         reason_message, now_ms)
            actions.append(self._action("Update", pk, cell_sk(target_id), upd))
        for intent in intents:
            upd = _Update().set("outboxStatus", OutboxStatus.CANCELLED).set("updatedAt", now_ms).set("completedAt", now_ms)
            upd.set("lastError", "cancelled by consumer").remove("duePk", "dueSk", "leaseOwner", "leaseUntil")
            upd.when("#outboxStatus = :ob_was", ob_was=intent.outbox_status)
            # Never a row that began posting after the read (Intent.began_posting: its ``sending``
            # marker, or posts an attempt saved unrecorded and settled back to the status read):
            # the route's uncertain path owns it; the refused step is re-decided and
            # leaves it out.
            upd.when("attribute_not_exists(#sendingAt)")
            upd.when("attribute_not_exists(#sendProgress)")
            if intent.outbox_status == OutboxStatus.PROCESSING:
                upd.when("#leaseUntil = :lu_was", lu_was=intent.lease_until)  # only an expired claim, unchanged
            actions.append({"Update": {"TableName": self._table, "Key": {"pk": pk, "sk": {"S": self._intent_sk(intent)}}, **self._marshal_update(upd)}})
        if slot_status is not None:
            actions.append(self._action("Update", pk, "META", self._slot_terminal_update(slot_status, reason_message, now_ms,
                                                                                 ACTIVE_SLOT_STATES)))
        return self._transact(actions) if actions else True

    # -- pieces of the multi-item steps (one shape each, shared by the stall and the cancel) --
    def _fail_cell_update(self, slot_id: str, target_id: str, was: str, reason_code: str, reason_message: str,
                          now_ms: int) -> _Update:
        """A cell failed with its reason, its lease released, conditioned on the status the caller read."""
        upd = failure_entry(_Update().set("status", CellStatus.FAILED).set("updatedAt", now_ms).set("completedAt", now_ms),
                            slot_id, target_id, now_ms, reason_code)
        upd.set("lastError", reason_message).set("terminalReasonCode", reason_code)
        upd.set("terminalReasonMessage", reason_message).set("expiresAt", self._expires(now_ms))
        return upd.remove("leaseOwner", "leaseUntil").when("#status = :was", was=was)

    def _slot_terminal_update(self, status: str, reason_message: str, now_ms: int, from_states: Iterable[str]) -> _Update:
        """The slot made terminal. It stays in ActiveSlots until its outcome record is logged
        (leave_active_index)."""
        upd = _Update().set("status", status).set("completedAt", now_ms).set("updatedAt", now_ms)
        return upd.set("lastError", reason_message).set("expiresAt", self._expires(now_ms)).status_in(from_states)

    def _action(self, kind: str, pk: dict[str, Any], sk: str, upd: _Update) -> dict[str, Any]:
        return {kind: {"TableName": self._table, "Key": {"pk": pk, "sk": {"S": sk}}, **self._marshal_update(upd)}}

    def _transact(self, actions: list[dict[str, Any]]) -> bool:
        """One all-or-nothing write. False when a condition refused it (``_call`` maps every other
        failure to LedgerUnavailable)."""
        try:
            self._call("transact_write_items", TransactItems=actions)
            return True
        except ClientError:  # only TransactionCanceledException gets past _call
            return False

    def _put_failed_unwritten(self, state: SlotState, target_id: str, reason_code: str, reason_message: str,
                              now_ms: int) -> dict[str, Any]:
        """A transaction's Put of a cell that was never written, failed, on condition that it still is
        not (a claim that creates it meanwhile makes the whole step refuse, like any changed cell)."""
        cell = state.cell(target_id)
        assert cell is not None and cell.virtual
        cell.status, cell.updated_at, cell.completed_at = CellStatus.FAILED, now_ms, now_ms
        cell.last_error, cell.terminal_reason_code, cell.terminal_reason_message = reason_message, reason_code, reason_message
        item = self._unwritten_cell_item(cell)
        item["expiresAt"] = self._expires(now_ms)
        item.update(failure_keys(cell.slot_id, target_id, now_ms, reason_code))
        # ... or that holds an item that is not a cell (no status: SlotState.malformed), which it replaces.
        return {"Put": {"TableName": self._table, "Item": self._marshal(item),
                        "ConditionExpression": "attribute_not_exists(pk) OR attribute_not_exists(#status)",
                        "ExpressionAttributeNames": {"#status": "status"}}}
