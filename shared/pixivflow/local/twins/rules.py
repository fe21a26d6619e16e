"""What DynamoDB refuses before it reads anything: attribute values, keys and their sizes, key conditions.

Each check raises :class:`Refusal` with DynamoDB's own message (as moto copies it where moto has it);
the client twin turns it into a ``ValidationException`` of the operation. Kept apart from the client so
each rule reads as one function, and so the contract suite (``tests/contract``) can name the rule a
case exercises. Sources: the DynamoDB Developer Guide, "Service, account, and table quotas" (key and
item sizes, 38 digits of number precision, the magnitude range) and "Key condition expressions".
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any, Mapping

#: partition key value at most 2048 bytes, sort key value at most 1024 bytes (table and index keys alike)
MAX_HASH_KEY_BYTES = 2048
MAX_RANGE_KEY_BYTES = 1024

_TYPES = frozenset({"S", "N", "B", "SS", "NS", "BS", "M", "L", "NULL", "BOOL"})
# DynamoDB's number literal: optional sign, digits with an optional fraction (or a bare fraction), an
# optional exponent. No blanks, no NaN/Infinity, no hex.
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\Z")
_MAX_MAGNITUDE = Decimal("9.9999999999999999999999999999999999999E+125")
_MIN_MAGNITUDE = Decimal("1E-130")


class Refusal(ValueError):
    """A request DynamoDB answers with ValidationException (the message is DynamoDB's)."""


def number_ok(raw: Any) -> None:
    """``number``'s refusals without building the Decimal: a plain ASCII integer of at most 38 digits
    (every epoch ms, count and version the product writes) is always storable, so only the rest is
    parsed."""
    if type(raw) is str and len(raw) <= 38 and raw.isascii() and raw.isdigit():
        return
    number(raw)


def number(raw: Any) -> Decimal:
    """The value of a number attribute, refusing what DynamoDB cannot store (syntax, 38 digits, range)."""
    if not isinstance(raw, str) or not _NUMBER.match(raw):
        raise Refusal(f"The parameter cannot be converted to a numeric value: {raw}")
    try:
        value = Decimal(raw)
    except InvalidOperation as exc:  # pragma: no cover - the pattern admits only what Decimal parses
        raise Refusal(f"The parameter cannot be converted to a numeric value: {raw}") from exc
    if value == 0:
        return value
    digits = "".join(map(str, value.as_tuple().digits)).strip("0")  # significant digits (normalize() would round to 28)
    if len(digits) > 38:
        raise Refusal("Attempting to store more than 38 significant digits in a Number")
    if value.copy_abs() > _MAX_MAGNITUDE:  # copy_abs: abs() would round to 28 digits
        raise Refusal("Number overflow. Attempting to store a number with magnitude larger than supported range")
    if value.copy_abs() < _MIN_MAGNITUDE:
        raise Refusal("Number underflow. Attempting to store a number with magnitude smaller than supported range")
    return value


def value(v: Any) -> None:
    """One attribute value, recursively: exactly one data type, well-formed scalars, non-empty sets without
    duplicates."""
    if not v or not (type(v) is dict or isinstance(v, Mapping)):  # type() first: isinstance on Mapping is slow
        raise Refusal("Supplied AttributeValue is empty, must contain exactly one of the supported datatypes")
    if len(v) != 1:
        raise Refusal("Supplied AttributeValue has more than one datatypes set, must contain exactly one of the supported datatypes")
    (t, raw), = v.items()
    if t not in _TYPES:
        raise Refusal("Supplied AttributeValue is empty, must contain exactly one of the supported datatypes")
    if t == "S":
        if not isinstance(raw, str):
            raise Refusal("One or more parameter values were invalid: a string attribute is not a string")
        if raw.isascii():  # ASCII is valid UTF-8; only a non-ASCII string may hold a lone surrogate
            return
        try:
            raw.encode("utf-8")
        except UnicodeEncodeError as exc:  # a lone surrogate: never valid UTF-8 on the wire
            raise Refusal("One or more parameter values were invalid: a string is not valid UTF-8") from exc
    elif t == "N":
        number_ok(raw)
    elif t == "B":
        if not isinstance(raw, (bytes, bytearray)):
            raise Refusal("One or more parameter values were invalid: a binary attribute is not bytes")
    elif t in ("SS", "NS", "BS"):
        if not isinstance(raw, (list, tuple)) or not raw:
            kind = {"SS": "string", "NS": "number", "BS": "binary"}[t]
            raise Refusal(f"One or more parameter values were invalid: An {kind} set  may not be empty")
        for x in raw:
            value({t[0]: x})
        keys = [number(x) for x in raw] if t == "NS" else [bytes(x) if t == "BS" else x for x in raw]
        if len(set(keys)) != len(keys):
            shown = ", ".join(str(x) for x in raw)
            raise Refusal(f"One or more parameter values were invalid: Input collection [{shown}] contains duplicates.")
    elif t == "M":
        if not isinstance(raw, Mapping):
            raise Refusal("One or more parameter values were invalid: a map attribute is not a map")
        for x in raw.values():
            value(x)
    elif t == "L":
        if not isinstance(raw, (list, tuple)):
            raise Refusal("One or more parameter values were invalid: a list attribute is not a list")
        for x in raw:
            value(x)
    elif t == "BOOL":
        if not isinstance(raw, bool):
            raise Refusal("One or more parameter values were invalid: a boolean attribute is not a boolean")
    elif raw is not True:  # NULL
        raise Refusal("One or more parameter values were invalid: Null attribute value types must have the value of true")


def values(attrs: Mapping[str, Any] | None) -> None:
    for v in (attrs or {}).values():
        value(v)


def key_bytes(v: Mapping[str, Any]) -> int:
    (t, raw), = v.items()
    if t == "S":
        return len(raw.encode("utf-8"))
    if t == "B":
        return len(raw)
    return len(str(raw))


class KeyRole:
    """A key attribute of the table or of one index: its name, declared type and whether it is the HASH."""

    __slots__ = ("name", "type", "hash", "index")

    def __init__(self, name: str, type_: str, is_hash: bool, index: str | None) -> None:
        self.name, self.type, self.hash, self.index = name, type_, is_hash, index

    def lookup_ok(self, v: Mapping[str, Any]) -> None:
        """A value this key is looked up by (a Key parameter, a key condition): non-empty and small enough."""
        t = _type_of(v)
        if t in ("S", "B") and len(v[t]) == 0:
            raise Refusal("One or more parameter values are not valid. The AttributeValue for a key attribute cannot "
                          f"contain an empty string value. Key: {self.name}")
        self.size_ok(v)

    def size_ok(self, v: Mapping[str, Any]) -> None:
        if self.hash and key_bytes(v) > MAX_HASH_KEY_BYTES:
            raise Refusal("One or more parameter values were invalid: Size of hashkey has exceeded the maximum size limit "
                          f"of{MAX_HASH_KEY_BYTES} bytes")
        if not self.hash and key_bytes(v) > MAX_RANGE_KEY_BYTES:
            raise Refusal("One or more parameter values were invalid: Aggregated size of all range keys has exceeded the size "
                          f"limit of {MAX_RANGE_KEY_BYTES} bytes")


def _type_of(v: Any) -> str | None:
    return next(iter(v)) if (type(v) is dict or isinstance(v, Mapping)) and len(v) == 1 else None


def item_keys(item: Mapping[str, Any], table_keys: tuple[KeyRole, ...], index_keys: tuple[KeyRole, ...], *,
              updated: bool = False) -> None:
    """A whole item about to be stored: its table key present, typed, non-empty and small enough; every
    index key it carries typed, non-empty and small enough (an index key it lacks keeps it out of the
    index, which is allowed: sparse indexes)."""
    for role in table_keys:
        v = item.get(role.name)
        if v is None:
            raise Refusal(f"One or more parameter values were invalid: Missing the key {role.name} in the item")
        t = _type_of(v)
        if t != role.type:
            raise Refusal(f"One or more parameter values were invalid: Type mismatch for key {role.name} expected: "
                          f"{role.type} actual: {t}")
        if t in ("S", "B") and len(v[t]) == 0:
            raise Refusal(f"One or more parameter values were invalid: An AttributeValue may not contain an empty string. "
                          f"Key: {role.name}")
        role.size_ok(v)
    for role in index_keys:
        v = item.get(role.name)
        if v is None:
            continue
        t = _type_of(v)
        if t != role.type:
            raise Refusal(f"One or more parameter values were invalid: Type mismatch for Index Key {role.name} Expected: "
                          f"{role.type} Actual: {t} IndexName: {role.index}")
        if t in ("S", "B") and len(v[t]) == 0:
            what = ("The update expression attempted to update a secondary index key to a value that is not supported"
                    if updated else "A value specified for a secondary index key is not supported")
            raise Refusal(f"One or more parameter values are not valid. {what}. The AttributeValue for a key attribute "
                          f"cannot contain an empty string value. IndexName: {role.index}, IndexKey: {role.name}")
        role.size_ok(v)


def key(key_item: Mapping[str, Any], table_keys: tuple[KeyRole, ...]) -> None:
    """A ``Key`` parameter (GetItem, UpdateItem, DeleteItem, the batch and transaction ones): exactly the
    table's key attributes, typed as declared, non-empty and small enough — on reads as on writes."""
    if not isinstance(key_item, Mapping) or set(key_item) != {r.name for r in table_keys}:
        raise Refusal("The provided key element does not match the schema")
    for role in table_keys:
        v = key_item[role.name]
        value(v)
        t = _type_of(v)
        if t != role.type:
            raise Refusal("The provided key element does not match the schema")
        role.lookup_ok(v)


# -- key conditions (Query) --------------------------------------------------------------------------

def _parts(node: tuple) -> tuple[tuple, tuple]:
    """(the attribute operand, the other operands) of one comparison, BETWEEN or begins_with."""
    if node[0] == "fn":
        return node[2][0], tuple(node[2][1:])
    if node[0] == "between":
        return node[1], (node[2], node[3])
    return node[2], (node[3],)


@lru_cache(maxsize=1024)
def _key_condition_shape(tree: tuple, hash_role: KeyRole, range_role: KeyRole | None,
                         names: tuple[tuple[str, str], ...]) -> tuple[tuple, tuple | None]:
    """The structural half of :func:`key_condition` (no values): the same few expressions come back on
    every query, so it is cached by expression, key schema and placeholder names."""
    aliases = dict(names)

    def name_of(seg: tuple[str, str]) -> str:
        return seg[1] if seg[0] == "ident" else aliases[seg[1]]

    conditions: list[tuple] = []
    def flatten(node: tuple) -> None:
        kind = node[0]
        if kind == "and":
            flatten(node[1])
            flatten(node[2])
        elif kind in ("or", "not", "in"):
            raise Refusal(f"Invalid operator used in KeyConditionExpression: {kind.upper()}")
        elif kind == "cmp" and node[1] == "<>":
            raise Refusal("Invalid operator used in KeyConditionExpression: <>")
        elif kind == "fn" and node[1] != "begins_with":
            raise Refusal(f"Invalid KeyConditionExpression: Invalid function name; function: {node[1]}")
        else:
            conditions.append(node)

    flatten(tree)
    if len(conditions) > 2:
        raise Refusal("KeyConditionExpressions must only contain one condition per key")
    by_name: dict[str, tuple] = {}
    for node in conditions:
        target, operands = _parts(node)
        if target[0] != "path" or any(o[0] != "value" for o in operands):
            if target[0] == "size" or any(o[0] == "size" for o in operands):
                raise Refusal("Invalid KeyConditionExpression: Invalid function name; function: size")
            raise Refusal("Invalid condition in KeyConditionExpression: Multiple attribute names used in one condition")
        if len(target[1]) != 1 or isinstance(target[1][0], int):
            raise Refusal("KeyConditionExpressions cannot contain nested attributes: "
                          + ".".join(str(s) if isinstance(s, int) else name_of(s) for s in target[1]))
        name = name_of(target[1][0])
        if name in by_name:
            raise Refusal("KeyConditionExpressions must only contain one condition per key")
        by_name[name] = node
    if hash_role.name not in by_name:
        raise Refusal(f"Query condition missed key schema element: {hash_role.name}")
    for name in by_name:
        if name != hash_role.name and (range_role is None or name != range_role.name):
            raise Refusal("Query key condition not supported")
    hash_node = by_name[hash_role.name]
    if hash_node[0] != "cmp" or hash_node[1] != "=":
        raise Refusal("Query key condition not supported")
    range_node = by_name.get(range_role.name) if range_role is not None else None
    return hash_node, range_node


def key_condition(tree: tuple, hash_role: KeyRole, range_role: KeyRole | None, names: Mapping[str, str],
                  value_of: Any) -> tuple[Any, tuple | None]:
    """The partition key value a KeyConditionExpression selects and its sort-key condition (a subtree or None).

    DynamoDB's rules: one equality on the partition key, at most one condition on the sort key (``=``,
    ``<``, ``<=``, ``>``, ``>=``, ``BETWEEN`` or ``begins_with``), joined by AND; no OR, NOT, IN or ``<>``,
    no other function, no nested path, no attribute that is not a key of the table (or of the index
    queried); values typed as the key is declared, non-empty and within the key size limits.
    """
    hash_node, range_node = _key_condition_shape(tree, hash_role, range_role, tuple(sorted(names.items())))
    roles = [(hash_role, hash_node)] + ([(range_role, range_node)] if range_node is not None and range_role is not None else [])
    for role, node in roles:
        for operand in _parts(node)[1]:
            v = value_of(operand[1])
            t = _type_of(v)
            if node[0] == "fn" and (t not in ("S", "B") or role.type not in ("S", "B")):
                raise Refusal("Invalid KeyConditionExpression: Incorrect operand type for operator or function; "
                              f"operator or function: begins_with, operand type: {t}")
            if t != role.type:
                raise Refusal("One or more parameter values were invalid: Condition parameter type does not match schema type")
            role.lookup_ok(v)
    return value_of(hash_node[3][1]), range_node
