"""moto's DynamoDB client plus the checks DynamoDB makes and moto does not (issue 20).

The contract suite runs every refusal on moto and on the twin. Where moto is laxer than DynamoDB, the
twin follows DynamoDB and the case runs on moto through :class:`StrictMoto`, which adds exactly the
named check in front of moto and forwards everything else. Each check is written here, from the
DynamoDB documentation, independently of the twin's ``rules.py`` — two implementations of one rule,
compared by the same cases. ``test_dynamodb_refusals.py::test_moto_alone_is_still_laxer`` proves each
check is still needed: the day moto refuses a case itself, that test fails and the check goes.

The checks know the ledger table's schema (``template.yaml``: every key attribute is a string): table
keys ``pk``/``sk``, index keys ``activePk``/``activeSk``, ``duePk``/``dueSk``, ``callbackPk``/``callbackSk``.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from botocore.exceptions import ClientError

TABLE_KEYS = {"pk": 2048, "sk": 1024}  # key attribute -> its byte limit
INDEX_KEYS = {"activePk": 2048, "activeSk": 1024, "duePk": 2048, "dueSk": 1024, "callbackPk": 2048, "callbackSk": 1024}
_SIZE_MESSAGE = {2048: "Size of hashkey has exceeded the maximum size limit of2048 bytes",
                 1024: "Aggregated size of all range keys has exceeded the size limit of 1024 bytes"}

_CMP = re.compile(r"(#?\w+)\s*(=|<=|>=|<|>)\s*(:\w+)")
_BETWEEN = re.compile(r"(#?\w+)\s+BETWEEN\s+(:\w+)\s+AND\s+(:\w+)", re.I)
_BEGINS = re.compile(r"begins_with\(\s*(#?\w+)\s*,\s*(:\w+)\s*\)")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\Z")


def _key_condition(kw: dict) -> list[tuple[str, str, list[str]]]:
    """(attribute, operator, value placeholders) of each condition of a KeyConditionExpression."""
    text, names = kw.get("KeyConditionExpression", ""), kw.get("ExpressionAttributeNames") or {}
    found = [(m[1], "begins_with", [m[2]]) for m in _BEGINS.finditer(text)]
    found += [(m[1], "BETWEEN", [m[2], m[3]]) for m in _BETWEEN.finditer(text)]
    rest = _BETWEEN.sub("", _BEGINS.sub("", text))
    found += [(m[1], m[2], [m[3]]) for m in _CMP.finditer(rest)]
    return [(names.get(a, a), op, vs) for a, op, vs in found]


def _values(v: Any):
    """Every attribute value inside ``v``, itself included."""
    yield v
    (t, raw), = v.items()
    if t == "M":
        for x in raw.values():
            yield from _values(x)
    elif t == "L":
        for x in raw:
            yield from _values(x)


def _all_values(op: str, kw: dict):
    for v in (kw.get("ExpressionAttributeValues") or {}).values():
        yield from _values(v)
    items = [kw["Item"]] if "Item" in kw else []
    for requests in (kw.get("RequestItems") or {}).values():
        if isinstance(requests, list):
            items += [r["PutRequest"]["Item"] for r in requests if "PutRequest" in r]
    for action in kw.get("TransactItems") or []:
        (_, body), = action.items()
        items += [body["Item"]] if "Item" in body else []
        for v in (body.get("ExpressionAttributeValues") or {}).values():
            yield from _values(v)
    for item in items:
        for v in item.values():
            yield from _values(v)


def _keys(op: str, kw: dict) -> list[dict]:
    """Every Key parameter of a request (reads, deletes and a Query/Scan ExclusiveStartKey; writes of whole items
    moto checks itself)."""
    keys = [kw["Key"]] if "Key" in kw else []
    for request in (kw.get("RequestItems") or {}).values():
        if isinstance(request, dict):
            keys += request["Keys"]
        else:
            keys += [r["DeleteRequest"]["Key"] for r in request if "DeleteRequest" in r]
    for action in kw.get("TransactItems") or []:
        (_, body), = action.items()
        keys += [body["Key"]] if "Key" in body else []
    keys += [kw["ExclusiveStartKey"]] if "ExclusiveStartKey" in kw else []  # a start key is a key too
    return keys


def key_condition_operators(op: str, kw: dict) -> str | None:
    text = kw.get("KeyConditionExpression")
    if not text:
        return None
    for word in ("OR", "NOT", "IN"):
        if re.search(rf"\b{word}\b", text):
            return f"Invalid operator used in KeyConditionExpression: {word}"
    if "<>" in text:
        return "Invalid operator used in KeyConditionExpression: <>"
    return None


def key_condition_one_per_key(op: str, kw: dict) -> str | None:
    names = [a for a, _, _ in _key_condition(kw)]
    return "KeyConditionExpressions must only contain one condition per key" if len(names) != len(set(names)) else None


def key_condition_types(op: str, kw: dict) -> str | None:
    values = kw.get("ExpressionAttributeValues") or {}
    for _attr, operator, placeholders in _key_condition(kw):
        for p in placeholders:
            (t, _), = values[p].items()
            if operator == "begins_with" and t not in ("S", "B"):
                return ("Invalid KeyConditionExpression: Incorrect operand type for operator or function; operator or "
                        f"function: begins_with, operand type: {t}")
            if t != "S":
                return "One or more parameter values were invalid: Condition parameter type does not match schema type"
    return None


def key_sizes_on_reads(op: str, kw: dict) -> str | None:
    limits = {**TABLE_KEYS, **INDEX_KEYS}
    values = kw.get("ExpressionAttributeValues") or {}
    pairs = [(a, values[p]) for a, _, ps in _key_condition(kw) for p in ps]
    pairs += [(a, v) for key in _keys(op, kw) for a, v in key.items()]
    for attr, v in pairs:
        limit = limits.get(attr)
        if limit and "S" in v and len(v["S"].encode("utf-8")) > limit:
            return f"One or more parameter values were invalid: {_SIZE_MESSAGE[limit]}"
    return None


def empty_key_on_delete(op: str, kw: dict) -> str | None:
    if op not in ("delete_item", "batch_write_item"):
        return None
    for key in _keys(op, kw):
        for attr, v in key.items():
            if v.get("S") == "":
                return ("One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain "
                        f"an empty string value. Key: {attr}")
    return None


def index_key_types(op: str, kw: dict) -> str | None:
    items = [kw["Item"]] if "Item" in kw else []
    for action in kw.get("TransactItems") or []:
        (_, body), = action.items()
        items += [body["Item"]] if "Item" in body else []
    for item in items:
        for attr in INDEX_KEYS:
            if attr in item and "S" not in item[attr]:
                actual = next(iter(item[attr]))
                return f"One or more parameter values were invalid: Type mismatch for Index Key {attr} Expected: S Actual: {actual}"
    return None


def numbers(op: str, kw: dict) -> str | None:
    for v in _all_values(op, kw):
        (t, raw), = v.items()
        for n in raw if t == "NS" else [raw] if t == "N" else []:
            if not _NUMBER.match(n):
                return f"The parameter cannot be converted to a numeric value: {n}"
            if len(re.sub(r"[^0-9]", "", n.split("e")[0].split("E")[0]).strip("0")) > 38:
                return "Attempting to store more than 38 significant digits in a Number"
    return None


def set_duplicates(op: str, kw: dict) -> str | None:
    for v in _all_values(op, kw):
        (t, raw), = v.items()
        if t in ("SS", "NS", "BS") and len(set(raw)) != len(raw):
            return f"One or more parameter values were invalid: Input collection [{', '.join(map(str, raw))}] contains duplicates."
    return None


def batch_write_one_request_per_key(op: str, kw: dict) -> str | None:
    if op != "batch_write_item":
        return None
    for requests in kw["RequestItems"].values():
        keys = [repr(sorted((a, v["S"]) for a, v in (r.get("PutRequest", {}).get("Item") or r["DeleteRequest"]["Key"]).items()
                            if a in TABLE_KEYS)) for r in requests]
        if len(keys) != len(set(keys)):
            return "Provided list of item keys contains duplicates"
    return None


def transaction_4mb(op: str, kw: dict) -> str | None:
    if op != "transact_write_items":
        return None
    size = 0
    for action in kw["TransactItems"]:
        (_, body), = action.items()
        for attrs in (body.get("Item"), body.get("Key"), body.get("ExpressionAttributeValues")):
            for name, v in (attrs or {}).items():
                size += len(name) + sum(len(str(x)) for x in _values(v))
    return "Transaction request cannot be larger than 4 MB" if size > 4 * 1024 * 1024 else None


def start_key_in_bounds(op: str, kw: dict) -> str | None:
    start = kw.get("ExclusiveStartKey")
    if op != "query" or not start:
        return None
    values = kw.get("ExpressionAttributeValues") or {}
    for attr, operator, placeholders in _key_condition(kw):
        if operator == "=" and attr in ("pk", "activePk", "duePk", "callbackPk") and start.get(attr) != values[placeholders[0]]:
            return "The provided starting key is outside query boundaries based on provided conditions"
    return None


#: rule -> check: every DynamoDB refusal moto lacks (listed in README.md, proven needed by the suite)
CHECKS: dict[str, Callable[[str, dict], str | None]] = {
    "key-condition-operators": key_condition_operators,
    "key-condition-one-per-key": key_condition_one_per_key,
    "key-condition-types": key_condition_types,
    "key-sizes-on-reads": key_sizes_on_reads,
    "empty-key-on-delete": empty_key_on_delete,
    "index-key-types": index_key_types,
    "numbers": numbers,
    "set-duplicates": set_duplicates,
    "batch-write-one-request-per-key": batch_write_one_request_per_key,
    "transaction-4mb": transaction_4mb,
    "start-key-in-bounds": start_key_in_bounds,
}


class StrictMoto:
    """``boto3.client("dynamodb")`` on moto, refusing first what DynamoDB refuses and moto does not.

    ``inject`` (op -> callable(kw) returning an exception or a response, or None to pass) lets a fault
    case make moto answer as DynamoDB does under load (UnprocessedItems, TransactionConflict, throttling).
    """

    def __init__(self, client: Any, inject: dict[str, Callable[[dict], Any]] | None = None) -> None:
        self._client = client
        self._inject = dict(inject or {})
        self.exceptions = client.exceptions
        self.meta = client.meta

    def __getattr__(self, op: str) -> Any:
        real = getattr(self._client, op)
        if not callable(real):
            return real

        def call(**kw: Any) -> Any:
            for check in CHECKS.values():
                message = check(op, kw)
                if message:
                    raise ClientError({"Error": {"Code": "ValidationException", "Message": message},
                                       "ResponseMetadata": {"HTTPStatusCode": 400}}, op)
            if op in self._inject:
                answer = self._inject[op](kw)
                if isinstance(answer, Exception):
                    raise answer
                if answer is not None:
                    return answer
            return real(**kw)
        return call
