"""What every adapter on the ledger table shares (DESIGN §4): the low-level client, the table, the
retention of terminal items, the item (de)serialisers, and the ONE mapping of DynamoDB's answers.

A refused condition (``ConditionalCheckFailedException``, or a transaction cancelled by one) is an
answer: it is re-raised for the caller to read. Every other ``ClientError`` is an outage of the
ledger and becomes ``LedgerUnavailable``, which callers treat as retryable infrastructure failure.
"""

from __future__ import annotations

from typing import Any, Mapping

from botocore.exceptions import ClientError

from ..domain.errors import LedgerUnavailable

REFUSALS = frozenset({"ConditionalCheckFailedException", "TransactionCanceledException"})


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def is_conditional_failure(exc: ClientError) -> bool:
    return error_code(exc) == "ConditionalCheckFailedException"


def refused_item(exc: ClientError) -> dict[str, Any] | None:
    """The item a refused condition sent back (``ReturnValuesOnConditionCheckFailure=ALL_OLD``), in
    DynamoDB's attribute-value form, or None. botocore's stubs leave ``Item`` out of the response."""
    item = exc.response.get("Item")
    return item if isinstance(item, dict) else None


class DynamoItems:
    """Base of the ledger-table adapters (ledger, job store, outbox rows, callback rows, sweep state)."""

    def __init__(self, client: Any, table: str, *, retention_days: int = 30) -> None:
        from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

        self._client = client
        self._table = table
        self._retention_s = max(1, retention_days) * 86_400
        self._ser = TypeSerializer()
        self._de = TypeDeserializer()

    def _call(self, op: str, **kwargs: Any) -> Any:
        try:
            return getattr(self._client, op)(**kwargs)
        except ClientError as exc:
            if error_code(exc) in REFUSALS:
                raise  # a refused condition is an answer, not an outage
            raise LedgerUnavailable(f"DynamoDB {op} failed: {error_code(exc)}") from exc

    def _marshal(self, item: Mapping[str, Any]) -> dict[str, Any]:
        return {k: self._ser.serialize(v) for k, v in item.items()}

    def _unmarshal(self, item: Mapping[str, Any]) -> dict[str, Any]:
        return {k: self._de.deserialize(v) for k, v in item.items()}

    def _expires(self, now_ms: int) -> int:
        """The TTL (epoch seconds) of an item that turns terminal at ``now_ms``."""
        return now_ms // 1000 + self._retention_s
