"""What every part of the ledger adapter stands on: its client and table, the log of items it cannot
read, and the low-level conditional writes and reads."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from ...ports import Log
from ..dynamodb_base import DynamoItems, refused_item
from .expressions import _Update

# How long after its creation a delivery row may still be retried, on top of the retention.
INTENT_RETRY_HORIZON_S = 7 * 86_400



class LedgerItems(DynamoItems):
    """The table, the client and the log (``log`` reports a cell item that cannot be read: the read
    goes on without it, SlotState.malformed, one error line says which item and why)."""

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

    def _marshal_update(self, upd: _Update) -> dict[str, Any]:
        kw = upd.kwargs()
        if "ExpressionAttributeValues" in kw:
            kw["ExpressionAttributeValues"] = {k: self._ser.serialize(v) for k, v in kw["ExpressionAttributeValues"].items()}
        return kw
