"""What every adapter on the ledger table shares: the low-level client, the table, the
retention of terminal items, the item (de)serialisers, and the ONE mapping of DynamoDB's answers.

A refused condition (``ConditionalCheckFailedException``, or a transaction cancelled by one) is an
answer: it is re-raised for the caller to read. Every other ``ClientError`` is an outage of the
ledger and becomes ``LedgerUnavailable``, which callers treat as retryable infrastructure failure.
"""

from __future__ import annotations

from functools import cache
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
        self._client = client
        self._table = table
        self._retention_s = max(1, retention_days) * 86_400
        self._ser, self._de = _codecs()

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


@cache
def _codecs() -> tuple[Any, Any]:
    """boto3's TypeSerializer and TypeDeserializer, answering the common shapes (strings, numbers,
    maps, lists, booleans, null) without their per-value type probing (``getattr`` of a method named
    after the type, a chain of ``isinstance`` checks): every attribute of every item a Lambda reads
    or writes goes through them. Anything else is theirs, unchanged. Stateless, so one pair per
    container serves every adapter (imported on first use, as before: boto3 is a cold-start cost)."""
    from boto3.dynamodb.types import DYNAMODB_CONTEXT, TypeDeserializer, TypeSerializer

    number = DYNAMODB_CONTEXT.create_decimal

    class Serializer(TypeSerializer):
        def serialize(self, value: Any) -> Any:  # boto3-stubs types it as AttributeValueTypeDef
            kind = type(value)
            if kind is str:
                return {"S": value}
            if kind is int:
                return {"N": str(number(value))}
            if kind is dict:
                return {"M": {k: self.serialize(v) for k, v in value.items()}}
            if kind is list:
                return {"L": [self.serialize(v) for v in value]}
            if kind is bool:
                return {"BOOL": value}
            if value is None:
                return {"NULL": True}
            return super().serialize(value)  # Decimal (NaN, infinity), sets, bytes, subclasses, refusals

    class Deserializer(TypeDeserializer):
        def deserialize(self, value: Any) -> Any:
            if type(value) is dict and len(value) == 1:
                (kind, raw), = value.items()
                if kind == "S":
                    return raw
                if kind == "N":
                    return number(raw)
                if kind == "M":
                    return {k: self.deserialize(v) for k, v in raw.items()}
                if kind == "L":
                    return [self.deserialize(v) for v in raw]
                if kind == "BOOL":
                    return raw
                if kind == "NULL":
                    return None
            return super().deserialize(value)  # binary, sets, and every malformed value's TypeError

    return Serializer(), Deserializer()
