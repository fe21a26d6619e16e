"""Every request DynamoDB refuses, refused alike by moto and by the twin (issue 20, issue 21 item 3).

Each case is one request against the ledger table (``template.yaml``'s schema) that DynamoDB answers
with ``ValidationException``; it runs on moto and on the twin and must be refused on both with that code,
the message fragment given, and no change to the table. A case whose ``moto_lacks`` names a rule runs
on moto through ``strict_moto.StrictMoto``, which adds that one check (moto is laxer there); every
such rule is listed in README.md, and ``test_moto_alone_is_still_laxer`` proves moto still lacks it.
The twin is never wrapped: it must refuse every case on its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from pixivflow import aws
from pixivflow.local.provision import provision
from pixivflow.local.twins import TwinCloud
from pixivflow.local.twins.reserved import RESERVED_WORDS

from strict_moto import CHECKS, StrictMoto


def S(v: str) -> dict:
    return {"S": v}


def N(v: str) -> dict:
    return {"N": v}


def K(pk: str, sk: str = "META") -> dict:
    return {"pk": S(pk), "sk": S(sk)}


@dataclass(frozen=True)
class Case:
    id: str
    op: str
    request: Callable[[str], dict]
    fragment: str  # in the message on both backends ("" where moto's wording differs from DynamoDB's)
    moto_lacks: str | None = None  # the strict_moto rule that adds DynamoDB's check on moto


def _q(kce: str, values: dict, **extra: Any) -> Callable[[str], dict]:
    return lambda t: {"TableName": t, "KeyConditionExpression": kce, "ExpressionAttributeValues": values, **extra}


def _upd(expr: str, values: dict | None = None, **extra: Any) -> Callable[[str], dict]:
    return lambda t: {"TableName": t, "Key": K("u"), "UpdateExpression": expr, **extra,
                      **({"ExpressionAttributeValues": values} if values else {})}


def _put(item: dict) -> Callable[[str], dict]:
    return lambda t: {"TableName": t, "Item": item}


def _txn_update(expr: str, names: dict | None = None, values: dict | None = None) -> Callable[[str], dict]:
    body: dict[str, Any] = {"Key": K("u"), "UpdateExpression": expr}
    if names:
        body["ExpressionAttributeNames"] = names
    if values:
        body["ExpressionAttributeValues"] = values
    return lambda t: {"TransactItems": [{"Update": {"TableName": t, **body}},
                                        {"Put": {"TableName": t, "Item": {**K("t-other"), "x": S("1")}}}]}


LONG_PK, LONG_SK = "p" * 2049, "s" * 1025
CASES = [
    # -- key conditions ---------------------------------------------------------------------------
    Case("kce-non-key-attribute", "query", _q("pk = :p AND owner2 = :o", {":p": S("u"), ":o": S("x")}), ""),
    Case("kce-only-the-sort-key", "query", _q("sk = :s", {":s": S("META")}), "Query condition missed key schema element: pk"),
    Case("kce-index-key-on-the-table", "query", _q("activePk = :p", {":p": S("A")}), "Query condition missed key schema element"),
    Case("kce-partition-key-not-equality", "query", _q("pk < :p", {":p": S("u")}), "Query key condition not supported"),
    Case("kce-partition-key-begins-with", "query", _q("begins_with(pk, :p)", {":p": S("u")}), "Query key condition not supported"),
    Case("kce-or", "query", _q("pk = :p OR sk = :s", {":p": S("u"), ":s": S("META")}),
         "Invalid operator used in KeyConditionExpression: OR", "key-condition-operators"),
    Case("kce-not", "query", _q("pk = :p AND NOT sk = :s", {":p": S("u"), ":s": S("META")}),
         "Invalid operator used in KeyConditionExpression: NOT", "key-condition-operators"),
    Case("kce-not-equal", "query", _q("pk = :p AND sk <> :s", {":p": S("u"), ":s": S("META")}),
         "Invalid operator used in KeyConditionExpression: <>", "key-condition-operators"),
    Case("kce-in", "query", _q("pk = :p AND sk IN (:s)", {":p": S("u"), ":s": S("META")}),
         "Invalid operator used in KeyConditionExpression: IN", "key-condition-operators"),
    Case("kce-contains", "query", _q("pk = :p AND contains(sk, :s)", {":p": S("u"), ":s": S("M")}),
         "Invalid function name; function: contains"),
    Case("kce-attribute-exists", "query", _q("pk = :p AND attribute_exists(sk)", {":p": S("u")}),
         "Invalid function name; function: attribute_exists"),
    Case("kce-size", "query", _q("pk = :p AND size(sk) > :n", {":p": S("u"), ":n": N("1")}), "Invalid function name; function: size"),
    Case("kce-value-first", "query", _q(":p = pk", {":p": S("u")}), "Multiple attribute names used in one condition"),
    Case("kce-nested-path", "query", _q("pk.x = :p", {":p": S("u")}), ""),
    Case("kce-two-sort-key-conditions", "query", _q("pk = :p AND sk > :a AND sk < :b", {":p": S("u"), ":a": S("A"), ":b": S("Z")}),
         "KeyConditionExpressions must only contain one condition per key", "key-condition-one-per-key"),
    Case("kce-two-partition-key-conditions", "query", _q("pk = :p AND pk = :q", {":p": S("u"), ":q": S("v")}),
         "KeyConditionExpressions must only contain one condition per key", "key-condition-one-per-key"),
    Case("kce-value-of-another-type", "query", _q("pk = :p", {":p": N("1")}),
         "Condition parameter type does not match schema type", "key-condition-types"),
    Case("kce-begins-with-a-number", "query", _q("pk = :p AND begins_with(sk, :s)", {":p": S("u"), ":s": N("1")}),
         "operator or function: begins_with, operand type: N", "key-condition-types"),
    Case("kce-empty-partition-key", "query", _q("pk = :p", {":p": S("")}),
         "The AttributeValue for a key attribute cannot contain an empty string value. Key: pk"),
    Case("kce-partition-key-over-2048-bytes", "query", _q("pk = :p", {":p": S(LONG_PK)}),
         "Size of hashkey has exceeded the maximum size limit of2048 bytes", "key-sizes-on-reads"),
    Case("kce-sort-key-over-1024-bytes", "query", _q("pk = :p AND sk = :s", {":p": S("u"), ":s": S(LONG_SK)}),
         "Aggregated size of all range keys has exceeded the size limit of 1024 bytes", "key-sizes-on-reads"),
    Case("kce-index-partition-key-over-2048-bytes", "query", _q("activePk = :p", {":p": S(LONG_PK)}, IndexName="ActiveSlots"),
         "Size of hashkey has exceeded the maximum size limit of2048 bytes", "key-sizes-on-reads"),
    Case("start-key-outside-the-partition", "query", _q("pk = :p", {":p": S("u")}, ExclusiveStartKey=K("b")),
         "The provided starting key is outside query boundaries", "start-key-in-bounds"),
    # -- reserved words (the full list: test_every_reserved_word_is_refused_bare) ---------------------
    Case("reserved-word-in-update", "update_item", _upd("SET status = :v", {":v": S("x")}),
         "Invalid UpdateExpression: Attribute name is a reserved keyword; reserved keyword: status"),
    Case("reserved-word-in-condition", "put_item", lambda t: {"TableName": t, "Item": K("r"), "ConditionExpression": "attribute_not_exists(Data)"},
         "Invalid ConditionExpression: Attribute name is a reserved keyword; reserved keyword: Data"),
    Case("reserved-word-in-projection", "get_item", lambda t: {"TableName": t, "Key": K("u"), "ProjectionExpression": "ttl"},
         "ProjectionExpression: Attribute name is a reserved keyword; reserved keyword: ttl"),
    # -- keys ------------------------------------------------------------------------------------------
    Case("empty-sort-key-on-put", "put_item", _put({"pk": S("e"), "sk": S("")}), "An AttributeValue may not contain an empty string. Key: sk"),
    Case("empty-partition-key-on-put", "put_item", _put({"pk": S(""), "sk": S("e")}), "An AttributeValue may not contain an empty string. Key: pk"),
    Case("empty-index-partition-key", "put_item", _put({**K("e"), "activePk": S(""), "activeSk": S("1")}),
         "A value specified for a secondary index key is not supported"),
    Case("empty-index-sort-key", "put_item", _put({**K("e"), "duePk": S("DUE#0"), "dueSk": S("")}),
         "A value specified for a secondary index key is not supported"),
    Case("empty-index-key-by-update", "update_item", _upd("SET activePk = :v, activeSk = :w", {":v": S(""), ":w": S("1")}),
         "The update expression attempted to update a secondary index key to a value that is not supported"),
    Case("empty-sort-key-on-get", "get_item", lambda t: {"TableName": t, "Key": K("u", "")},
         "The AttributeValue for a key attribute cannot contain an empty string value. Key: sk"),
    Case("empty-sort-key-on-delete", "delete_item", lambda t: {"TableName": t, "Key": K("u", "")},
         "The AttributeValue for a key attribute cannot contain an empty string value. Key: sk", "empty-key-on-delete"),
    Case("key-of-another-type", "put_item", _put({"pk": N("1"), "sk": S("x")}), "Type mismatch for key pk expected: S actual: N"),
    Case("index-key-of-another-type", "put_item", _put({**K("e"), "activePk": N("1"), "activeSk": S("1")}),
         "Type mismatch for Index Key activePk Expected: S Actual: N", "index-key-types"),
    Case("key-with-an-extra-attribute", "get_item", lambda t: {"TableName": t, "Key": {**K("u"), "x": S("y")}},
         "The provided key element does not match the schema"),
    Case("partition-key-over-2048-bytes-on-put", "put_item", _put({"pk": S(LONG_PK), "sk": S("x")}),
         "Size of hashkey has exceeded the maximum size limit of2048 bytes"),
    Case("sort-key-over-1024-bytes-on-put", "put_item", _put({"pk": S("x"), "sk": S(LONG_SK)}),
         "Aggregated size of all range keys has exceeded the size limit of 1024 bytes"),
    Case("index-partition-key-over-2048-bytes", "put_item", _put({**K("g"), "callbackPk": S(LONG_PK), "callbackSk": S("1")}),
         "Size of hashkey has exceeded the maximum size limit of2048 bytes"),
    Case("index-sort-key-over-1024-bytes", "put_item", _put({**K("g"), "activePk": S("A"), "activeSk": S(LONG_SK)}),
         "Aggregated size of all range keys has exceeded the size limit of 1024 bytes"),
    Case("partition-key-over-2048-bytes-on-get", "get_item", lambda t: {"TableName": t, "Key": K(LONG_PK)},
         "Size of hashkey has exceeded the maximum size limit of2048 bytes", "key-sizes-on-reads"),
    Case("sort-key-over-1024-bytes-on-get", "get_item", lambda t: {"TableName": t, "Key": K("u", LONG_SK)},
         "Aggregated size of all range keys has exceeded the size limit of 1024 bytes", "key-sizes-on-reads"),
    Case("partition-key-over-2048-bytes-on-delete", "delete_item", lambda t: {"TableName": t, "Key": K(LONG_PK)},
         "Size of hashkey has exceeded the maximum size limit of2048 bytes", "key-sizes-on-reads"),
    Case("partition-key-over-2048-bytes-on-update", "update_item",
         lambda t: {"TableName": t, "Key": K(LONG_PK), "UpdateExpression": "SET x = :v", "ExpressionAttributeValues": {":v": S("1")}},
         "Size of hashkey has exceeded the maximum size limit of2048 bytes"),
    # an ExclusiveStartKey is held to the key sizes too; on the twin only Table.key_of checks it (rules.key
    # sees Key parameters, rules.item_keys whole items): mutant twin-key-size-on-reads
    Case("start-key-partition-key-over-2048-bytes-on-scan", "scan", lambda t: {"TableName": t, "ExclusiveStartKey": K(LONG_PK)},
         "Size of hashkey has exceeded the maximum size limit of2048 bytes", "key-sizes-on-reads"),
    Case("start-key-sort-key-over-1024-bytes-on-scan", "scan", lambda t: {"TableName": t, "ExclusiveStartKey": K("u", LONG_SK)},
         "Aggregated size of all range keys has exceeded the size limit of 1024 bytes", "key-sizes-on-reads"),
    Case("partition-key-over-2048-bytes-in-batch-get", "batch_get_item", lambda t: {"RequestItems": {t: {"Keys": [K(LONG_PK)]}}},
         "Size of hashkey has exceeded the maximum size limit of2048 bytes", "key-sizes-on-reads"),
    # -- numbers and sets ------------------------------------------------------------------------------
    Case("number-not-a-number", "put_item", _put({**K("n"), "x": N("abc")}), "The parameter cannot be converted to a numeric value: abc"),
    Case("number-empty", "put_item", _put({**K("n"), "x": N("")}), "The parameter cannot be converted to a numeric value"),
    Case("number-with-a-blank", "put_item", _put({**K("n"), "x": N(" 1")}), "The parameter cannot be converted to a numeric value"),
    Case("number-nan", "put_item", _put({**K("n"), "x": N("NaN")}), "The parameter cannot be converted to a numeric value: NaN"),
    Case("number-overflow", "put_item", _put({**K("n"), "x": N("1e200")}), "Number overflow"),
    Case("number-over-38-digits", "put_item", _put({**K("n"), "x": N("1" * 40)}),
         "Attempting to store more than 38 significant digits in a Number", "numbers"),
    Case("number-in-expression-values", "update_item", _upd("SET x = :v", {":v": N("abc")}),
         "The parameter cannot be converted to a numeric value: abc", "numbers"),
    Case("number-inside-a-list", "put_item", _put({**K("n"), "x": {"L": [N("abc")]}}),
         "The parameter cannot be converted to a numeric value: abc", "numbers"),
    Case("number-set-member", "put_item", _put({**K("n"), "x": {"NS": ["abc"]}}),
         "The parameter cannot be converted to a numeric value: abc", "numbers"),
    Case("empty-string-set", "put_item", _put({**K("n"), "x": {"SS": []}}), "set  may not be empty"),
    Case("string-set-with-duplicates", "put_item", _put({**K("n"), "x": {"SS": ["a", "a"]}}),
         "Input collection [a, a] contains duplicates", "set-duplicates"),
    # -- batches ---------------------------------------------------------------------------------------
    Case("batch-write-one-key-twice", "batch_write_item",
         lambda t: {"RequestItems": {t: [{"PutRequest": {"Item": K("b")}}, {"PutRequest": {"Item": {**K("b"), "x": S("2")}}}]}},
         "Provided list of item keys contains duplicates"),
    Case("batch-write-put-and-delete-one-key", "batch_write_item",
         lambda t: {"RequestItems": {t: [{"PutRequest": {"Item": {**K("b2"), "x": S("1")}}}, {"DeleteRequest": {"Key": K("b2")}}]}},
         "Provided list of item keys contains duplicates", "batch-write-one-request-per-key"),
    Case("batch-get-one-key-twice", "batch_get_item", lambda t: {"RequestItems": {t: {"Keys": [K("b"), K("b")]}}},
         "Provided list of item keys contains duplicates"),
    # -- key attributes in updates -----------------------------------------------------------------------
    Case("update-sets-the-partition-key", "update_item", _upd("SET pk = :v", {":v": S("x")}), "Cannot update attribute pk"),
    Case("update-paths-overlap", "update_item", _upd("SET m = :v, m.a = :w", {":v": {"M": {}}, ":w": S("x")}),
         "Two document paths overlap"),
    Case("update-paths-overlap-inside", "update_item", _upd("SET m.a.b = :v REMOVE m.a", {":v": S("x")}),
         "Two document paths overlap"),
    Case("update-removes-the-sort-key", "update_item", _upd("REMOVE sk"), "Cannot update attribute sk"),
    Case("update-adds-to-the-sort-key", "update_item", _upd("ADD sk :v", {":v": S("x")}), "Cannot update attribute sk"),
    Case("transaction-sets-the-partition-key", "transact_write_items", _txn_update("SET #p = :v", {"#p": "pk"}, {":v": S("x")}),
         "Cannot update attribute pk"),
    Case("transaction-removes-the-sort-key", "transact_write_items", _txn_update("REMOVE sk"), "Cannot update attribute sk"),
    # -- sizes -------------------------------------------------------------------------------------------
    Case("item-over-400-kb", "put_item", _put({**K("big"), "x": S("a" * (400 * 1024))}), "Item size has exceeded the maximum allowed size"),
    Case("item-over-400-kb-by-update", "update_item", _upd("SET x = :v", {":v": S("a" * (400 * 1024))}),
         "Item size to update has exceeded the maximum allowed size"),
    Case("transaction-over-4-mb", "transact_write_items",
         lambda t: {"TransactItems": [{"Put": {"TableName": t, "Item": {**K("t", f"s{i}"), "x": S("a" * 390_000)}}} for i in range(11)]},
         "Transaction request cannot be larger than 4 MB", "transaction-4mb"),
    Case("transaction-over-100-actions", "transact_write_items",
         lambda t: {"TransactItems": [{"Put": {"TableName": t, "Item": K("t", f"s{i}")}} for i in range(101)]}, ""),
    Case("transaction-two-actions-on-one-item", "transact_write_items",
         lambda t: {"TransactItems": [{"Put": {"TableName": t, "Item": K("t")}}, {"Delete": {"TableName": t, "Key": K("t")}}]},
         "Transaction request cannot include multiple operations on one item"),
    # -- placeholders --------------------------------------------------------------------------------------
    Case("names-without-an-expression", "get_item", lambda t: {"TableName": t, "Key": K("u"), "ExpressionAttributeNames": {"#a": "a"}},
         "ExpressionAttributeNames can only be specified when using expressions"),
]


def _seed(ddb: Any, table: str) -> None:
    ddb.put_item(TableName=table, Item={**K("u"), "x": S("0"), "n": N("1")})
    ddb.put_item(TableName=table, Item={**K("b"), "x": S("1")})


def _everything(ddb: Any, table: str) -> list:
    return sorted(ddb.scan(TableName=table, ConsistentRead=True)["Items"], key=repr)


@pytest.fixture(params=["moto", "twin"])
def backend(request):
    with (mock_aws() if request.param == "moto" else TwinCloud()):
        env = provision(prefix="refusals")
        client = aws.client("dynamodb")
        table = env["LEDGER_TABLE"]
        _seed(client, table)
        yield request.param, (StrictMoto(client) if request.param == "moto" else client), client, table


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_dynamodb_refuses_it_and_so_do_moto_and_the_twin(backend, case):
    name, ddb, _raw, table = backend
    before = _everything(ddb, table)
    with pytest.raises(ClientError) as caught:
        getattr(ddb, case.op)(**case.request(table))
    error = caught.value.response["Error"]
    assert error["Code"] == "ValidationException", (name, error)
    assert case.fragment in error["Message"], (name, error)
    assert _everything(ddb, table) == before  # nothing changed


WRAPPED = [c for c in CASES if c.moto_lacks]


@pytest.mark.parametrize("case", WRAPPED, ids=[c.id for c in WRAPPED])
def test_moto_alone_is_still_laxer(case):
    """Each strict_moto check is still needed: raw moto does not answer this case with ValidationException."""
    with mock_aws():
        table = provision(prefix="lax")["LEDGER_TABLE"]
        ddb = aws.client("dynamodb")
        _seed(ddb, table)
        try:
            getattr(ddb, case.op)(**case.request(table))
        except ClientError as exc:
            assert exc.response["Error"]["Code"] != "ValidationException", exc.response["Error"]
        except Exception:  # noqa: BLE001 - moto crashing (AssertionError on OR/NOT/<>) is laxer too
            pass


def test_every_strict_moto_check_is_exercised_by_a_case():
    assert {c.moto_lacks for c in WRAPPED} == set(CHECKS)


@pytest.mark.size("large")  # every reserved word, bare and as a placeholder (tests/README.md, test sizes)
def test_every_reserved_word_is_refused_bare_and_accepted_as_a_placeholder(backend):
    name, ddb, _raw, table = backend
    accepted = []
    for word in sorted(RESERVED_WORDS):
        try:
            ddb.update_item(TableName=table, Key=K("u"), UpdateExpression=f"SET {word.lower()} = :v",
                            ExpressionAttributeValues={":v": S("x")})
            accepted.append(word)
        except ClientError as exc:
            assert exc.response["Error"]["Code"] == "ValidationException"
            assert f"reserved keyword: {word.lower()}" in exc.response["Error"]["Message"]
    assert accepted == [], (name, accepted)
    assert len(RESERVED_WORDS) == 573  # the Developer Guide's list
    # the same word through a placeholder, and a word that is not reserved, are fine
    ddb.update_item(TableName=table, Key=K("u"), UpdateExpression="SET #s = :v, colour = :v",
                    ExpressionAttributeNames={"#s": "status"}, ExpressionAttributeValues={":v": S("x")})
    got = ddb.get_item(TableName=table, Key=K("u"), ConsistentRead=True)["Item"]
    assert got["status"] == S("x") and got["colour"] == S("x")


def test_a_38_digit_number_and_the_edges_of_the_range_are_stored(backend):
    _, ddb, _raw, table = backend
    for n in ("1" * 38, "9.9999999999999999999999999999999999999E+125", "1E-130", "-1E-130", "+1", ".5", "0.000"):
        ddb.put_item(TableName=table, Item={**K("num"), "x": N(n)})
        assert "x" in ddb.get_item(TableName=table, Key=K("num"), ConsistentRead=True)["Item"]


# -- paging: 1 MB pages and a start key whose item is gone ------------------------------------------------


def test_a_page_reads_at_most_1_mb_and_paging_returns_every_item_once(backend):
    _, ddb, _raw, table = backend
    for i in range(7):  # 300 KB each: three fit in 1 MB (moto cuts at 1,000,000 bytes, DynamoDB at 1 MiB: both say 3)
        ddb.put_item(TableName=table, Item={**K("big", f"s{i}"), "x": S("a" * 300_000)})
    for op, kw in (("query", {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": S("big")}}),
                   ("scan", {"FilterExpression": "pk = :p", "ExpressionAttributeValues": {":p": S("big")}})):
        seen, pages, start = [], [], None
        while True:
            page = getattr(ddb, op)(TableName=table, ConsistentRead=True, **kw, **({"ExclusiveStartKey": start} if start else {}))
            pages.append(len(page["Items"]))  # only the 300 KB items match: a page holds at most three of them
            seen += [i["sk"]["S"] for i in page["Items"]]
            start = page.get("LastEvaluatedKey")
            if not start:
                break
        assert sorted(seen) == [f"s{i}" for i in range(7)], op
        assert max(pages) == 3 and len(pages) >= 3, (op, pages)


@pytest.mark.parametrize("forward", [True, False])
def test_a_start_key_whose_item_was_deleted_continues_after_its_place(backend, forward):
    _, ddb, _raw, table = backend
    for i in range(5):
        ddb.put_item(TableName=table, Item=K("q", f"s{i}"))
    kw = {"TableName": table, "KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": S("q")},
          "ScanIndexForward": forward, "ConsistentRead": True}
    first = ddb.query(**kw, Limit=2)
    start = first["LastEvaluatedKey"]
    ddb.delete_item(TableName=table, Key=start)
    rest = ddb.query(**kw, ExclusiveStartKey=start)
    expected = ["s2", "s3", "s4"] if forward else ["s2", "s1", "s0"]
    assert [i["sk"]["S"] for i in first["Items"]] == (["s0", "s1"] if forward else ["s4", "s3"])
    assert [i["sk"]["S"] for i in rest["Items"]] == expected
    # a start key that never existed sorts where it would be
    between = ddb.query(**kw, ExclusiveStartKey=K("q", "s25"))
    assert [i["sk"]["S"] for i in between["Items"]] == (["s3", "s4"] if forward else ["s2", "s1", "s0"])


def test_a_scan_continues_after_a_deleted_start_key_without_repeating(backend):
    _, ddb, _raw, table = backend
    for i in range(6):
        ddb.put_item(TableName=table, Item=K(f"scan{i}"))
    first = ddb.scan(TableName=table, Limit=3, ConsistentRead=True)
    ddb.delete_item(TableName=table, Key=first["LastEvaluatedKey"])
    rest = ddb.scan(TableName=table, ExclusiveStartKey=first["LastEvaluatedKey"], ConsistentRead=True)
    first_keys = [i["pk"]["S"] for i in first["Items"]]
    rest_keys = [i["pk"]["S"] for i in rest["Items"]]
    assert not set(first_keys) & set(rest_keys)
    assert len(first_keys) + len(rest_keys) == 2 + 6  # the two seeded items, six new, none lost or repeated
