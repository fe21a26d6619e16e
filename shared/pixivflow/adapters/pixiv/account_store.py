"""Per-account Pixiv state on the ledger table (``PixivAccountStore``), and an in-memory twin.

Items (same table as the ledger, low-level client, every write conditional):

  PIXIV#<accountId> / GATE    cooldownUntil (epoch ms), penalties, ver: the rate-limit gate every
                              container of the account shares (issue 10)
  PIXIV#<accountId> / TOKEN   fingerprint (SHA-256 hex of the refresh token last persisted), ver,
                              rotatedAt: the guard of a refresh-token rotation

The token itself is never written here (it lives in SSM); only its fingerprint, so a container
can tell that another one rotated it. Neither item carries a GSI key or a TTL: account state is
long-lived and never listed.
"""

from __future__ import annotations

import threading
from typing import Any

from botocore.exceptions import ClientError

from ...domain.errors import LedgerUnavailable
from ...ports import AccountGate

GATE_SK = "GATE"
TOKEN_SK = "TOKEN"


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
                           version=int(item.get("ver", {}).get("N", "0")))

    def set_gate(self, account_id: str, seen: AccountGate, cooldown_until: int, penalties: int, now_ms: int) -> bool:
        condition = "attribute_not_exists(pk)" if seen.version == 0 else "ver = :seen"
        values: dict[str, Any] = {":until": {"N": str(int(cooldown_until))}, ":pen": {"N": str(int(penalties))},
                                  ":ver": {"N": str(seen.version + 1)}, ":now": {"N": str(int(now_ms))},
                                  ":entity": {"S": "pixiv_gate"}, ":acct": {"S": account_id}}
        if seen.version:
            values[":seen"] = {"N": str(seen.version)}
        try:
            self._call(
                "update_item", Key={"pk": {"S": account_pk(account_id)}, "sk": {"S": GATE_SK}},
                UpdateExpression="SET cooldownUntil = :until, penalties = :pen, ver = :ver, updatedAt = :now, "
                                 "entity = :entity, accountId = :acct",
                ConditionExpression=condition, ExpressionAttributeValues=values,
            )
            return True
        except ClientError:
            return False

    def token_fingerprint(self, account_id: str) -> str | None:
        item = self._get(account_id, TOKEN_SK)
        return item.get("fingerprint", {}).get("S") if item else None

    def rotate_token(self, account_id: str, old_fingerprint: str, new_fingerprint: str, now_ms: int) -> bool:
        # The item may not exist yet (first rotation ever): the first container to record the
        # move away from the token it started with wins; a second one that also started from
        # ``old`` finds a different fingerprint and loses.
        try:
            self._call(
                "update_item", Key={"pk": {"S": account_pk(account_id)}, "sk": {"S": TOKEN_SK}},
                UpdateExpression="SET fingerprint = :new, rotatedAt = :now, entity = :entity, accountId = :acct "
                                 "ADD ver :one",
                ConditionExpression="attribute_not_exists(fingerprint) OR fingerprint = :old",
                ExpressionAttributeValues={":new": {"S": new_fingerprint}, ":old": {"S": old_fingerprint},
                                           ":now": {"N": str(int(now_ms))}, ":one": {"N": "1"},
                                           ":entity": {"S": "pixiv_token"}, ":acct": {"S": account_id}},
            )
            return True
        except ClientError:
            return False


class MemoryPixivAccounts:
    """The same contract in process memory (unit tests, and a source built without a ledger)."""

    def __init__(self) -> None:
        self._gates: dict[str, AccountGate] = {}
        self._tokens: dict[str, str] = {}
        self._lock = threading.Lock()
        self.gate_writes = 0
        self.rotations = 0

    def gate(self, account_id: str) -> AccountGate:
        with self._lock:
            return self._gates.get(account_id, AccountGate())

    def set_gate(self, account_id: str, seen: AccountGate, cooldown_until: int, penalties: int, now_ms: int) -> bool:
        with self._lock:
            current = self._gates.get(account_id, AccountGate())
            if current.version != seen.version:
                return False
            self._gates[account_id] = AccountGate(int(cooldown_until), int(penalties), current.version + 1)
            self.gate_writes += 1
            return True

    def token_fingerprint(self, account_id: str) -> str | None:
        with self._lock:
            return self._tokens.get(account_id)

    def rotate_token(self, account_id: str, old_fingerprint: str, new_fingerprint: str, now_ms: int) -> bool:
        with self._lock:
            current = self._tokens.get(account_id)
            if current is not None and current != old_fingerprint:
                return False
            self._tokens[account_id] = new_fingerprint
            self.rotations += 1
            return True
