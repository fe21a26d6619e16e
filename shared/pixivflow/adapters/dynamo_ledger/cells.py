"""The cell items: claims, leases, moves and the topic tag spaces (``CellLeases``, ``CellMoves``, ``TopicSpaces``)."""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

from botocore.exceptions import ClientError

from ...domain.cells import ALLOWED_FROM, TERMINAL_CELL_STATES, CellStatus
from ...domain.failures import is_listed_failure
from ...domain.model import Cell
from ..dynamodb_base import is_conditional_failure
from .codec import (
    _CELL_FIELDS,
    _from_ddb,
    _item,
    cell_from_item,
)
from .expressions import _NO_LIVE_LEASE, _Update
from .keys import FAILURES_PK, cell_sk, failure_sk, slot_pk
from .slots import SlotItems



def failure_keys(slot_id: str, target_id: str, failed_at: int, reason_code: str | None) -> dict[str, str]:
    """The FailedCells keys a failing write gives the cell, in the same write: none for a failure the
    Failure Center does not list (``domain.failures.is_listed_failure``). Every path that fails a
    cell (an update, or the Put of a never-written one) takes them from here, so no listed failure
    is missing from the page."""
    return {"failPk": FAILURES_PK, "failSk": failure_sk(failed_at, slot_id, target_id)} if is_listed_failure(reason_code) else {}


def failure_entry(upd: _Update, slot_id: str, target_id: str, failed_at: int, reason_code: str | None) -> _Update:
    """``failure_keys`` set by an update that fails the cell."""
    for name, value in failure_keys(slot_id, target_id, failed_at, reason_code).items():
        upd.set(name, value)
    return upd

class CellItems(SlotItems):
    """``SLOT#<id>/CELL#<target>`` and the topic tag spaces."""

    # -- cells -------------------------------------------------------------------
    def claim_cell(self, slot_id: str, target_id: str, owner: str, now_ms: int, ttl_ms: int, *,
                   unwritten: Cell | None = None) -> Cell | None:
        """Take the cell's lease. None when terminal, missing or leased by another.

        ``unwritten``: the pending cell the slot's snapshot stands for (``SlotState.cell``); when its
        item does not exist yet, this same conditional write creates it, claimed (one write: the
        cell's first claim is its materialisation). Without it a missing cell is never created."""
        upd = _Update(or_absent=unwritten is not None)
        upd.set("leaseOwner", owner).set("leaseUntil", now_ms + ttl_ms).set("heartbeatAt", now_ms)
        upd.set("startedAt", now_ms, if_not_exists=True).set("updatedAt", now_ms).add("attemptCount", 1)
        # A new attempt has not failed yet: the last failure's reason is the previous attempt's.
        # What this one comes to records its own (record_cell_error, defer_cell).
        upd.remove("retryReasonCode")
        if unwritten is not None:
            self._materialise(upd, unwritten)
        upd.when(
            "attribute_not_exists(#leaseUntil) OR #leaseUntil <= :now OR #leaseOwner = :owner",
            now=now_ms,
            owner=owner,
        )
        upd.status_in(set(CellStatus) - TERMINAL_CELL_STATES)
        item = self._update(slot_pk(slot_id), cell_sk(target_id), upd, return_new=True)
        return cell_from_item(item) if item else None

    @staticmethod
    def _materialise(upd: _Update, cell: Cell) -> None:
        """The attributes a cell item is born with, set only where absent (an existing item keeps its
        own) and only where this write does not set them itself."""
        for attr, value in (("entity", "cell"), ("slotId", cell.slot_id), ("targetId", cell.target_id),
                            ("status", CellStatus.PENDING), ("workType", cell.work_type), ("createdAt", cell.created_at),
                            ("dispatchedAt", cell.dispatched_at)):
            if value is not None and f"#{attr}" not in upd.names:
                upd.set(attr, value, if_not_exists=True)

    def _unwritten_cell_item(self, cell: Cell) -> dict[str, Any]:
        return {"pk": slot_pk(cell.slot_id), "sk": cell_sk(cell.target_id), "entity": "cell", **_item(_CELL_FIELDS, cell)}

    def heartbeat_cell(self, slot_id: str, target_id: str, owner: str, now_ms: int, ttl_ms: int) -> bool:
        upd = _Update().set("leaseUntil", now_ms + ttl_ms).set("heartbeatAt", now_ms)
        upd.when("#leaseOwner = :owner", owner=owner)
        return self._update(slot_pk(slot_id), cell_sk(target_id), upd) is not None

    def save_selection_checkpoint(self, slot_id: str, target_id: str, owner: str, now_ms: int,
                                  checkpoint: Mapping[str, Any]) -> bool:
        """Record how far a topic selection got, only while ``owner`` holds the lease:
        a zombie executor cannot overwrite its successor's, and a cell that moved on (every move
        drops the lease) takes no checkpoint."""
        upd = _Update().set("selectionCheckpoint", dict(checkpoint)).set("heartbeatAt", now_ms)
        upd.when("#leaseOwner = :checkpointOwner", checkpointOwner=owner)
        return self._update(slot_pk(slot_id), cell_sk(target_id), upd) is not None

    # -- topic tag spaces (cached per (type, topic) for cacheDays) ------------------------------
    def get_topic_space(self, key: str, now_ms: int) -> dict[str, Any] | None:
        """The cached space of ``key`` with its age, fresh or stale (the caller decides); None when absent."""
        item = self._get(f"TOPIC#{key}", "META")
        if not item:
            return None
        return {"space": json.loads(item.get("space") or "[]"), "resolvedAt": _from_ddb(item.get("resolvedAt")),
                "freshUntil": _from_ddb(item.get("freshUntil")), "topic": item.get("topic")}

    def put_topic_space(self, key: str, topic: str, work_type: str, space: list[Any], now_ms: int,
                        fresh_until_ms: int) -> bool:
        """Store a resolved space unless a fresh one is already there (two executors resolving the same
        topic keep the first). The item expires by TTL a retention period after it goes stale."""
        item = {"pk": f"TOPIC#{key}", "sk": "META", "entity": "topicSpace", "topic": topic, "workType": work_type,
                "space": json.dumps(space, separators=(",", ":"), ensure_ascii=False), "resolvedAt": now_ms,
                "freshUntil": fresh_until_ms, "expiresAt": self._expires(fresh_until_ms)}
        try:
            self._call("put_item", TableName=self._table, Item=self._marshal(item),
                       ConditionExpression="attribute_not_exists(pk) OR freshUntil <= :now",
                       ExpressionAttributeValues={":now": {"N": str(now_ms)}})
            return True
        except ClientError as exc:
            if is_conditional_failure(exc):
                return False
            raise

    def release_cell(self, slot_id: str, target_id: str, owner: str, now_ms: int, *, no_attempt: bool = False) -> bool:
        """Drop the lease; keep heartbeatAt (the slot's progress clock). ``no_attempt``: the claim
        started no execution (or continues one), so its attempt is given back."""
        upd = _Update().remove("leaseOwner", "leaseUntil").set("updatedAt", now_ms)
        if no_attempt:
            upd.add("attemptCount", -1)
        upd.when("#leaseOwner = :owner", owner=owner)
        return self._update(slot_pk(slot_id), cell_sk(target_id), upd) is not None

    def bind_work(self, slot_id: str, target_id: str, work_id: str, work_type: str, now_ms: int) -> tuple[bool, str | None]:
        """CAS bind: first work wins, rebinding the same work is idempotent.

        Returns (won, authoritative work id)."""
        upd = _Update().set("workId", work_id).set("workType", work_type, if_not_exists=True)
        upd.set("updatedAt", now_ms)
        upd.set("status", CellStatus.SELECTED)
        upd.when("attribute_not_exists(#workId) OR #workId = :w", w=work_id)
        upd.status_in([CellStatus.PENDING, CellStatus.SELECTED])
        item = self._update(slot_pk(slot_id), cell_sk(target_id), upd, return_new=True)
        if item is not None:
            return True, work_id
        cell = self.get_cell(slot_id, target_id)
        current = cell.work_id if cell else None
        return current == work_id, current

    def release_work(self, slot_id: str, target_id: str, work_id: str, now_ms: int) -> bool:
        """Provisional release: only while the cell holds exactly this work and is `selected`."""
        upd = _Update().remove("workId").set("status", CellStatus.PENDING).set("updatedAt", now_ms)
        upd.when("#workId = :w", w=work_id).status_in([CellStatus.SELECTED])
        return self._update(slot_pk(slot_id), cell_sk(target_id), upd) is not None

    def transition_cell(
        self,
        slot_id: str,
        target_id: str,
        to_status: str,
        now_ms: int,
        *,
        owner: str | None = None,
        require_no_live_lease: bool = False,
        from_states: Iterable[str] | None = None,
        work_id: str | None = None,
        work_type: str | None = None,
        last_error: str | None = None,
        keep_error: bool = False,
        reason_code: str | None = None,
        reason_message: str | None = None,
        candidate_report: Mapping[str, Any] | None = None,
        release_lease: bool = True,
        no_attempt: bool = False,
    ) -> bool:
        """One conditional FSM move. ``owner`` requires the caller to hold the lease; ``no_attempt``
        gives the claim's attempt back (the claim started no execution)."""
        allowed = set(ALLOWED_FROM[to_status])
        if from_states is not None:
            allowed &= set(from_states)
        if not allowed:
            return False
        upd = _Update().set("status", to_status).set("updatedAt", now_ms)
        if to_status in TERMINAL_CELL_STATES:
            upd.set("completedAt", now_ms).set("expiresAt", self._expires(now_ms))
        if to_status == CellStatus.FAILED:
            failure_entry(upd, slot_id, target_id, now_ms, reason_code)
        if work_id is not None:
            upd.set("workId", work_id, if_not_exists=True)
        if work_type is not None:
            upd.set("workType", work_type, if_not_exists=True)
        if not keep_error:
            if last_error is not None:
                upd.set("lastError", last_error[:1000])
            else:
                upd.remove("lastError")
        if reason_code is not None:
            upd.set("terminalReasonCode", reason_code[:64])
            upd.set("terminalReasonMessage", (reason_message or "")[:400])
        if candidate_report is not None:
            upd.set("candidateReport", dict(candidate_report))
        if release_lease:
            upd.remove("leaseOwner", "leaseUntil")
        if no_attempt:
            upd.add("attemptCount", -1)
        if owner is not None:
            upd.when("#leaseOwner = :owner", owner=owner)
        if require_no_live_lease:
            upd.when(_NO_LIVE_LEASE, now=now_ms)
        upd.status_in(allowed)
        return self._update(slot_pk(slot_id), cell_sk(target_id), upd) is not None

    # -- named cell moves: each is one fixed combination of transition_cell's guards -------------
    # Services call these; transition_cell itself stays for tooling and the ledger's own tests.
    def move_cell_as_owner(self, slot_id: str, target_id: str, to_status: str, now_ms: int, owner: str,
                           **fields: Any) -> bool:
        """The executor holding the cell's lease records an outcome and gives the lease back."""
        return self.transition_cell(slot_id, target_id, to_status, now_ms, owner=owner, **fields)

    def settle_unleased_cell(self, slot_id: str, target_id: str, to_status: str, now_ms: int, **fields: Any) -> bool:
        """Converge a cell no executor holds (an abandoned delivery_pending / artifact_ready
        cell): refused while any lease on it is live."""
        return self.transition_cell(slot_id, target_id, to_status, now_ms, require_no_live_lease=True, **fields)

    def settle_cell_from_delivery(self, slot_id: str, target_id: str, to_status: str, now_ms: int, **fields: Any) -> bool:
        """The outbox settles the cell its ACK decided; an executor's lease, if any, is left as it is."""
        return self.transition_cell(slot_id, target_id, to_status, now_ms, release_lease=False, **fields)

    def fail_cell_if_unchanged(self, slot_id: str, target_id: str, seen_status: str, now_ms: int, **fields: Any) -> bool:
        """Fail a cell only while it is still in the state the caller saw (the sweep's timeout rule)."""
        return self.transition_cell(slot_id, target_id, CellStatus.FAILED, now_ms, from_states=[seen_status], **fields)

    def record_cell_error(self, slot_id: str, target_id: str, error: str, now_ms: int, *, owner: str | None = None,
                          candidate_report: Mapping[str, Any] | None = None, dispatched_at: int | None = None,
                          reason_code: str | None = None) -> bool:
        """A retryable failure: only the error and its reason are recorded; the bound work stays."""
        upd = _Update().set("lastError", error[:1000]).set("updatedAt", now_ms).remove("leaseOwner", "leaseUntil")
        upd.set("retryReasonCode", reason_code)  # None removes a previous failure's reason
        if dispatched_at is not None:
            upd.set("dispatchedAt", dispatched_at)
        if candidate_report is not None:
            upd.set("candidateReport", dict(candidate_report))
        if owner is not None:
            upd.when("#leaseOwner = :owner", owner=owner)
        upd.status_in(set(CellStatus) - TERMINAL_CELL_STATES)
        return self._update(slot_pk(slot_id), cell_sk(target_id), upd) is not None

    def defer_cell(self, slot_id: str, target_id: str, owner: str, now_ms: int, due_at: int, *,
                   candidate_report: Mapping[str, Any], reason_code: str | None = None) -> bool:
        """Hand a claimed cell back to its queue until ``due_at`` without using an attempt (its
        account had no free permit, or was cooling down). The claim's attempt is given back,
        the lease dropped, and ``dispatchedAt`` set to the due time so the sweep's recovery waits
        for the delayed message instead of re-dispatching it earlier. Only the lease holder may."""
        upd = _Update().remove("leaseOwner", "leaseUntil").set("dispatchedAt", int(due_at)).set("updatedAt", now_ms)
        upd.add("attemptCount", -1).set("candidateReport", dict(candidate_report))
        if reason_code is not None:  # waiting out a cooldown: its cause is what the cell is kept from
            upd.set("retryReasonCode", reason_code)
        upd.when("#leaseOwner = :owner", owner=owner)
        upd.status_in(set(CellStatus) - TERMINAL_CELL_STATES)
        return self._update(slot_pk(slot_id), cell_sk(target_id), upd) is not None

    def mark_dispatched(self, slot_id: str, target_id: str, previous: int | None, now_ms: int, *,
                        unwritten: Cell | None = None) -> bool:
        """Claim the right to re-dispatch a cell (so concurrent sweeps send once). ``unwritten``: the
        pending cell an unwritten snapshot target stands for; its item is created by this write."""
        upd = _Update(or_absent=unwritten is not None).set("dispatchedAt", now_ms)
        if unwritten is not None:
            self._materialise(upd, unwritten)
        if previous is None:
            upd.when("attribute_not_exists(#dispatchedAt)")
        else:
            upd.when("#dispatchedAt = :prev", prev=previous)
        upd.when(_NO_LIVE_LEASE, now=now_ms)
        upd.status_in(set(CellStatus) - TERMINAL_CELL_STATES)
        return self._update(slot_pk(slot_id), cell_sk(target_id), upd) is not None
