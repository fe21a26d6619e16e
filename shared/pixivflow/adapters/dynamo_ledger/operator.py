"""The operator's reads and redrive, the request keys, the page's session epoch and the schedule pauses (``OperatorTools``, ``RequestKeys``, ``UiSessions``, ``SchedulePauses``)."""

from __future__ import annotations

from typing import Any, Mapping

from botocore.exceptions import ClientError

from ...domain.cells import CellStatus
from ...domain.failures import FailureEntry, failure_position, is_listed_failure
from ...domain.model import Cell, Intent, LedgerStatus, OutboxStatus, Slot, SlotState
from ...domain.outbox import OutboxRow
from ...domain.pause import SchedulePause
from ..dynamodb_base import is_conditional_failure
from .codec import (
    _from_ddb,
    _to_ddb,
    cell_from_item,
    intent_from_item,
    slot_from_item,
)
from .deliveries import DeliveryItems
from .expressions import _Update
from .items import INTENT_RETRY_HORIZON_S
from .keys import (DEAD_INDEX, DEAD_PK, FAILURES_INDEX, FAILURES_PK, JOBS_INDEX, JOBS_PK, SLOTS_INDEX, SLOTS_PK, _ms13, cell_sk, failure_sk, intent_sk, created_sk,
                   shard_of, slot_pk)


class OperatorItems(DeliveryItems):
    """The operator's scans and redrive; ``REQUEST#``, ``UI#sessions`` and ``SCHEDULE#.../PAUSE`` items."""

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
        upd.remove("completedAt", "leaseOwner", "leaseUntil", "sendingAt", "sendProgress", "deadPk", "deadSk")
        upd.add("redriveCount", 1)
        upd.when("#outboxStatus = :ob_dead", ob_dead=OutboxStatus.DEAD)
        item = self._update(slot_pk(intent.slot_id), self._intent_sk(intent), upd, return_new=True)
        return intent_from_item(item) if item else None


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

    # -- the jobs page (JobsByCreated) --
    def job_page(self, limit: int, before: str | None = None) -> tuple[list[str], str | None]:
        """One page of job slot ids, newest first, older than ``before`` (a ``jobsSk`` the previous
        page ended at): one Query of at most ``limit`` index entries. The cursor of the next page,
        or None when this one is the last."""
        cond, values = "jobsPk = :p", {":p": {"S": JOBS_PK}}
        if before:
            cond, values[":before"] = cond + " AND jobsSk < :before", {"S": before}
        resp = self._call("query", TableName=self._table, IndexName=JOBS_INDEX, KeyConditionExpression=cond,
                          ExpressionAttributeValues=values, ScanIndexForward=False, Limit=int(limit))
        positions = [raw["jobsSk"]["S"] for raw in resp.get("Items", [])]
        ids = [p.partition("#")[2] for p in positions]
        return ids, (positions[-1] if positions and resp.get("LastEvaluatedKey") else None)

    def index_jobs(self) -> int:
        """Put every job slot written before JobsByCreated existed into it (``pixivflow jobs reindex``;
        ``_add_index_keys``). Returns how many it indexed."""
        return sum(self._add_index_keys(slot_pk(slot.slot_id), "META", "jobsPk", JOBS_PK, "jobsSk",
                                        created_sk(slot.created_at, slot.slot_id))
                   for slot in self.find_slots() if slot.is_job)

    # -- the occurrence list (SlotsByCreated) --
    def slot_page(self, limit: int, before: str | None = None, *, schedule_id: str | None = None,
                  since_ms: int | None = None) -> tuple[list[str], str | None]:
        """One page of slot ids, newest first: ONE Query of at most ``limit`` index entries, after the
        cursor ``before`` (a ``slotsSk`` a previous page ended at), created at or after ``since_ms``,
        of ``schedule_id`` (applied to the entries read: fewer ids, same cursor)."""
        values: dict[str, Any] = {":p": {"S": SLOTS_PK}}
        cond = "slotsPk = :p"
        if since_ms is not None:
            cond += " AND slotsSk >= :since"
            values[":since"] = {"S": _ms13(since_ms)}
        kwargs: dict[str, Any] = {"TableName": self._table, "IndexName": SLOTS_INDEX, "KeyConditionExpression": cond,
                                  "ExpressionAttributeValues": values, "ScanIndexForward": False, "Limit": int(limit)}
        if schedule_id is not None:
            kwargs["FilterExpression"] = "begins_with(pk, :schedule)"
            values[":schedule"] = {"S": slot_pk(f"{schedule_id}@")}
        if before:
            slot_id = before.partition("#")[2]
            kwargs["ExclusiveStartKey"] = {"pk": {"S": slot_pk(slot_id)}, "sk": {"S": "META"},
                                           "slotsPk": {"S": SLOTS_PK}, "slotsSk": {"S": before}}
        resp = self._call("query", **kwargs)
        ids = [raw["slotsSk"]["S"].partition("#")[2] for raw in resp.get("Items", [])]
        last = resp.get("LastEvaluatedKey")
        return ids, (last["slotsSk"]["S"] if last else None)

    def slot_heads(self, slot_ids: list[str], *, with_cells: bool = True) -> list[SlotState]:
        """These slots with their written cells (none read without ``with_cells``), in the order
        given: one batched read of the slots, one of their cells (at most 100 keys a call)."""
        slots = {s.slot_id: s for s in (slot_from_item(i) for i in self._batch_items([(slot_pk(s), "META") for s in slot_ids]))}
        cell_keys = [(slot_pk(s.slot_id), cell_sk(t)) for s in slots.values() for t in s.target_ids] if with_cells else []
        cells: dict[str, dict[str, Cell]] = {}
        for cell in (cell_from_item(i) for i in self._batch_items(cell_keys)):
            cells.setdefault(cell.slot_id, {})[cell.target_id] = cell
        return [SlotState(slots[s], cells.get(s, {})) for s in slot_ids if s in slots]

    def index_slots(self) -> int:
        """Put every slot written before SlotsByCreated existed into it (``pixivflow slots reindex``;
        ``_add_index_keys``). Returns how many it indexed."""
        return sum(self._add_index_keys(slot_pk(slot.slot_id), "META", "slotsPk", SLOTS_PK, "slotsSk",
                                        created_sk(slot.created_at, slot.slot_id))
                   for slot in self.find_slots())

    # -- the dead letters (DeadRows) --
    def dead_page(self, limit: int, before: tuple[str, str, str] | None = None
                  ) -> tuple[list[tuple[str, str]], tuple[str, str, str] | None]:
        """One page of dead outbox rows (their item keys), newest death first: ONE Query of at most
        ``limit`` index entries, after ``before`` (the (pk, sk, deadSk) a previous page ended at)."""
        kwargs: dict[str, Any] = {"TableName": self._table, "IndexName": DEAD_INDEX, "KeyConditionExpression": "deadPk = :p",
                                  "ExpressionAttributeValues": {":p": {"S": DEAD_PK}}, "ScanIndexForward": False,
                                  "Limit": int(limit)}
        if before:
            pk, sk, position = before
            kwargs["ExclusiveStartKey"] = {"pk": {"S": pk}, "sk": {"S": sk}, "deadPk": {"S": DEAD_PK},
                                           "deadSk": {"S": position}}
        resp = self._call("query", **kwargs)
        keys = [(raw["pk"]["S"], raw["sk"]["S"]) for raw in resp.get("Items", [])]
        last = resp.get("LastEvaluatedKey")
        return keys, ((last["pk"]["S"], last["sk"]["S"], last["deadSk"]["S"]) if last else None)

    def dead_heads(self, keys: list[tuple[str, str]]) -> list[Intent | OutboxRow]:
        """The dead rows at these item keys, in the order given: delivery rows as intents, generic rows
        as outbox rows (one batched read; a row re-armed or expired since is left out)."""
        from ..outbox_rows import from_item as outbox_row_from_item

        items = {(i["pk"], i["sk"]): i for i in self._batch_items(keys)}
        rows: list[Intent | OutboxRow] = []
        for key in keys:
            item = items.get(key)
            if item is None:
                continue
            if item.get("entity") == "intent" and item.get("outboxStatus") == OutboxStatus.DEAD:
                rows.append(intent_from_item(item))
            elif item.get("entity") == "outbox" and item.get("status") == "dead":
                rows.append(outbox_row_from_item(item))
        return rows

    # -- the Failure Center (FailedCells) --
    def failure_page(self, limit: int, before: str | None = None, *, between: tuple[int, int] | None = None,
                     schedule_id: str | None = None, target_id: str | None = None,
                     reason: str | None = None) -> tuple[list[FailureEntry], str | None]:
        """One page of failed cells, newest failure first: ONE Query of at most ``limit`` index entries,
        after the cursor ``before`` (a ``failSk`` a previous page ended at), within ``between`` (epoch ms,
        end exclusive) when given. The filters are applied by DynamoDB to the entries the Query read,
        so a filtered page may hold fewer than ``limit`` rows and still have a next page: the reads are
        one page's, whatever the ledger holds."""
        values: dict[str, Any] = {":p": {"S": FAILURES_PK}}
        cond = "failPk = :p"
        if between is not None:
            cond += " AND failSk BETWEEN :lo AND :hi"
            values[":lo"], values[":hi"] = {"S": _ms13(between[0])}, {"S": _ms13(between[1])}
        filters: list[str] = []
        if schedule_id is not None:
            filters.append("begins_with(pk, :schedule)")
            values[":schedule"] = {"S": slot_pk(f"{schedule_id}@")}
        if target_id is not None:
            filters.append("sk = :cell")
            values[":cell"] = {"S": cell_sk(target_id)}
        if reason is not None:
            filters.append("terminalReasonCode = :reason")
            values[":reason"] = {"S": reason}
        kwargs: dict[str, Any] = {"TableName": self._table, "IndexName": FAILURES_INDEX, "KeyConditionExpression": cond,
                                  "ExpressionAttributeValues": values, "ScanIndexForward": False, "Limit": int(limit)}
        if filters:
            kwargs["FilterExpression"] = " AND ".join(filters)
        if before:
            start = failure_position(before)
            if start is None:
                raise ValueError("not a failure cursor")
            kwargs["ExclusiveStartKey"] = {"pk": {"S": slot_pk(start[1])}, "sk": {"S": cell_sk(start[2])},
                                           "failPk": {"S": FAILURES_PK}, "failSk": {"S": before}}
        resp = self._call("query", **kwargs)
        entries = []
        for raw in resp.get("Items", []):
            position = failure_position(raw["failSk"]["S"])
            if position is not None:
                entries.append(FailureEntry(position[1], position[2], position[0],
                                            (raw.get("terminalReasonCode") or {}).get("S")))
        last = resp.get("LastEvaluatedKey")
        return entries, (last["failSk"]["S"] if last else None)

    def failure_heads(self, keys: list[tuple[str, str]],
                      routes: Mapping[str, list[str]]) -> list[tuple[Slot, Cell, list[Intent]]]:
        """Each failed cell with its slot and its delivery rows on ``routes[target]``, in the order
        given: one batched read of the slots and cells, one of the rows (bounded by the keys given)."""
        slot_ids = list(dict.fromkeys(s for s, _ in keys))
        items = self._batch_items([(slot_pk(s), "META") for s in slot_ids] + [(slot_pk(s), cell_sk(t)) for s, t in keys])
        slots = {i["slotId"]: slot_from_item(i) for i in items if i.get("sk") == "META"}
        cells = {(c.slot_id, c.target_id): c for c in (cell_from_item(i) for i in items if i.get("sk") != "META")}
        row_keys = [(slot_pk(s), intent_sk(t, route, cells[(s, t)].work_type or "", cells[(s, t)].work_id or ""))
                    for s, t in keys if (s, t) in cells and cells[(s, t)].work_id for route in routes.get(t, [])]
        rows: dict[tuple[str, str], list[Intent]] = {}
        for intent in sorted((intent_from_item(i) for i in self._batch_items(row_keys)), key=lambda i: i.route):
            rows.setdefault((intent.slot_id, intent.target_id), []).append(intent)
        return [(slots[s], cells[(s, t)], rows.get((s, t), [])) for s, t in keys if s in slots and (s, t) in cells]

    def index_failures(self) -> int:
        """List in FailedCells every failed cell written before the index existed that the index lists
        (``domain.failures.is_listed_failure``; ``pixivflow failures reindex``, ``_add_index_keys``).
        Returns how many."""
        cells = (cell_from_item(i) for i in self._scan("entity = :cell AND #status = :failed AND attribute_not_exists(failPk)",
                                                       {":cell": "cell", ":failed": CellStatus.FAILED}, {"#status": "status"}))
        return sum(self._add_index_keys(slot_pk(c.slot_id), cell_sk(c.target_id), "failPk", FAILURES_PK, "failSk",
                                        failure_sk(int(c.completed_at or c.updated_at or 0), c.slot_id, c.target_id))
                   for c in cells if is_listed_failure(c.terminal_reason_code))

    def _add_index_keys(self, pk: str, sk: str, pk_attr: str, pk_value: str, sk_attr: str, sk_value: str) -> bool:
        """An item written before its index existed, put into it: one write conditioned on the item
        existing and not being in the index yet, so a reindex run twice (or racing the write that
        lists the item itself) adds each item once. True when this call added it."""
        try:
            self._call("update_item", TableName=self._table, Key=self._key(pk, sk),
                       UpdateExpression="SET #ipk = :p, #isk = :s",
                       ConditionExpression="attribute_exists(pk) AND attribute_not_exists(#ipk)",
                       ExpressionAttributeNames={"#ipk": pk_attr, "#isk": sk_attr},
                       ExpressionAttributeValues={":p": {"S": pk_value}, ":s": {"S": sk_value}})
            return True
        except ClientError as exc:
            if not is_conditional_failure(exc):
                raise
            return False

    def _batch_items(self, keys: list[tuple[str, str]]) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        for start in range(0, len(keys), 100):
            request: dict[str, Any] | None = {self._table: {"Keys": [self._key(pk, sk) for pk, sk in keys[start:start + 100]],
                                                            "ConsistentRead": True}}
            while request:
                resp = self._call("batch_get_item", RequestItems=request)
                items.extend(self._unmarshal(raw) for raw in resp.get("Responses", {}).get(self._table, []))
                request = resp.get("UnprocessedKeys") or None
        return items

    # -- the login throttle (http/ui.py) --
    # One item per client address and minute, ``UI#login#<address>`` / ``MINUTE#<epoch minute>``,
    # counting its wrong tokens; it expires with the retention like every other item. The count is
    # an ADD conditioned on being under the limit, so racing attempts from many containers never
    # get past it.
    def login_failures(self, client: str, minute: int) -> int:
        item = self._get(f"UI#login#{client}", f"MINUTE#{int(minute)}")
        return int(item.get("failures") or 0) if item else 0

    def count_login_failure(self, client: str, minute: int, limit: int, now_ms: int) -> bool:
        try:
            self._call("update_item", TableName=self._table, Key=self._key(f"UI#login#{client}", f"MINUTE#{int(minute)}"),
                       UpdateExpression="ADD failures :one SET entity = :entity, expiresAt = :exp",
                       ConditionExpression="attribute_not_exists(failures) OR failures < :limit",
                       ExpressionAttributeValues={k: self._ser.serialize(v) for k, v in {
                           ":one": 1, ":limit": int(limit), ":entity": "ui_login_failures",
                           ":exp": self._expires(now_ms)}.items()})
            return True
        except ClientError as exc:
            if not is_conditional_failure(exc):
                raise
            return False

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
