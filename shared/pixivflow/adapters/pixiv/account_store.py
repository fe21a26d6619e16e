"""Per-account Pixiv state on the ledger table (``PixivAccountStore``), and an in-memory twin.

Items (same table as the ledger, low-level client, every write conditional):

  PIXIV#<accountId> / GATE    cooldownUntil (epoch ms), penalties, ver: the rate-limit gate every
                              container of the account shares
  PIXIV#<accountId> / TOKEN   fingerprint (SHA-256 hex of the refresh token the guard holds
                              current), previous (the one it replaced), ver, rotatedAt: the guard
                              of a refresh-token rotation
  PIXIV#<accountId> / PERMIT#<nn>   holder, leaseUntil: one of the account's maxConcurrency
                              permits; taken only when free, expired or already the
                              taker's, released and renewed only by its holder
  PIXIV#<accountId> / PACE    nextAt: the earliest instant of the account's next App API request,
                              across containers (requestPacingMs + jitter); moved only when due

The token itself is never written here (it lives in SSM); only its fingerprint, so a container
can tell that another one rotated it. Neither item carries a GSI key or a TTL: account state is
long-lived and never listed.
"""

from __future__ import annotations

import threading
from typing import Any

from botocore.exceptions import ClientError

from ...domain.errors import LedgerUnavailable
from ...domain.accounts import AccountGate, AccountPermit

GATE_SK = "GATE"
TOKEN_SK = "TOKEN"
PACE_SK = "PACE"
PERMIT_PREFIX = "PERMIT#"


def permit_sk(index: int) -> str:
    return f"{PERMIT_PREFIX}{int(index):02d}"


def account_pk(account_id: str) -> str:
    return f"PIXIV#{account_id}"


def _conditional(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"


class DynamoPixivAccounts:
    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    def _call(self, op: str, **kwargs: Any) -> Any:
        try:
            return getattr(self._client, op)(TableName=self._table, **kwargs)
        except ClientError as exc:
            if _conditional(exc):
                raise
            raise LedgerUnavailable(f"DynamoDB {op} failed: {exc.response.get('Error', {}).get('Code', '')}") from exc

    def _get(self, account_id: str, sk: str) -> dict[str, Any]:
        answer = self._call("get_item", Key={"pk": {"S": account_pk(account_id)}, "sk": {"S": sk}}, ConsistentRead=True)
        return answer.get("Item") or {}

    def gate(self, account_id: str) -> AccountGate:
        item = self._get(account_id, GATE_SK)
        if not item:
            return AccountGate()
        return AccountGate(cooldown_until=int(item.get("cooldownUntil", {}).get("N", "0")),
                           penalties=int(item.get("penalties", {}).get("N", "0")),
                           version=int(item.get("ver", {}).get("N", "0")),
                           cause=item.get("cause", {}).get("S") or "rate_limited")  # written before it had one

    def set_gate(self, account_id: str, seen: AccountGate, cooldown_until: int, penalties: int, now_ms: int, *,
                 cause: str = "rate_limited") -> bool:
        condition = "attribute_not_exists(pk)" if seen.version == 0 else "ver = :seen"
        values: dict[str, Any] = {":until": {"N": str(int(cooldown_until))}, ":pen": {"N": str(int(penalties))},
                                  ":ver": {"N": str(seen.version + 1)}, ":now": {"N": str(int(now_ms))},
                                  ":entity": {"S": "pixiv_gate"}, ":acct": {"S": account_id}, ":cause": {"S": cause}}
        if seen.version:
            values[":seen"] = {"N": str(seen.version)}
        try:
            self._call(
                "update_item", Key={"pk": {"S": account_pk(account_id)}, "sk": {"S": GATE_SK}},
                UpdateExpression="SET cooldownUntil = :until, penalties = :pen, ver = :ver, updatedAt = :now, "
                                 "entity = :entity, accountId = :acct, cause = :cause",
                ConditionExpression=condition, ExpressionAttributeValues=values,
            )
            return True
        except ClientError:
            return False

    def token_fingerprint(self, account_id: str) -> str | None:
        item = self._get(account_id, TOKEN_SK)
        return item.get("fingerprint", {}).get("S") if item else None

    def rotate_token(self, account_id: str, old_fingerprint: str, new_fingerprint: str, now_ms: int, *,
                     lost: tuple[str, str] | None = None) -> bool:
        # The item may not exist yet (first rotation ever): the first container to record the
        # move away from the token it started with wins; a second one that also started from
        # ``old`` finds a different fingerprint and loses. ``lost``: the guard as read, (current,
        # previous), when its rotation was judged lost (it never reached SSM, which still held
        # ``previous``: its PutParameter failed, its container is gone); this rotation replaces it
        # if the guard is still exactly that, whether it starts from SSM's token or from one this
        # container rotated to itself (otherwise no rotation is ever recorded again).
        condition = "attribute_not_exists(fingerprint) OR fingerprint = :old"
        values = {":new": {"S": new_fingerprint}, ":old": {"S": old_fingerprint}, ":now": {"N": str(int(now_ms))},
                  ":one": {"N": "1"}, ":entity": {"S": "pixiv_token"}, ":acct": {"S": account_id}}
        if lost is not None:
            condition += " OR (fingerprint = :lost AND previous = :stale)"
            values[":lost"], values[":stale"] = {"S": lost[0]}, {"S": lost[1]}
        try:
            self._call(
                "update_item", Key={"pk": {"S": account_pk(account_id)}, "sk": {"S": TOKEN_SK}},
                UpdateExpression="SET fingerprint = :new, previous = :old, rotatedAt = :now, entity = :entity, "
                                 "accountId = :acct ADD ver :one",
                ConditionExpression=condition, ExpressionAttributeValues=values,
            )
            return True
        except ClientError:
            return False

    def adopt_token(self, account_id: str, seen_fingerprint: str | None, new_fingerprint: str, now_ms: int) -> bool:
        # A hand-pasted token becomes the guard's current one, only if the guard is still as read.
        condition = "attribute_not_exists(fingerprint)" if seen_fingerprint is None else "fingerprint = :seen"
        values: dict[str, Any] = {":new": {"S": new_fingerprint}, ":now": {"N": str(int(now_ms))}, ":one": {"N": "1"},
                                  ":entity": {"S": "pixiv_token"}, ":acct": {"S": account_id}}
        update = "SET fingerprint = :new, rotatedAt = :now, entity = :entity, accountId = :acct ADD ver :one"
        if seen_fingerprint is not None:
            values[":seen"] = {"S": seen_fingerprint}
            update = "SET fingerprint = :new, previous = :seen, rotatedAt = :now, entity = :entity, accountId = :acct ADD ver :one"
        try:
            self._call("update_item", Key={"pk": {"S": account_pk(account_id)}, "sk": {"S": TOKEN_SK}},
                       UpdateExpression=update, ConditionExpression=condition, ExpressionAttributeValues=values)
            return True
        except ClientError:
            return False

    def token_guard(self, account_id: str) -> tuple[str | None, str | None]:
        item = self._get(account_id, TOKEN_SK)
        return item.get("fingerprint", {}).get("S"), item.get("previous", {}).get("S")

    def token_rotated_at(self, account_id: str) -> int | None:
        raw = self._get(account_id, TOKEN_SK).get("rotatedAt", {}).get("N")
        return int(raw) if raw is not None else None

    # -- permits ---------------------------------------------------------------------------
    def permits(self, account_id: str, count: int) -> list[AccountPermit]:
        answer = self._call("query", KeyConditionExpression="pk = :pk AND begins_with(sk, :pre)", ConsistentRead=True,
                            ExpressionAttributeValues={":pk": {"S": account_pk(account_id)}, ":pre": {"S": PERMIT_PREFIX}})
        stored = {item["sk"]["S"]: item for item in answer.get("Items", [])}
        out = []
        for index in range(count):
            item = stored.get(permit_sk(index)) or {}
            out.append(AccountPermit(index, item.get("holder", {}).get("S"), int(item.get("leaseUntil", {}).get("N", "0"))))
        return out

    def _permit_update(self, account_id: str, index: int, update: str, condition: str, values: dict[str, Any]) -> bool:
        try:
            self._call("update_item", Key={"pk": {"S": account_pk(account_id)}, "sk": {"S": permit_sk(index)}},
                       UpdateExpression=update, ConditionExpression=condition, ExpressionAttributeValues=values)
            return True
        except ClientError:
            return False

    def take_permit(self, account_id: str, index: int, holder: str, now_ms: int, lease_ms: int) -> bool:
        return self._permit_update(
            account_id, index, "SET holder = :me, leaseUntil = :until, entity = :entity, accountId = :acct",
            "attribute_not_exists(holder) OR leaseUntil <= :now OR holder = :me",
            {":me": {"S": holder}, ":until": {"N": str(int(now_ms + lease_ms))}, ":now": {"N": str(int(now_ms))},
             ":entity": {"S": "pixiv_permit"}, ":acct": {"S": account_id}})

    def renew_permit(self, account_id: str, index: int, holder: str, now_ms: int, lease_ms: int) -> bool:
        return self._permit_update(account_id, index, "SET leaseUntil = :until", "holder = :me",
                                   {":me": {"S": holder}, ":until": {"N": str(int(now_ms + lease_ms))}})

    def release_permit(self, account_id: str, index: int, holder: str) -> bool:
        return self._permit_update(account_id, index, "REMOVE holder, leaseUntil", "holder = :me", {":me": {"S": holder}})

    def pace(self, account_id: str, now_ms: int, gap_ms: int) -> int:
        key = {"pk": {"S": account_pk(account_id)}, "sk": {"S": PACE_SK}}
        try:
            self._call("update_item", Key=key, UpdateExpression="SET nextAt = :next, entity = :entity, accountId = :acct",
                       ConditionExpression="attribute_not_exists(nextAt) OR nextAt <= :now",
                       ExpressionAttributeValues={":next": {"N": str(int(now_ms + gap_ms))}, ":now": {"N": str(int(now_ms))},
                                                  ":entity": {"S": "pixiv_pace"}, ":acct": {"S": account_id}})
            return 0
        except ClientError:
            item = self._get(account_id, PACE_SK)
            return max(1, int(item.get("nextAt", {}).get("N", "0")) - int(now_ms))


class MemoryPixivAccounts:
    """The same contract in process memory (unit tests, and a source built without a ledger)."""

    def __init__(self) -> None:
        self._gates: dict[str, AccountGate] = {}
        self._tokens: dict[str, str] = {}
        self._previous: dict[str, str] = {}
        self._rotated_at: dict[str, int] = {}
        self._permits: dict[tuple[str, int], AccountPermit] = {}
        self._next_at: dict[str, int] = {}
        self._lock = threading.Lock()
        self.gate_writes = 0
        self.rotations = 0

    def gate(self, account_id: str) -> AccountGate:
        with self._lock:
            return self._gates.get(account_id, AccountGate())

    def set_gate(self, account_id: str, seen: AccountGate, cooldown_until: int, penalties: int, now_ms: int, *,
                 cause: str = "rate_limited") -> bool:
        with self._lock:
            current = self._gates.get(account_id, AccountGate())
            if current.version != seen.version:
                return False
            self._gates[account_id] = AccountGate(int(cooldown_until), int(penalties), current.version + 1, cause)
            self.gate_writes += 1
            return True

    def token_fingerprint(self, account_id: str) -> str | None:
        with self._lock:
            return self._tokens.get(account_id)

    def rotate_token(self, account_id: str, old_fingerprint: str, new_fingerprint: str, now_ms: int, *,
                     lost: tuple[str, str] | None = None) -> bool:
        with self._lock:
            current = self._tokens.get(account_id)
            replaces_lost = lost is not None and (current, self._previous.get(account_id)) == lost
            if current is not None and current != old_fingerprint and not replaces_lost:
                return False
            self._tokens[account_id] = new_fingerprint
            self._previous[account_id] = old_fingerprint
            self._rotated_at[account_id] = int(now_ms)
            self.rotations += 1
            return True

    def adopt_token(self, account_id: str, seen_fingerprint: str | None, new_fingerprint: str, now_ms: int) -> bool:
        with self._lock:
            if self._tokens.get(account_id) != seen_fingerprint:
                return False
            if seen_fingerprint is not None:
                self._previous[account_id] = seen_fingerprint
            self._tokens[account_id] = new_fingerprint
            self._rotated_at[account_id] = int(now_ms)
            return True

    def token_guard(self, account_id: str) -> tuple[str | None, str | None]:
        with self._lock:
            return self._tokens.get(account_id), self._previous.get(account_id)

    def token_rotated_at(self, account_id: str) -> int | None:
        with self._lock:
            return self._rotated_at.get(account_id)

    def permits(self, account_id: str, count: int) -> list[AccountPermit]:
        with self._lock:
            return [self._permits.get((account_id, i), AccountPermit(i)) for i in range(count)]

    def take_permit(self, account_id: str, index: int, holder: str, now_ms: int, lease_ms: int) -> bool:
        with self._lock:
            current = self._permits.get((account_id, index), AccountPermit(index))
            if current.holder is not None and current.lease_until > now_ms and current.holder != holder:
                return False
            self._permits[(account_id, index)] = AccountPermit(index, holder, int(now_ms + lease_ms))
            return True

    def renew_permit(self, account_id: str, index: int, holder: str, now_ms: int, lease_ms: int) -> bool:
        with self._lock:
            if self._permits.get((account_id, index), AccountPermit(index)).holder != holder:
                return False
            self._permits[(account_id, index)] = AccountPermit(index, holder, int(now_ms + lease_ms))
            return True

    def release_permit(self, account_id: str, index: int, holder: str) -> bool:
        with self._lock:
            if self._permits.get((account_id, index), AccountPermit(index)).holder != holder:
                return False
            self._permits[(account_id, index)] = AccountPermit(index)
            return True

    def pace(self, account_id: str, now_ms: int, gap_ms: int) -> int:
        with self._lock:
            due = self._next_at.get(account_id, 0)
            if due > now_ms:
                return due - now_ms
            self._next_at[account_id] = int(now_ms + gap_ms)
            return 0
