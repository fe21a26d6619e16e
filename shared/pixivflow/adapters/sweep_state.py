"""The sweep's own items in the ledger table (the ``SweepState`` port).

Items (pk / sk), all on the ledger table, all written conditionally with the low-level client:
  SWEEP#LEASE / META            the single-runner lease: owner, leaseUntil (epoch ms), acquiredAt,
                                and the walk's cursor (cursorShard, cursorAfter) its last holder left
  SCHEDULE#<scheduleId> / WATCH  missed-fire watch: fingerprint (cron|zone), firstSeenAt,
                                 checkedThrough (epoch ms), paused
  MISSED#<slotId> / META         one per missed fire, so it is counted once; expires with retention

None of them carries an index key, so the sparse GSIs never see them.
"""

from __future__ import annotations

from typing import Any, Sequence

from botocore.exceptions import ClientError

from .dynamodb_base import DynamoItems, is_conditional_failure, refused_item
from ..domain.sweep_state import ScheduleWatch, SweepCursor, SweepLease

LEASE_PK = "SWEEP#LEASE"
_META = "META"
_WATCH = "WATCH"
_BATCH_GET_MAX = 100  # DynamoDB's BatchGetItem limit


def watch_pk(schedule_id: str) -> str:
    return f"SCHEDULE#{schedule_id}"


def missed_pk(slot_id: str) -> str:
    return f"MISSED#{slot_id}"


def _key(pk: str, sk: str) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def _n(value: int) -> dict[str, str]:
    return {"N": str(int(value))}


_refused = is_conditional_failure


class DynamoSweepState(DynamoItems):
    """``SweepState`` on the ledger table. ``client`` is a low-level boto3 DynamoDB client."""

    def _conditional(self, op: str, **kwargs: Any) -> tuple[bool, dict[str, Any] | None]:
        """(written, the current item when the condition refused it)."""
        try:
            self._call(op, TableName=self._table, **kwargs)
            return True, None
        except ClientError as exc:
            return False, refused_item(exc)

    # -- lease --------------------------------------------------------------------
    def acquire_lease(self, owner: str, now_ms: int, ttl_ms: int) -> SweepLease:
        """An update, not a put: the cursor the last holder left stays on the item and comes back
        with ALL_NEW in the same single write: the walk costs no extra request."""
        until = now_ms + ttl_ms
        try:
            resp = self._call(
                "update_item", TableName=self._table, Key=_key(LEASE_PK, _META),
                UpdateExpression="SET entity = :entity, #owner = :owner, leaseUntil = :until, acquiredAt = :now",
                ConditionExpression="attribute_not_exists(pk) OR leaseUntil <= :now",
                ExpressionAttributeNames={"#owner": "owner"},
                ExpressionAttributeValues={":entity": {"S": "sweep_lease"}, ":owner": {"S": owner},
                                           ":until": _n(until), ":now": _n(now_ms)},
                ReturnValues="ALL_NEW", ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if not _refused(exc):
                raise
            current = refused_item(exc) or {}
            return SweepLease(False, current.get("owner", {}).get("S", ""), int(current.get("leaseUntil", {}).get("N", "0")))
        item = resp.get("Attributes", {})
        cursor = SweepCursor(int(item.get("cursorShard", {}).get("N", "0")), item.get("cursorAfter", {}).get("S", ""))
        return SweepLease(True, owner, until, cursor)

    def release_lease(self, owner: str, now_ms: int, cursor: SweepCursor | None = None) -> bool:
        update, values = "SET leaseUntil = :now, releasedAt = :now", {":owner": {"S": owner}, ":now": _n(now_ms)}
        if cursor is not None:  # only the holder moves the cursor: a tick that lost its lease writes nothing
            update += ", cursorShard = :shard, cursorAfter = :after"
            values |= {":shard": _n(cursor.shard), ":after": {"S": cursor.after}}
        ok, _ = self._conditional(
            "update_item",
            Key=_key(LEASE_PK, _META),
            UpdateExpression=update,
            ConditionExpression="#owner = :owner AND leaseUntil > :now",
            ExpressionAttributeNames={"#owner": "owner"},
            ExpressionAttributeValues=values,
        )
        return ok

    # -- schedule watches ---------------------------------------------------------
    def watches(self, schedule_ids: Sequence[str]) -> dict[str, ScheduleWatch]:
        found: dict[str, ScheduleWatch] = {}
        ids = list(dict.fromkeys(schedule_ids))
        for start in range(0, len(ids), _BATCH_GET_MAX):
            pending: dict[str, Any] = {self._table: {
                "Keys": [_key(watch_pk(s), _WATCH) for s in ids[start:start + _BATCH_GET_MAX]],
                "ConsistentRead": True,
            }}
            while pending:
                resp = self._call("batch_get_item", RequestItems=pending)
                for item in resp.get("Responses", {}).get(self._table, []):
                    watch = _watch_from_item(item)
                    found[watch.schedule_id] = watch
                pending = resp.get("UnprocessedKeys") or {}
        return found

    def start_watch(self, schedule_id: str, fingerprint: str, now_ms: int,
                    replacing: ScheduleWatch | None = None) -> bool:
        item = {**_key(watch_pk(schedule_id), _WATCH), "entity": {"S": "schedule_watch"},
                "scheduleId": {"S": schedule_id}, "fingerprint": {"S": fingerprint},
                "firstSeenAt": _n(now_ms), "checkedThrough": _n(now_ms), "paused": {"BOOL": False}}
        if replacing is None:
            ok, _ = self._conditional("put_item", Item=item, ConditionExpression="attribute_not_exists(pk)")
            return ok
        ok, _ = self._conditional("put_item", Item=item, **_unchanged(replacing))
        return ok

    def advance_watch(self, watch: ScheduleWatch, checked_through_ms: int) -> bool:
        cond = _unchanged(watch)
        cond["ExpressionAttributeValues"][":to"] = _n(checked_through_ms)
        ok, _ = self._conditional("update_item", Key=_key(watch_pk(watch.schedule_id), _WATCH),
                                  UpdateExpression="SET checkedThrough = :to", **cond)
        return ok

    def pause_watch(self, watch: ScheduleWatch) -> bool:
        cond = _unchanged(watch)
        cond["ExpressionAttributeValues"][":yes"] = {"BOOL": True}
        ok, _ = self._conditional("update_item", Key=_key(watch_pk(watch.schedule_id), _WATCH),
                                  UpdateExpression="SET paused = :yes", **cond)
        return ok

    # -- missed fires -------------------------------------------------------------
    def record_missed(self, slot_id: str, schedule_id: str, fire_ms: int, now_ms: int) -> bool:
        ok, _ = self._conditional(
            "put_item",
            Item={**_key(missed_pk(slot_id), _META), "entity": {"S": "missed_fire"}, "slotId": {"S": slot_id},
                  "scheduleId": {"S": schedule_id}, "fireAt": _n(fire_ms), "detectedAt": _n(now_ms),
                  "expiresAt": _n(self._expires(now_ms))},
            ConditionExpression="attribute_not_exists(pk)",
        )
        return ok

    def missed_among(self, slot_ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        ids = list(dict.fromkeys(slot_ids))
        for start in range(0, len(ids), _BATCH_GET_MAX):
            pending: dict[str, Any] = {self._table: {
                "Keys": [_key(missed_pk(s), _META) for s in ids[start:start + _BATCH_GET_MAX]],
            }}
            while pending:
                resp = self._call("batch_get_item", RequestItems=pending)
                found.update(item["slotId"]["S"] for item in resp.get("Responses", {}).get(self._table, []))
                pending = resp.get("UnprocessedKeys") or {}
        return found


def _unchanged(watch: ScheduleWatch) -> dict[str, Any]:
    """The condition "the stored watch is still exactly this one" (compare-and-set on every field
    a concurrent writer could change)."""
    return {
        "ConditionExpression": "fingerprint = :fp AND checkedThrough = :ct AND firstSeenAt = :fs AND paused = :paused",
        "ExpressionAttributeValues": {":fp": {"S": watch.fingerprint}, ":ct": _n(watch.checked_through_ms),
                                      ":fs": _n(watch.first_seen_ms), ":paused": {"BOOL": watch.paused}},
    }


def _watch_from_item(item: dict[str, Any]) -> ScheduleWatch:
    return ScheduleWatch(
        schedule_id=item["scheduleId"]["S"],
        fingerprint=item["fingerprint"]["S"],
        first_seen_ms=int(item["firstSeenAt"]["N"]),
        checked_through_ms=int(item["checkedThrough"]["N"]),
        paused=bool(item.get("paused", {}).get("BOOL", False)),
    )
