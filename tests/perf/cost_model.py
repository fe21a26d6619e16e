"""Count AWS requests and model DynamoDB write units (moto's ConsumedCapacity is canned).

A botocore hook sees every request the engine's clients make. For each write it reads the
touched items before and after through a SEPARATE, uncounted client and charges what DynamoDB
bills: ceil(max(before, after) / 1 KB) per item, doubled inside a transaction, plus one unit per
GSI the item enters or leaves and two when a GSI key changes (KEYS_ONLY projections). A refused
conditional write is still billed at the size of the item it was checked against.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

GSI_KEYS = (("activePk", "activeSk"), ("duePk", "dueSk"), ("callbackPk", "callbackSk"))
WRITES = {"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"}


def item_size(item: dict[str, Any] | None) -> int:
    """DynamoDB's item size: attribute names plus values (wire JSON is a fair, slightly high proxy)."""
    if not item:
        return 0
    size = 0
    for name, value in item.items():
        size += len(name.encode()) + _value_size(value)
    return size


def _value_size(value: dict[str, Any]) -> int:
    (kind, v), = value.items()
    if kind == "S":
        return len(v.encode())
    if kind == "N":
        return len(v) // 2 + 1
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "L":
        return 3 + sum(1 + _value_size(x) for x in v)
    if kind == "M":
        return 3 + sum(len(k.encode()) + 1 + _value_size(x) for k, x in v.items())
    return len(json.dumps(v))


@dataclass
class CostMeter:
    shadow: Any  # an uncounted low-level DynamoDB client on the same endpoint
    table: str
    requests: Counter = field(default_factory=Counter)
    write_units: float = 0.0
    write_units_by_op: Counter = field(default_factory=Counter)
    sqs_messages: int = 0
    _pending: list[tuple[str, list[tuple[dict, int, tuple]]]] = field(default_factory=list)

    def attach(self, client: Any) -> None:
        client.meta.events.register("before-call.*.*", self._before)
        client.meta.events.register("after-call.*.*", self._after)

    def _get(self, key: dict[str, Any]) -> dict[str, Any] | None:
        return self.shadow.get_item(TableName=self.table, Key=key, ConsistentRead=True).get("Item")

    def _keys(self, op: str, params: dict[str, Any]) -> list[tuple[dict, int]]:
        if op in ("PutItem",):
            return [({"pk": params["Item"]["pk"], "sk": params["Item"]["sk"]}, 1)]
        if op in ("UpdateItem", "DeleteItem"):
            return [(params["Key"], 1)]
        if op == "TransactWriteItems":
            out = []
            for action in params["TransactItems"]:
                (kind, body), = action.items()
                key = body.get("Key") or {"pk": body["Item"]["pk"], "sk": body["Item"]["sk"]}
                out.append((key, 2))
            return out
        return []

    def _before(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        service, op = model.service_model.service_name, model.name
        if service == "dynamodb" and op in WRITES:
            body = json.loads(params["body"]) if isinstance(params.get("body"), (bytes, str)) else {}
            touched = [(k, mult, self._get(k)) for k, mult in self._keys(op, body)]
            self._pending.append((op, touched))
        if service == "sqs" and op in ("SendMessage", "SendMessageBatch"):
            try:
                data = json.loads(params.get("body") or b"{}")
            except (TypeError, ValueError):
                data = {}
            self.sqs_messages += len(data.get("Entries", [])) if op == "SendMessageBatch" else 1

    def _after(self, model: Any, http_response: Any, **_: Any) -> None:
        service, op = model.service_model.service_name, model.name
        self.requests[(service, op)] += 1
        if service == "dynamodb" and op in WRITES and self._pending:
            op_name, touched = self._pending.pop(0)
            units = 0.0
            for key, mult, before in touched:
                after = self._get(key)
                size = max(item_size(before), item_size(after))
                units += mult * max(1, math.ceil(size / 1024))
                for pk, sk in GSI_KEYS:
                    had = before is not None and pk in before
                    has = after is not None and pk in after
                    if had and has and (before[pk], before.get(sk)) != (after[pk], after.get(sk)):
                        units += 2
                    elif had != has:
                        units += 1
            self.write_units += units
            self.write_units_by_op[op_name] += units

    def count(self, service: str, ops: set[str] | None = None) -> int:
        return sum(n for (s, o), n in self.requests.items() if s == service and (ops is None or o in ops))
