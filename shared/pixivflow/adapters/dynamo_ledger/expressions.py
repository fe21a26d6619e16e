"""One UpdateExpression (SET / REMOVE / ADD) with its ConditionExpression, built with named
placeholders, so every conditional move of the ledger reads as the move it is."""

from __future__ import annotations

import json
import re
from typing import Any, Iterable

from .codec import _JSON_ATTRS, _to_ddb


class _Update:
    """Builds one UpdateExpression with named placeholders."""

    def __init__(self, *, or_absent: bool = False) -> None:
        # or_absent: the write may also create the item (UpdateItem upserts), or complete one that is
        # not a readable cell (no status: a partial item, SlotState.malformed): the conditions
        # then read "attribute_not_exists(pk) OR attribute_not_exists(#status) OR (all of them)"
        # instead of "attribute_exists(pk) AND ...". Such a write sets every attribute a cell is born
        # with where absent (DynamoLedger._materialise), so the item it leaves is always complete.
        self.or_absent = or_absent
        self.sets: list[str] = []
        self.removes: list[str] = []
        self.adds: list[str] = []
        self.names: dict[str, str] = {}
        self.values: dict[str, Any] = {}
        self.conditions: list[str] = []

    def name(self, attr: str) -> str:
        key = f"#{attr}"
        self.names[key] = attr
        return key

    def value(self, key: str, value: Any) -> str:
        placeholder = f":{key}"
        self.values[placeholder] = _to_ddb(value)
        return placeholder

    def set(self, attr: str, value: Any, *, if_not_exists: bool = False) -> "_Update":
        if value is None:
            return self.remove(attr)
        if attr in _JSON_ATTRS:
            value = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        n, v = self.name(attr), self.value(f"v_{attr}", value)
        self.sets.append(f"{n} = if_not_exists({n}, {v})" if if_not_exists else f"{n} = {v}")
        return self

    def remove(self, *attrs: str) -> "_Update":
        for attr in attrs:
            self.removes.append(self.name(attr))
        return self

    def add(self, attr: str, amount: int) -> "_Update":
        self.adds.append(f"{self.name(attr)} {self.value(f'add_{attr}', amount)}")
        return self

    def when(self, expr: str, **values: Any) -> "_Update":
        for k, v in values.items():
            self.value(k, v)
        for attr in re.findall(r"#(\w+)", expr):  # every #name used is declared: no dangling placeholder
            self.name(attr)
        self.conditions.append(f"({expr})")
        return self

    def status_in(self, states: Iterable[str], attr: str = "status") -> "_Update":
        states = sorted(states)
        n = self.name(attr)
        placeholders = [self.value(f"{attr}_from{i}", s) for i, s in enumerate(states)]
        self.conditions.append(f"({n} IN ({', '.join(placeholders)}))")
        return self

    def kwargs(self) -> dict[str, Any]:
        parts = []
        if self.sets:
            parts.append("SET " + ", ".join(self.sets))
        if self.removes:
            parts.append("REMOVE " + ", ".join(self.removes))
        if self.adds:
            parts.append("ADD " + ", ".join(self.adds))
        out: dict[str, Any] = {"UpdateExpression": " ".join(parts)}
        if self.or_absent:
            self.name("status")
            out["ConditionExpression"] = "attribute_not_exists(pk) OR attribute_not_exists(#status)" + (
                f" OR ({' AND '.join(self.conditions)})" if self.conditions else "")
        else:
            out["ConditionExpression"] = " AND ".join(["attribute_exists(pk)"] + self.conditions)
        if self.names:
            out["ExpressionAttributeNames"] = self.names
        if self.values:
            out["ExpressionAttributeValues"] = self.values
        return out


_NO_LIVE_LEASE = "attribute_not_exists(#leaseUntil) OR #leaseUntil <= :now OR attribute_not_exists(#leaseOwner)"
