"""The Ledger port on DynamoDB (see the package docstring for the items)."""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

from botocore.exceptions import ClientError

from ...domain.cells import ACTIVE_SLOT_STATES, ALLOWED_FROM, TERMINAL_CELL_STATES, TERMINAL_SLOT_STATES, CellStatus
from ...domain.model import ACTIONABLE_OUTBOX, Cell, Intent, LedgerStatus, OutboxStatus, Slot, SlotState
from ...domain.pause import SchedulePause
from ...domain.sweep_state import ActiveRow, SparseIndex
from ...ports import Log
from ..dynamodb_base import DynamoItems, is_conditional_failure, refused_item
from .codec import (
    _CELL_FIELDS, _INTENT_FIELDS, _SLOT_FIELDS, MalformedItem, _from_ddb, _item, _to_ddb, cell_from_item, intent_from_item,
    slot_from_item,
)
from .expressions import _NO_LIVE_LEASE, _Update
from .keys import ACTIVE_INDEX, CALLBACK_INDEX, DUE_INDEX, SHARDS, _ms13, cell_sk, intent_sk, shard_of, slot_pk, work_pk


_is_conditional_failure = is_conditional_failure


# How long after its creation a delivery row may still be retried, on top of the retention.
INTENT_RETRY_HORIZON_S = 7 * 86_400


class DynamoLedger(DynamoItems):
    """Every role of the ledger (``ports.LEDGER_ROLES``) on one DynamoDB table. ``client`` is a
    low-level boto3 DynamoDB client; ``log`` is where a cell item that cannot be read is reported:
    the read goes on without it (SlotState.malformed), one error line says which item and why."""

    def __init__(self, client: Any, table: str, *, retention_days: int = 30, log: Log | None = None) -> None:
        super().__init__(client, table, retention_days=retention_days)
        self.log = log

    # -- low level ---------------------------------------------------------------
    def _key(self, pk: str, sk: str) -> dict[str, Any]:
        return {"pk": {"S": pk}, "sk": {"S": sk}}

    def _update(self, pk: str, sk: str, upd: _Update, *, return_new: bool = False) -> dict[str, Any] | None:
        kwargs = self._marshal_update(upd)
        if return_new:
            kwargs["ReturnValues"] = "ALL_NEW"
        try:
            resp = self._call("update_item", TableName=self._table, Key=self._key(pk, sk), **kwargs)
        except ClientError:
            return None
        if return_new:
            return self._unmarshal(resp.get("Attributes", {}))
        return {}

    def _put_new(self, item: dict[str, Any]) -> tuple[bool, dict[str, Any] | None]:
        """Insert if absent. Returns (created, existing item when it was not created)."""
        try:
            self._call(
                "put_item",
                TableName=self._table,
                Item=self._marshal(item),
                ConditionExpression="attribute_not_exists(pk)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            return True, None
        except ClientError as exc:
            old = refused_item(exc)
            return False, self._unmarshal(old) if old else None

    def _get(self, pk: str, sk: str) -> dict[str, Any] | None:
        resp = self._call("get_item", TableName=self._table, Key=self._key(pk, sk), ConsistentRead=True)
        item = resp.get("Item")
        return self._unmarshal(item) if item else None

    # -- slots -------------------------------------------------------------------
    def create_slot(self, slot: Slot) -> tuple[Slot, bool]:
        """Insert the slot (the commit point of admission). Returns the stored slot and whether it is new."""
        item = {"pk": slot_pk(slot.slot_id), "sk": "META", "entity": "slot", **_item(_SLOT_FIELDS, slot)}
        item["activePk"] = f"ACTIVE#{shard_of(slot.slot_id):02d}"
        item["activeSk"] = f"{_ms13(slot.created_at)}#{slot.slot_id}"
        created, existing = self._put_new(item)
        if created:
            slot.open = True
            return slot, True
        if existing is None:  # the endpoint did not return the old item: read it
            existing = self._get(slot_pk(slot.slot_id), "META")
        return slot_from_item(existing or item), False

    def ensure_cells(self, slot: Slot, target_types: Mapping[str, str], now_ms: int, existing: Iterable[str] = ()) -> list[str]:
        """Materialise every snapshot cell that does not exist yet. Returns the target ids created."""
        have = set(existing)
        created = []
        for target_id in slot.target_ids:
            if target_id in have:
                continue
            cell = Cell(
                slot_id=slot.slot_id,
                target_id=target_id,
                status=CellStatus.PENDING,
                work_type=target_types.get(target_id),
                created_at=now_ms,
                updated_at=now_ms,
                dispatched_at=now_ms,
            )
            ok, _ = self._put_new({"pk": slot_pk(slot.slot_id), "sk": cell_sk(target_id), "entity": "cell", **_item(_CELL_FIELDS, cell)})
            if ok:
                created.append(target_id)
        return created

    def get_slot(self, slot_id: str) -> Slot | None:
        item = self._get(slot_pk(slot_id), "META")
        return slot_from_item(item) if item else None

    def _readable_cell(self, item: Mapping[str, Any]) -> Cell | MalformedItem:
        try:
            return cell_from_item(item)
        except MalformedItem as exc:
            if self.log is not None:
                self.log("error", "a cell item cannot be read; it reads as its unwritten pending cell until "
                         "a claim or the sweep completes it", event="ledger.malformed_item", pk=item.get("pk"),
                         sk=item.get("sk"), error=str(exc), attributes=sorted(item))
            return exc

    def get_cell(self, slot_id: str, target_id: str) -> Cell | None:
        item = self._get(slot_pk(slot_id), cell_sk(target_id))
        cell = self._readable_cell(item) if item else None
        return cell if isinstance(cell, Cell) else None

    def load(self, slot_id: str) -> SlotState | None:
        """Read the whole slot partition strongly consistently."""
        items: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": slot_pk(slot_id)}},
            "ConsistentRead": True,
        }
        while True:
            resp = self._call("query", **kwargs)
            items.extend(self._unmarshal(i) for i in resp.get("Items", []))
            if "LastEvaluatedKey" not in resp:
                break
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]
        meta = next((i for i in items if i["sk"] == "META"), None)
        if meta is None:
            return None
        state = SlotState(slot=slot_from_item(meta))
        for item in items:
            sk = item["sk"]
            if sk.startswith("CELL#"):
                cell = self._readable_cell(item)
                if isinstance(cell, Cell):
                    state.cells[cell.target_id] = cell
                else:
                    state.malformed[sk[len("CELL#"):]] = str(cell)
            elif sk.startswith("DLV#"):
                state.intents.append(intent_from_item(item))
            elif sk.startswith("EVT#L#"):
                state.events[sk[len("EVT#L#"):]] = {"ts": _from_ddb(item.get("ts"))}
        return state

    def mark_slot_running(self, slot_id: str, now_ms: int) -> bool:
        upd = _Update().set("status", "running").set("startedAt", now_ms, if_not_exists=True)
        upd.set("updatedAt", now_ms).status_in(["pending"])
        return self._update(slot_pk(slot_id), "META", upd) is not None

    def finish_slot(self, slot_id: str, status: str, now_ms: int, *, last_error: str | None = None, force_from: Iterable[str] = ACTIVE_SLOT_STATES) -> bool:
        """Close an active slot: terminal status and out of the active index, in one write."""
        upd = _Update().set("status", status).set("completedAt", now_ms).set("updatedAt", now_ms)
        upd.set("expiresAt", self._expires(now_ms)).remove("activePk", "activeSk")
        if last_error is not None:
            upd.set("lastError", last_error[:1000])
        upd.status_in(force_from)
        return self._update(slot_pk(slot_id), "META", upd) is not None

    def put_event_once(self, slot_id: str, kind: str, detail: Mapping[str, Any], now_ms: int) -> bool:
        """Write a lifecycle event that may exist at most once. True when this call created it."""
        item = {
            "pk": slot_pk(slot_id),
            "sk": f"EVT#L#{kind}",
            "entity": "event",
            "slotId": slot_id,
            "kind": kind,
            "ts": now_ms,
            "detail": json.dumps(detail, separators=(",", ":"), ensure_ascii=False),
            "expiresAt": self._expires(now_ms),
        }
        created, _ = self._put_new(item)
        return created

    def get_event(self, slot_id: str, kind: str) -> dict[str, Any] | None:
        item = self._get(slot_pk(slot_id), f"EVT#L#{kind}")
        if not item:
            return None
        return {"kind": item.get("kind"), "ts": _from_ddb(item.get("ts")), "detail": json.loads(item.get("detail") or "{}")}

    def claim_event_relog(self, slot_id: str, kind: str, now_ms: int, quiet_ms: int) -> bool:
        """The once-marker of an orphaned event's re-log (services.rollup.record_outcome): two sweeps
        may find one orphaned outcome record at once, and only one may log it. ``relogAt`` is
        written only when no claim was made in the last ``quiet_ms``, so one caller wins, and a
        winner that dies before logging leaves it to the next after that."""
        upd = _Update().set("relogAt", now_ms)
        upd.when("attribute_not_exists(#relogAt) OR #relogAt <= :quiet_before", quiet_before=now_ms - quiet_ms)
        return self._update(slot_pk(slot_id), f"EVT#L#{kind}", upd) is not None

    def leave_active_index(self, slot_id: str) -> bool:
        """Drop a slot the stall transaction made terminal from ActiveSlots (once its record is logged)."""
        upd = _Update().remove("activePk", "activeSk").when("attribute_exists(#activePk)")
        upd.status_in(set(TERMINAL_SLOT_STATES))
        return self._update(slot_pk(slot_id), "META", upd) is not None

    def active_slots(self, limit_per_shard: int = 100) -> list[tuple[str, int]]:
        """(slotId, createdAt) of every slot in the active index, oldest first."""
        found: list[tuple[str, int]] = []
        for shard in range(SHARDS):
            kwargs: dict[str, Any] = {
                "TableName": self._table,
                "IndexName": ACTIVE_INDEX,
                "KeyConditionExpression": "activePk = :p",
                "ExpressionAttributeValues": {":p": {"S": f"ACTIVE#{shard:02d}"}},
                "Limit": limit_per_shard,
            }
            resp = self._call("query", **kwargs)
            for raw in resp.get("Items", []):
                item = self._unmarshal(raw)
                created, _, slot_id = item["activeSk"].partition("#")
                found.append((slot_id, int(created)))
        found.sort(key=lambda x: (x[1], x[0]))
        return found

    def active_shards(self) -> int:
        return SHARDS

    def active_page(self, shard: int, after: str, limit: int) -> tuple[list[ActiveRow], bool]:
        """One page of one ActiveSlots shard past ``after`` (an ``activeSk``): the sweep's walk
        (services/sweep.py) resumes from the last position it reached, so every live slot is
        visited however many there are. ``LastEvaluatedKey`` says more may follow."""
        cond, values = "activePk = :p", {":p": {"S": f"ACTIVE#{shard:02d}"}}
        if after:
            cond, values[":after"] = cond + " AND activeSk > :after", {"S": after}
        resp = self._call("query", TableName=self._table, IndexName=ACTIVE_INDEX, KeyConditionExpression=cond,
                          ExpressionAttributeValues=values, Limit=limit)
        rows = []
        for raw in resp.get("Items", []):
            position = raw["activeSk"]["S"]
            created, _, slot_id = position.partition("#")
            rows.append(ActiveRow(slot_id, int(created), position))
        return rows, bool(resp.get("LastEvaluatedKey"))

    def occupied_indexes(self) -> frozenset[SparseIndex]:
        """One ``Scan`` of at most one entry per sparse index (0.5 read units each when empty)
        instead of a Query per shard: an idle tick stays cheap. The indexes hold live work only, so
        an idle ledger's are empty. A page with no entry but a ``LastEvaluatedKey`` is not proof of
        emptiness: it counts as occupied."""
        occupied: set[SparseIndex] = set()
        for kind, index in (("active", ACTIVE_INDEX), ("due", DUE_INDEX), ("callbacks", CALLBACK_INDEX)):
            resp = self._call("scan", TableName=self._table, IndexName=index, Limit=1)
            if resp.get("Items") or resp.get("LastEvaluatedKey"):
                occupied.add(kind)  # type: ignore[arg-type]  # kind is one of SparseIndex's values
        return frozenset(occupied)

    def slot_ids(self) -> list[str]:
        """Every slot id in the table: a FULL SCAN, for local tooling (the demo) only."""
        ids: list[str] = []
        kwargs: dict[str, Any] = {"TableName": self._table, "FilterExpression": "sk = :m AND begins_with(pk, :p)",
                                  "ExpressionAttributeValues": {":m": {"S": "META"}, ":p": {"S": "SLOT#"}},
                                  "ProjectionExpression": "slotId"}
        while True:
            resp = self._call("scan", **kwargs)
            ids.extend(self._unmarshal(i)["slotId"] for i in resp.get("Items", []))
            if "LastEvaluatedKey" not in resp:
                return sorted(ids)
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

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
            if _is_conditional_failure(exc):
                return False
            raise

    def release_cell(self, slot_id: str, target_id: str, owner: str, now_ms: int) -> bool:
        """Drop the lease; keep heartbeatAt (the slot's progress clock)."""
        upd = _Update().remove("leaseOwner", "leaseUntil").set("updatedAt", now_ms)
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
    ) -> bool:
        """One conditional FSM move. ``owner`` requires the caller to hold the lease."""
        allowed = set(ALLOWED_FROM[to_status])
        if from_states is not None:
            allowed &= set(from_states)
        if not allowed:
            return False
        upd = _Update().set("status", to_status).set("updatedAt", now_ms)
        if to_status in TERMINAL_CELL_STATES:
            upd.set("completedAt", now_ms).set("expiresAt", self._expires(now_ms))
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
                          candidate_report: Mapping[str, Any] | None = None, dispatched_at: int | None = None) -> bool:
        """A retryable failure: only the error is recorded; the bound work stays."""
        upd = _Update().set("lastError", error[:1000]).set("updatedAt", now_ms).remove("leaseOwner", "leaseUntil")
        if dispatched_at is not None:
            upd.set("dispatchedAt", dispatched_at)
        if candidate_report is not None:
            upd.set("candidateReport", dict(candidate_report))
        if owner is not None:
            upd.when("#leaseOwner = :owner", owner=owner)
        upd.status_in(set(CellStatus) - TERMINAL_CELL_STATES)
        return self._update(slot_pk(slot_id), cell_sk(target_id), upd) is not None

    def defer_cell(self, slot_id: str, target_id: str, owner: str, now_ms: int, due_at: int, *,
                   candidate_report: Mapping[str, Any]) -> bool:
        """Hand a claimed cell back to its queue until ``due_at`` without using an attempt (its
        account had no free permit, or was cooling down). The claim's attempt is given back,
        the lease dropped, and ``dispatchedAt`` set to the due time so the sweep's recovery waits
        for the delayed message instead of re-dispatching it earlier. Only the lease holder may."""
        upd = _Update().remove("leaseOwner", "leaseUntil").set("dispatchedAt", int(due_at)).set("updatedAt", now_ms)
        upd.add("attemptCount", -1).set("candidateReport", dict(candidate_report))
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

    # -- route-work ownership (selection-time dedupe across slots) ----------------
    def reserve_work(self, route: str, work_type: str, work_id: str, owner_key: str, now_ms: int, *, executor: str | None = None) -> tuple[bool, str | None]:
        """Claim a work on a route for one cell. Returns (ok, current owner).

        The cell that owns it may re-claim it; doing so records the executor now holding it, so a
        zombie executor of the same cell can no longer release it (see ``release_work_reservation``)."""
        item = {
            "pk": work_pk(route, work_type, work_id),
            "sk": "OWNER",
            "entity": "work",
            "route": route,
            "workType": work_type,
            "workId": work_id,
            "ownerKey": owner_key,
            "createdAt": now_ms,
        }
        if executor:
            item["executor"] = executor
        try:
            self._call(
                "put_item",
                TableName=self._table,
                Item=self._marshal(item),
                ConditionExpression="attribute_not_exists(pk) OR ownerKey = :me",
                ExpressionAttributeValues={":me": {"S": owner_key}},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            return True, owner_key
        except ClientError as exc:
            old = refused_item(exc)
            owner = self._unmarshal(old).get("ownerKey") if old else None
            return False, owner

    def release_work_reservation(self, route: str, work_type: str, work_id: str, owner_key: str, *, executor: str | None = None) -> bool:
        """Free a work on a route. With ``executor``, only while that executor still holds it."""
        condition = "ownerKey = :me"
        values: dict[str, Any] = {":me": {"S": owner_key}}
        if executor:
            condition += " AND executor = :ex"
            values[":ex"] = {"S": executor}
        try:
            self._call(
                "delete_item",
                TableName=self._table,
                Key=self._key(work_pk(route, work_type, work_id), "OWNER"),
                ConditionExpression=condition,
                ExpressionAttributeValues=values,
            )
            return True
        except ClientError:
            return False

    def work_owners(self, route: str, work_type: str, work_ids: Iterable[str], *, consistent: bool = True) -> dict[str, str]:
        """Owner key of each work already held on the route (batch read; ``consistent=False`` halves
        its read units where a stale answer only costs a refused reservation)."""
        ids = list(dict.fromkeys(work_ids))
        owners: dict[str, str] = {}
        for start in range(0, len(ids), 100):
            keys = [self._key(work_pk(route, work_type, w), "OWNER") for w in ids[start : start + 100]]
            request: dict[str, Any] | None = {self._table: {"Keys": keys, "ConsistentRead": consistent,
                                                            "ProjectionExpression": "workId, ownerKey"}}
            while request:
                resp = self._call("batch_get_item", RequestItems=request)
                for raw in resp.get("Responses", {}).get(self._table, []):
                    item = self._unmarshal(raw)
                    owners[str(item["workId"])] = item["ownerKey"]
                request = resp.get("UnprocessedKeys") or None
        return owners

    # -- intents and their outbox rows -------------------------------------------
    def put_intent(self, intent: Intent) -> tuple[Intent, bool]:
        """Insert-if-absent. The row is NOT in DueOutbox: while its slot is open the sweep finds it
        through the slot (ActiveSlots, which it reads anyway), and a slot never closes with an
        actionable row outside the index (``index_due``). Two index writes less per delivery."""
        sk = intent_sk(intent.target_id, intent.route, intent.work_type, intent.work_id)
        item = {"pk": slot_pk(intent.slot_id), "sk": sk, "entity": "intent", **_item(_INTENT_FIELDS, intent)}
        # A delivery row outlives its send by the retention, like its slot: set once, at creation,
        # past any retry (12 attempts at most 6 h apart end within 3 days), so no settle pays for it.
        item["expiresAt"] = self._expires(intent.created_at) + INTENT_RETRY_HORIZON_S
        created, existing = self._put_new(item)
        if created:
            return intent, True
        if existing is None:
            existing = self._get(slot_pk(intent.slot_id), sk)
        return intent_from_item(existing or item), False

    def get_intent(self, slot_id: str, target_id: str, route: str, work_type: str, work_id: str) -> Intent | None:
        item = self._get(slot_pk(slot_id), intent_sk(target_id, route, work_type, work_id))
        return intent_from_item(item) if item else None

    def claim_intent(self, intent: Intent, owner: str, now_ms: int, lease_ms: int, *, ignore_due: bool = False) -> Intent | None:
        """Outbox claim: pending/retry_wait and due, or processing with an expired lease."""
        upd = _Update().set("outboxStatus", OutboxStatus.PROCESSING).set("leaseOwner", owner)
        upd.set("leaseUntil", now_ms + lease_ms).set("updatedAt", now_ms)
        waiting = "#outboxStatus IN (:ob_p, :ob_r)" if ignore_due else "(#outboxStatus IN (:ob_p, :ob_r) AND #nextAttemptAt <= :now)"
        upd.when(
            f"{waiting} OR (#outboxStatus = :ob_proc AND #leaseUntil <= :now)",
            now=now_ms,
            ob_p=OutboxStatus.PENDING,
            ob_r=OutboxStatus.RETRY_WAIT,
            ob_proc=OutboxStatus.PROCESSING,
        )
        item = self._update(slot_pk(intent.slot_id), self._intent_sk(intent), upd, return_new=True)
        return intent_from_item(item) if item else None

    @staticmethod
    def _intent_sk(intent: Intent) -> str:
        return intent_sk(intent.target_id, intent.route, intent.work_type, intent.work_id)

    def settle_intent(
        self,
        intent: Intent,
        owner: str,
        now_ms: int,
        *,
        ledger_status: str | None,
        outbox_status: str,
        remote_id: str | None = None,
        remote_status: str | None = None,
        reuse_reason: str | None = None,
        error: str | None = None,
        next_attempt_at: int | None = None,
        ack_kind: str | None = None,
        send_progress: Mapping[str, Any] | None = None,
        clear_sending: bool = False,
    ) -> Intent | None:
        """Record one attempt's result on the intent and its outbox row, as the lease holder.
        ``send_progress`` saves what a multi-call route posted; ``clear_sending`` drops the row's
        ``sending`` marker, which only the attempt that saved its posts may do."""
        upd = _Update().set("outboxStatus", outbox_status).set("updatedAt", now_ms).add("attempts", 1)
        upd.remove("leaseOwner", "leaseUntil")
        if send_progress is not None:
            upd.set("sendProgress", dict(send_progress))
        if clear_sending:
            upd.remove("sendingAt")
        if ledger_status is not None:
            upd.set("status", ledger_status)
            if ledger_status in (LedgerStatus.DELIVERED, LedgerStatus.DUPLICATE):
                upd.set("deliveredAt", now_ms, if_not_exists=True)
        if remote_id is not None:
            upd.set("remoteId", remote_id)
        if remote_status is not None:
            upd.set("remoteStatus", remote_status)
        if reuse_reason is not None:
            upd.set("reuseReason", reuse_reason)
        if ack_kind is not None:
            upd.set("ackKind", ack_kind)
        if error is not None:
            upd.set("lastError", error[:1000])
        elif outbox_status == OutboxStatus.DONE:
            upd.remove("lastError")
        if outbox_status in ACTIONABLE_OUTBOX:
            assert next_attempt_at is not None
            upd.set("nextAttemptAt", next_attempt_at)
            upd.set("dueSk", f"{_ms13(next_attempt_at)}#{intent.idempotency_key}")
        else:
            upd.remove("duePk", "dueSk")
            upd.set("completedAt", now_ms)
        upd.when("#outboxStatus = :ob_proc AND #leaseOwner = :owner", ob_proc=OutboxStatus.PROCESSING, owner=owner)
        item = self._update(slot_pk(intent.slot_id), self._intent_sk(intent), upd, return_new=True)
        return intent_from_item(item) if item else None

    def mark_intent_sending(self, intent: Intent, owner: str, now_ms: int) -> Intent | None:
        """The ``sending`` marker, written before a multi-call route's first post: as
        the lease holder, and only when no earlier attempt left one. A re-claimed row that still
        carries it began posting and saved nothing: it is never posted again by itself."""
        upd = _Update().set("sendingAt", now_ms).set("updatedAt", now_ms)
        upd.when("#outboxStatus = :ob_proc AND #leaseOwner = :owner AND attribute_not_exists(#sendingAt)",
                 ob_proc=OutboxStatus.PROCESSING, owner=owner)
        item = self._update(slot_pk(intent.slot_id), self._intent_sk(intent), upd, return_new=True)
        return intent_from_item(item) if item else None

    def release_intent(self, intent: Intent, owner: str, now_ms: int, next_attempt_at: int) -> Intent | None:
        """Readiness deferral (a release): processing -> pending as the lease holder,
        due at ``next_attempt_at``, WITHOUT consuming an attempt."""
        upd = _Update().set("outboxStatus", OutboxStatus.PENDING).set("updatedAt", now_ms)
        upd.set("nextAttemptAt", next_attempt_at).set("dueSk", f"{_ms13(next_attempt_at)}#{intent.idempotency_key}")
        upd.remove("leaseOwner", "leaseUntil")
        upd.when("#outboxStatus = :ob_proc AND #leaseOwner = :owner", ob_proc=OutboxStatus.PROCESSING, owner=owner)
        item = self._update(slot_pk(intent.slot_id), self._intent_sk(intent), upd, return_new=True)
        return intent_from_item(item) if item else None

    def index_due(self, intent: Intent) -> bool:
        """Put an actionable row into DueOutbox, as its slot is about to close (then nothing else
        would find it). Conditioned on the row being exactly as read (status and version): a row
        that moved meanwhile is refused, and the caller reads again before closing."""
        upd = _Update().set("duePk", f"DUE#{shard_of(intent.idempotency_key):02d}")
        upd.set("dueSk", f"{_ms13(intent.next_attempt_at)}#{intent.idempotency_key}")
        upd.when("#outboxStatus = :seen_ob AND #nextAttemptAt = :seen_next AND #updatedAt = :seen_at",
                 seen_ob=intent.outbox_status, seen_next=intent.next_attempt_at, seen_at=intent.updated_at)
        return self._update(slot_pk(intent.slot_id), self._intent_sk(intent), upd) is not None

    def due_intents(self, before_ms: int, limit_per_shard: int = 100) -> list[tuple[str, str]]:
        """(pk, sk) of outbox rows whose due time is at or before ``before_ms`` (sparse index)."""
        found: list[tuple[str, str]] = []
        for shard in range(SHARDS):
            resp = self._call(
                "query",
                TableName=self._table,
                IndexName=DUE_INDEX,
                KeyConditionExpression="duePk = :p AND dueSk <= :t",
                ExpressionAttributeValues={":p": {"S": f"DUE#{shard:02d}"}, ":t": {"S": f"{_ms13(before_ms)}#~"}},
                Limit=limit_per_shard,
            )
            for raw in resp.get("Items", []):
                item = self._unmarshal(raw)
                found.append((item["pk"], item["sk"]))
        return found

    def get_intent_by_key(self, pk: str, sk: str) -> Intent | None:
        item = self._get(pk, sk)
        return intent_from_item(item) if item and item.get("entity") == "intent" else None

    # -- operator reads and the operator's redrive (`pixivflow slots|outbox`, /ui) ----------------
    # Scans read the whole table: they serve an operator's command or page, never a hot path
    # (the ledger is bounded by RetentionDays, so a scan stays a few pages).
    def _scan(self, filter_expression: str, values: Mapping[str, Any], names: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
        kwargs: dict[str, Any] = {"TableName": self._table, "FilterExpression": filter_expression, "ConsistentRead": True,
                                  "ExpressionAttributeValues": {k: self._ser.serialize(v) for k, v in values.items()}}
        if names:
            kwargs["ExpressionAttributeNames"] = dict(names)
        items: list[dict[str, Any]] = []
        while True:
            resp = self._call("scan", **kwargs)
            items.extend(self._unmarshal(i) for i in resp.get("Items", []))
            if "LastEvaluatedKey" not in resp:
                return items
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    def find_slots(self, *, schedule_id: str | None = None, status: str | None = None,
                   since_ms: int | None = None) -> list[Slot]:
        """Slots matching every given filter, newest first (``createdAt`` descending, then id)."""
        expr = ["sk = :meta", "begins_with(pk, :slot)"]
        values: dict[str, Any] = {":meta": "META", ":slot": "SLOT#"}
        names: dict[str, str] = {}
        if schedule_id is not None:
            expr.append("scheduleId = :sid")
            values[":sid"] = schedule_id
        if status is not None:
            expr.append("#status = :st")
            names["#status"] = "status"
            values[":st"] = status
        if since_ms is not None:
            expr.append("createdAt >= :since")
            values[":since"] = int(since_ms)
        slots = [slot_from_item(i) for i in self._scan(" AND ".join(expr), values, names)]
        slots.sort(key=lambda s: (-int(s.created_at or 0), s.slot_id))
        return slots

    def dead_intents(self) -> list[Intent]:
        """Delivery intents whose outbox row is ``dead`` (out of the due index: found by a scan)."""
        return self.find_intents(OutboxStatus.DEAD)

    def find_intents(self, outbox_status: str | None = None) -> list[Intent]:
        """Every delivery intent, or those whose outbox row is in ``outbox_status``, newest first (a scan)."""
        if outbox_status is None:
            items = self._scan("entity = :intent", {":intent": "intent"})
        else:
            items = self._scan("entity = :intent AND outboxStatus = :status", {":intent": "intent", ":status": outbox_status})
        intents = [intent_from_item(i) for i in items]
        intents.sort(key=lambda i: (-int(i.updated_at or 0), i.idempotency_key))
        return intents

    def redrive_intent(self, intent: Intent, now_ms: int) -> Intent | None:
        """The operator's re-arm of a ``dead`` row (a requeue): ``retry_wait`` with a
        fresh attempt budget, due now and back in the due index, ledger status ``pending`` again.
        Conditional on the row still being ``dead``, so a row that is not dead (or a second
        redrive racing this one) is refused (None). ``redrivenAt``/``redriveCount`` keep the trail."""
        upd = _Update().set("outboxStatus", OutboxStatus.RETRY_WAIT).set("status", LedgerStatus.PENDING)
        upd.set("attempts", 0).set("nextAttemptAt", now_ms).set("updatedAt", now_ms).set("redrivenAt", now_ms)
        upd.set("duePk", f"DUE#{shard_of(intent.idempotency_key):02d}")
        upd.set("dueSk", f"{_ms13(now_ms)}#{intent.idempotency_key}")
        # A redrive re-sends on purpose: the Telegram route's sending marker and saved
        # progress go, so the operator's choice posts the work again from the start.
        upd.remove("completedAt", "leaseOwner", "leaseUntil", "sendingAt", "sendProgress").add("redriveCount", 1)
        upd.when("#outboxStatus = :ob_dead", ob_dead=OutboxStatus.DEAD)
        item = self._update(slot_pk(intent.slot_id), self._intent_sk(intent), upd, return_new=True)
        return intent_from_item(item) if item else None

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
            upd = self._fail_cell_update(state.cells[target_id].status, reason_code, reason_message, now_ms)
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
            upd = self._fail_cell_update(state.cells[target_id].status, reason_code, reason_message, now_ms)
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
    def _fail_cell_update(self, was: str, reason_code: str, reason_message: str, now_ms: int) -> _Update:
        """A cell failed with its reason, its lease released, conditioned on the status the caller read."""
        upd = _Update().set("status", CellStatus.FAILED).set("updatedAt", now_ms).set("completedAt", now_ms)
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
        # ... or that holds an item that is not a cell (no status: SlotState.malformed), which it replaces.
        return {"Put": {"TableName": self._table, "Item": self._marshal(item),
                        "ConditionExpression": "attribute_not_exists(pk) OR attribute_not_exists(#status)",
                        "ExpressionAttributeNames": {"#status": "status"}}}

    def _marshal_update(self, upd: _Update) -> dict[str, Any]:
        kw = upd.kwargs()
        if "ExpressionAttributeValues" in kw:
            kw["ExpressionAttributeValues"] = {k: self._ser.serialize(v) for k, v in kw["ExpressionAttributeValues"].items()}
        return kw

    # -- manual requests (refetch) --
    # One item per idempotency key (``REQUEST#<key lower-cased>`` / ``META``), created with
    # attribute_not_exists: the first writer fixes which slot the key names, forever. It is
    # written BEFORE the slot; a crash between the two leaves a request item whose slot the
    # next replay (same key, same derived slot id) creates. The key is lower-cased like the
    # derived slot id, so two spellings of one UUID can never name two slots.
    def claim_request_key(self, key: str, record: Mapping[str, Any]) -> tuple[bool, dict[str, Any]]:
        """Insert the request item if absent. Returns (created, the stored record)."""
        item = {"pk": f"REQUEST#{key.lower()}", "sk": "META", "entity": "request",
                **{k: _to_ddb(v) for k, v in record.items() if v is not None}}
        if isinstance(record.get("createdAt"), int):  # the identity lives as long as the slot it names can
            item["expiresAt"] = _to_ddb(self._expires(record["createdAt"]) + INTENT_RETRY_HORIZON_S)
        created, existing = self._put_new(item)
        if created:
            return True, {k: _from_ddb(v) for k, v in item.items()}
        if existing is None:
            existing = self._get(f"REQUEST#{key.lower()}", "META")
        return False, {k: _from_ddb(v) for k, v in (existing or item).items()}

    def get_request_key(self, key: str) -> dict[str, Any] | None:
        item = self._get(f"REQUEST#{key.lower()}", "META")
        return {k: _from_ddb(v) for k, v in item.items()} if item else None

    # -- the operator page's session epoch (http/ui.py) --
    # One item, ``UI#sessions`` / ``META``, holding ``epoch``. A logout moves it from the epoch its
    # cookie named to the next one, conditionally: a lost race is a logout someone else already did
    # (the seen epoch is over either way), never a second increment that a fresh login would lose.
    _UI_SESSIONS = ("UI#sessions", "META")

    def ui_session_epoch(self) -> int:
        item = self._get(*self._UI_SESSIONS)
        return int(item.get("epoch") or 0) if item else 0

    def end_ui_sessions(self, seen_epoch: int, now_ms: int) -> int:
        try:
            self._call("update_item", TableName=self._table, Key=self._key(*self._UI_SESSIONS),
                       UpdateExpression="SET epoch = :next, entity = :entity, updatedAt = :now",
                       ConditionExpression="attribute_not_exists(pk) AND :seen = :zero OR epoch = :seen",
                       ExpressionAttributeValues={k: self._ser.serialize(v) for k, v in {
                           ":next": int(seen_epoch) + 1, ":seen": int(seen_epoch), ":zero": 0,
                           ":entity": "ui_sessions", ":now": int(now_ms)}.items()})
            return int(seen_epoch) + 1
        except ClientError as exc:
            if not is_conditional_failure(exc):
                raise
            return self.ui_session_epoch()

    # -- an operator's pause of a schedule (domain.pause.SchedulePause) --
    # One item per schedule, ``SCHEDULE#<scheduleId>`` / ``PAUSE`` (beside the sweep's ``WATCH``),
    # with no TTL and no index key: a pause lasts until someone resumes, across deploys. Each flip
    # is conditioned on the state the operator saw (not paused / paused), so two operators racing
    # flip it once and the second is told it was already done.
    def schedule_pause(self, schedule_id: str) -> SchedulePause | None:
        item = self._get(f"SCHEDULE#{schedule_id}", "PAUSE")
        return _pause_from_item(schedule_id, item) if item else None

    def pause_schedule(self, schedule_id: str, by: str | None, now_ms: int) -> SchedulePause | None:
        return self._flip_pause(schedule_id, by, now_ms, paused=True,
                                condition="attribute_not_exists(pk) OR paused = :no", stamp="pausedAt")

    def resume_schedule(self, schedule_id: str, by: str | None, now_ms: int) -> SchedulePause | None:
        return self._flip_pause(schedule_id, by, now_ms, paused=False, condition="paused = :yes", stamp="resumedAt")

    def _flip_pause(self, schedule_id: str, by: str | None, now_ms: int, *, paused: bool, condition: str,
                    stamp: str) -> SchedulePause | None:
        values: dict[str, Any] = {":to": paused, ":now": int(now_ms), ":entity": "schedule_pause", ":id": schedule_id,
                                  ":by": by or "-"}
        values[":no" if ":no" in condition else ":yes"] = not paused
        try:
            resp = self._call("update_item", TableName=self._table, Key=self._key(f"SCHEDULE#{schedule_id}", "PAUSE"),
                              UpdateExpression=f"SET paused = :to, {stamp} = :now, changedBy = :by, entity = :entity, "
                                               "scheduleId = :id, updatedAt = :now",
                              ConditionExpression=condition, ReturnValues="ALL_NEW",
                              ExpressionAttributeValues={k: self._ser.serialize(v) for k, v in values.items()})
        except ClientError as exc:
            if not is_conditional_failure(exc):
                raise
            return None
        return _pause_from_item(schedule_id, self._unmarshal(resp.get("Attributes", {})))


def _pause_from_item(schedule_id: str, item: Mapping[str, Any]) -> SchedulePause:
    def ms(name: str) -> int | None:
        return int(item[name]) if item.get(name) is not None else None

    by = item.get("changedBy")
    return SchedulePause(schedule_id, bool(item.get("paused")), ms("pausedAt"), ms("resumedAt"),
                         None if by in (None, "-") else str(by))
