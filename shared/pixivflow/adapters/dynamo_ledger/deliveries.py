"""The work reservations across slots and the delivery intents with their outbox rows (``WorkReservations``, ``DeliveryRows``)."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from botocore.exceptions import ClientError

from ...domain.model import ACTIONABLE_OUTBOX, Intent, LedgerStatus, OutboxStatus
from ..dynamodb_base import is_conditional_failure, refused_item
from .cells import CellItems
from .codec import (
    _INTENT_FIELDS,
    _item,
    intent_from_item,
)
from .expressions import _Update
from .items import INTENT_RETRY_HORIZON_S
from .keys import DEAD_PK, DUE_INDEX, SHARDS, _ms13, dead_sk, intent_sk, shard_of, slot_pk, work_pk


class DeliveryItems(CellItems):
    """``WORK#.../OWNER`` (a work held on a route) and ``SLOT#<id>/DLV#...`` (an intent and its outbox row)."""

    # -- route-work ownership (selection-time dedupe across slots) ----------------
    def reserve_work(self, route: str, work_type: str, work_id: str, owner_key: str, now_ms: int, *, executor: str | None = None) -> tuple[bool, str | None]:
        """Claim a work on a route for one cell. Returns (ok, current owner).

        The cell that owns it may re-claim it; doing so records the executor now holding it, so a
        zombie executor of the same cell can no longer release it (see ``release_work_reservation``)."""
        item = _owner_item(route, work_type, work_id, owner_key, now_ms, executor)
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

    def take_over_work(self, route: str, work_type: str, work_id: str, holder_key: str, owner_key: str, now_ms: int, *,
                       executor: str | None = None) -> bool:
        """Take a work on a route over from ``holder_key``, whose cell can never deliver it
        (``domain.reservation``): one conditional write, refused unless the holder still holds it."""
        item = {**_owner_item(route, work_type, work_id, owner_key, now_ms, executor), "takenOverFrom": holder_key}
        try:
            self._call("put_item", TableName=self._table, Item=self._marshal(item), ConditionExpression="ownerKey = :holder",
                       ExpressionAttributeValues={":holder": {"S": holder_key}})
            return True
        except ClientError as exc:
            if is_conditional_failure(exc):
                return False
            raise

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
        if intent.outbox_status == OutboxStatus.DEAD:  # a row recorded dead from the start (never sent)
            item["deadPk"], item["deadSk"] = DEAD_PK, dead_sk(intent.updated_at, item["pk"], sk)
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
        # The first claim since the last settle names itself; a claim taking over a lapsed lease
        # keeps the earlier name: that worker may have posted (Intent.unsettled_claim).
        upd.set("unsettledClaim", owner, if_not_exists=True)
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
        upd.remove("leaseOwner", "leaseUntil", "unsettledClaim")
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
        if outbox_status == OutboxStatus.DEAD:  # listed on the dead-letter page until a redrive re-arms it
            pk, sk = slot_pk(intent.slot_id), self._intent_sk(intent)
            upd.set("deadPk", DEAD_PK).set("deadSk", dead_sk(now_ms, pk, sk))
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
        if intent.unsettled_claim == owner:
            # This worker's claim began the stretch and it posted nothing: no one may have. A
            # deferral after taking over a lapsed lease keeps the first claimer's name.
            upd.remove("unsettledClaim")
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


def _owner_item(route: str, work_type: str, work_id: str, owner_key: str, now_ms: int, executor: str | None) -> dict[str, Any]:
    """``WORK#<route>#<type>#<workId>`` / ``OWNER``: the cell holding a work on a route, and its executor."""
    item: dict[str, Any] = {"pk": work_pk(route, work_type, work_id), "sk": "OWNER", "entity": "work", "route": route,
                            "workType": work_type, "workId": work_id, "ownerKey": owner_key, "createdAt": now_ms}
    if executor:
        item["executor"] = executor
    return item
