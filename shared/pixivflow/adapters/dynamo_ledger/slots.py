"""The slot items, their lifecycle events and the active-slot index (``Occurrences``, ``SweepIndexes``)."""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

from ...domain.cells import ACTIVE_SLOT_STATES, TERMINAL_SLOT_STATES, CellStatus
from ...domain.model import Cell, Slot, SlotState
from ...domain.sweep_state import ActiveRow, SparseIndex
from .codec import (
    _CELL_FIELDS,
    _SLOT_FIELDS,
    MalformedItem,
    _from_ddb,
    _item,
    cell_from_item,
    intent_from_item,
    slot_from_item,
)
from .expressions import _Update
from .items import LedgerItems
from .keys import ACTIVE_INDEX, CALLBACK_INDEX, DUE_INDEX, JOBS_PK, SHARDS, SLOTS_PK, _ms13, cell_sk, created_sk, shard_of, slot_pk


class SlotItems(LedgerItems):
    """``SLOT#<id>/META``, its lifecycle events and the active-slot index."""

    # -- slots -------------------------------------------------------------------
    def create_slot(self, slot: Slot) -> tuple[Slot, bool]:
        """Insert the slot (the commit point of admission). Returns the stored slot and whether it is new."""
        item = {"pk": slot_pk(slot.slot_id), "sk": "META", "entity": "slot", **_item(_SLOT_FIELDS, slot)}
        item["activePk"] = f"ACTIVE#{shard_of(slot.slot_id):02d}"
        item["activeSk"] = f"{_ms13(slot.created_at)}#{slot.slot_id}"
        if slot.is_job:  # listed on the jobs page (JobsByCreated)
            item["jobsPk"], item["jobsSk"] = JOBS_PK, created_sk(slot.created_at, slot.slot_id)
        item["slotsPk"], item["slotsSk"] = SLOTS_PK, created_sk(slot.created_at, slot.slot_id)  # the occurrence list
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
