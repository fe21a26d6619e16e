"""The twins' contract: the DynamoDB and SQS semantics the engine relies on, checked against moto and
against the in-memory twins (``pixivflow.local.twins``) by the very same tests (DESIGN §10).

If a twin drifts from the service (as moto models it), one of these fails on one backend only. The
ledger adapter itself runs on both backends in tests/integration/ledger/ (one file per role of ports.ledger).
"""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from pixivflow import aws
from pixivflow.local.provision import provision
from pixivflow.local.twins import TwinCloud


@pytest.fixture(params=["moto", "twin"])
def cloud(request):
    with (mock_aws() if request.param == "moto" else TwinCloud()):
        env = provision(prefix="contract")
        yield request.param, env, aws.client("dynamodb"), aws.client("sqs")


def _code(exc: ClientError) -> str:
    return exc.response["Error"]["Code"]


def _s(v: str) -> dict:
    return {"S": v}


def _put(ddb, table, pk, sk="META", **attrs):
    item = {"pk": _s(pk), "sk": _s(sk), **attrs}
    ddb.put_item(TableName=table, Item=item)
    return item


def _get(ddb, table, pk, sk="META"):
    return ddb.get_item(TableName=table, Key={"pk": _s(pk), "sk": _s(sk)}, ConsistentRead=True).get("Item")


# -- DynamoDB ---------------------------------------------------------------------------------------


def test_insert_if_absent_refuses_the_second_writer_and_returns_the_stored_item(cloud):
    _, env, ddb, _ = cloud
    table = env["LEDGER_TABLE"]
    first = {"pk": _s("SLOT#a"), "sk": _s("META"), "owner": _s("first")}
    ddb.put_item(TableName=table, Item=first, ConditionExpression="attribute_not_exists(pk)")
    with pytest.raises(ClientError) as caught:
        ddb.put_item(TableName=table, Item={**first, "owner": _s("second")}, ConditionExpression="attribute_not_exists(pk)",
                     ReturnValuesOnConditionCheckFailure="ALL_OLD")
    assert _code(caught.value) == "ConditionalCheckFailedException"
    assert caught.value.response["Item"]["owner"] == _s("first")
    assert _get(ddb, table, "SLOT#a")["owner"] == _s("first")


def test_a_conditional_update_of_a_missing_item_creates_nothing(cloud):
    _, env, ddb, _ = cloud
    table = env["LEDGER_TABLE"]
    with pytest.raises(ClientError) as caught:
        ddb.update_item(TableName=table, Key={"pk": _s("SLOT#none"), "sk": _s("META")}, UpdateExpression="SET #s = :v",
                        ConditionExpression="attribute_exists(pk)", ExpressionAttributeNames={"#s": "status"},
                        ExpressionAttributeValues={":v": _s("running")})
    assert _code(caught.value) == "ConditionalCheckFailedException"
    assert _get(ddb, table, "SLOT#none") is None


def test_update_reads_every_operand_before_writing_and_returns_the_new_item(cloud):
    _, env, ddb, _ = cloud
    table = env["LEDGER_TABLE"]
    _put(ddb, table, "SLOT#u", a=_s("A"), b=_s("B"), n={"N": "2"}, gone=_s("x"))
    out = ddb.update_item(
        TableName=table, Key={"pk": _s("SLOT#u"), "sk": _s("META")},
        UpdateExpression="SET #a = #b, #b = #a, #first = if_not_exists(#first, :t), #kept = if_not_exists(#a, :t) "
                         "REMOVE #gone ADD #n :one, #fresh :one",
        ConditionExpression="attribute_exists(pk) AND #n IN (:one, :two)",
        ExpressionAttributeNames={"#a": "a", "#b": "b", "#first": "first", "#kept": "kept", "#gone": "gone",
                                  "#n": "n", "#fresh": "fresh"},
        ExpressionAttributeValues={":t": _s("T"), ":one": {"N": "1"}, ":two": {"N": "2"}},
        ReturnValues="ALL_NEW",
    )["Attributes"]
    assert (out["a"], out["b"], out["first"], out["kept"]) == (_s("B"), _s("A"), _s("T"), _s("A"))
    assert out["n"] == {"N": "3"} and out["fresh"] == {"N": "1"} and "gone" not in out


@pytest.mark.parametrize(("expr", "expected"), [
    ("#missing = :v", False), ("#missing < :v", False), ("#here = :v", True), ("#here <> :v", False),
    ("#here = :other", False), ("attribute_not_exists(#missing) OR #missing <= :v", True),
    ("begins_with(#here, :prefix)", True), ("NOT (#here = :v)", False), ("#num BETWEEN :lo AND :hi", True),
])
def test_conditions_on_present_and_missing_attributes(cloud, expr, expected):
    _, env, ddb, _ = cloud
    table = env["LEDGER_TABLE"]
    _put(ddb, table, "SLOT#c", here=_s("value"), num={"N": "5"})
    values = {":v": _s("value"), ":other": _s("other"), ":prefix": _s("val"), ":lo": {"N": "1"}, ":hi": {"N": "10"}}
    names = {"#missing": "missing", "#here": "here", "#num": "num"}
    import re

    used_v = set(re.findall(r":\w+", expr))
    used_n = set(re.findall(r"#\w+", expr))
    try:
        ddb.update_item(TableName=table, Key={"pk": _s("SLOT#c"), "sk": _s("META")}, UpdateExpression="SET #flag = :flag",
                        ConditionExpression=expr,
                        ExpressionAttributeNames={k: v for k, v in names.items() if k in used_n} | {"#flag": "flag"},
                        ExpressionAttributeValues={k: v for k, v in values.items() if k in used_v} | {":flag": {"BOOL": True}})
        passed = True
    except ClientError as exc:
        assert _code(exc) == "ConditionalCheckFailedException"
        passed = False
    assert passed is expected
    assert ("flag" in _get(ddb, table, "SLOT#c")) is expected


def test_a_transaction_is_all_or_nothing_and_says_which_action_refused(cloud):
    _, env, ddb, _ = cloud
    table = env["LEDGER_TABLE"]
    _put(ddb, table, "SLOT#t", "CELL#a", status=_s("pending"))
    _put(ddb, table, "SLOT#t", "CELL#b", status=_s("running"))
    actions = [
        {"Update": {"TableName": table, "Key": {"pk": _s("SLOT#t"), "sk": _s("CELL#a")}, "UpdateExpression": "SET #s = :f",
                    "ConditionExpression": "#s = :p", "ExpressionAttributeNames": {"#s": "status"},
                    "ExpressionAttributeValues": {":f": _s("failed"), ":p": _s("pending")}}},
        {"ConditionCheck": {"TableName": table, "Key": {"pk": _s("SLOT#t"), "sk": _s("CELL#b")},
                            "ConditionExpression": "#s = :p", "ExpressionAttributeNames": {"#s": "status"},
                            "ExpressionAttributeValues": {":p": _s("pending")}}},
        {"Put": {"TableName": table, "Item": {"pk": _s("SLOT#t"), "sk": _s("META"), "status": _s("failed")}}},
    ]
    with pytest.raises(ClientError) as caught:
        ddb.transact_write_items(TransactItems=actions)
    assert _code(caught.value) == "TransactionCanceledException"
    assert [r["Code"] for r in caught.value.response["CancellationReasons"]] == ["None", "ConditionalCheckFailed", "None"]
    assert _get(ddb, table, "SLOT#t", "CELL#a")["status"] == _s("pending")  # nothing happened
    assert _get(ddb, table, "SLOT#t") is None
    actions[1]["ConditionCheck"]["ExpressionAttributeValues"] = {":p": _s("running")}
    ddb.transact_write_items(TransactItems=actions)
    assert _get(ddb, table, "SLOT#t", "CELL#a")["status"] == _s("failed")
    assert _get(ddb, table, "SLOT#t")["status"] == _s("failed")


def test_a_transaction_takes_one_action_per_item_and_at_most_100(cloud):
    _, env, ddb, _ = cloud
    table = env["LEDGER_TABLE"]
    twice = [{"Put": {"TableName": table, "Item": {"pk": _s("SLOT#x"), "sk": _s("META"), "v": _s(str(i))}}} for i in range(2)]
    with pytest.raises(ClientError) as caught:
        ddb.transact_write_items(TransactItems=twice)
    assert _code(caught.value) == "ValidationException"
    many = [{"Put": {"TableName": table, "Item": {"pk": _s("SLOT#y"), "sk": _s(f"CELL#{i}")}}} for i in range(101)]
    with pytest.raises(ClientError) as caught:
        ddb.transact_write_items(TransactItems=many)
    assert _code(caught.value) == "ValidationException"
    assert _get(ddb, table, "SLOT#y", "CELL#0") is None
    ddb.transact_write_items(TransactItems=many[:100])
    assert _get(ddb, table, "SLOT#y", "CELL#99") is not None


def _index_keys(ddb, table, index, pk_attr, value):
    resp = ddb.query(TableName=table, IndexName=index, KeyConditionExpression="#p = :p",
                     ExpressionAttributeNames={"#p": pk_attr}, ExpressionAttributeValues={":p": _s(value)})
    return [(i["pk"]["S"], i["sk"]["S"]) for i in resp["Items"]]


def test_sparse_index_holds_only_items_carrying_its_keys_and_drops_them_when_removed(cloud):
    _, env, ddb, _ = cloud
    table = env["LEDGER_TABLE"]
    _put(ddb, table, "SLOT#1", activePk=_s("ACTIVE#00"), activeSk=_s("0000000000001#1"))
    _put(ddb, table, "SLOT#2", status=_s("success"))  # no index keys: not in the index
    _put(ddb, table, "SLOT#3", activePk=_s("ACTIVE#00"), activeSk=_s("0000000000003#3"))
    assert _index_keys(ddb, table, "ActiveSlots", "activePk", "ACTIVE#00") == [("SLOT#1", "META"), ("SLOT#3", "META")]
    ddb.update_item(TableName=table, Key={"pk": _s("SLOT#1"), "sk": _s("META")}, UpdateExpression="REMOVE activePk, activeSk")
    assert _index_keys(ddb, table, "ActiveSlots", "activePk", "ACTIVE#00") == [("SLOT#3", "META")]
    resp = ddb.query(TableName=table, IndexName="ActiveSlots", KeyConditionExpression="activePk = :p",
                     ExpressionAttributeValues={":p": _s("ACTIVE#00")})
    assert set(resp["Items"][0]) == {"pk", "sk", "activePk", "activeSk"}  # KEYS_ONLY projection


def test_query_pages_with_limit_and_last_evaluated_key_in_sort_order(cloud):
    _, env, ddb, _ = cloud
    table = env["LEDGER_TABLE"]
    for sk in ("CELL#c", "CELL#a", "DLV#x", "CELL#b", "META"):
        _put(ddb, table, "SLOT#q", sk)
    seen, start = [], None
    while True:
        kwargs = {"ExclusiveStartKey": start} if start else {}
        resp = ddb.query(TableName=table, KeyConditionExpression="pk = :p AND begins_with(sk, :c)", Limit=2,
                         ExpressionAttributeValues={":p": _s("SLOT#q"), ":c": _s("CELL#")}, ConsistentRead=True, **kwargs)
        seen += [i["sk"]["S"] for i in resp["Items"]]
        start = resp.get("LastEvaluatedKey")
        if not start:
            break
    assert seen == ["CELL#a", "CELL#b", "CELL#c"]


def test_placeholders_must_be_defined_and_used(cloud):
    _, env, ddb, _ = cloud
    table = env["LEDGER_TABLE"]
    _put(ddb, table, "SLOT#p")
    for kwargs in ({"ExpressionAttributeValues": {":v": _s("x"), ":unused": _s("y")}},
                   {"ExpressionAttributeValues": {}}):
        with pytest.raises(ClientError) as caught:
            ddb.update_item(TableName=table, Key={"pk": _s("SLOT#p"), "sk": _s("META")}, UpdateExpression="SET a = :v", **kwargs)
        assert _code(caught.value) == "ValidationException"


def test_batch_get_returns_what_exists(cloud):
    _, env, ddb, _ = cloud
    table = env["LEDGER_TABLE"]
    _put(ddb, table, "WORK#r#illustration#1", "OWNER", ownerKey=_s("a"))
    keys = [{"pk": _s(f"WORK#r#illustration#{i}"), "sk": _s("OWNER")} for i in (1, 2)]
    resp = ddb.batch_get_item(RequestItems={table: {"Keys": keys, "ConsistentRead": True}})
    assert [i["ownerKey"]["S"] for i in resp["Responses"][table]] == ["a"]


# -- SQS --------------------------------------------------------------------------------------------


def test_a_received_message_is_invisible_until_its_timeout_and_deleted_by_its_newest_receipt(cloud):
    _, env, _, sqs = cloud
    url = env["EXECUTION_QUEUE_URL"]
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"slotId": "s", "targetId": "t"}))
    first = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=30)["Messages"]
    assert len(first) == 1
    assert sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []) == []  # in flight
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=first[0]["ReceiptHandle"], VisibilityTimeout=0)
    second = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0,
                                 AttributeNames=["ApproximateReceiveCount"])["Messages"]
    assert second[0]["Attributes"]["ApproximateReceiveCount"] == "2"
    sqs.delete_message(QueueUrl=url, ReceiptHandle=second[0]["ReceiptHandle"])
    assert sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []) == []


def test_a_message_received_max_receive_count_times_moves_to_the_dlq(cloud):
    _, env, _, sqs = cloud
    url, dlq = env["OUTBOX_QUEUE_URL"], env["OUTBOX_DLQ_URL"]
    policy = json.loads(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["RedrivePolicy"])["Attributes"]["RedrivePolicy"])
    assert policy["maxReceiveCount"] in (5, "5")
    sqs.send_message(QueueUrl=url, MessageBody="poison")
    receives = 0
    for _ in range(10):
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, VisibilityTimeout=0).get("Messages", [])
        if not got:
            break
        receives += 1
    assert receives == 5
    parked = sqs.receive_message(QueueUrl=dlq, MaxNumberOfMessages=10).get("Messages", [])
    assert [m["Body"] for m in parked] == ["poison"]


def test_a_changed_redrive_policy_applies_to_the_next_receive(cloud):
    """SetQueueAttributes takes effect at once: the twin's parsed RedrivePolicy (kept between receives,
    for speed) is the policy as it now stands, never the one it first read."""
    _, env, _, sqs = cloud
    url, dlq = env["OUTBOX_QUEUE_URL"], env["OUTBOX_DLQ_URL"]
    policy = json.loads(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["RedrivePolicy"])["Attributes"]["RedrivePolicy"])
    sqs.send_message(QueueUrl=url, MessageBody="poison")
    assert sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, VisibilityTimeout=0).get("Messages")  # 1 of 5 receives
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": json.dumps({**policy, "maxReceiveCount": 1})})
    assert sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, VisibilityTimeout=0).get("Messages", []) == []
    parked = sqs.receive_message(QueueUrl=dlq, MaxNumberOfMessages=10).get("Messages", [])
    assert [m["Body"] for m in parked] == ["poison"]


def test_send_batch_takes_at_most_ten_entries(cloud):
    _, env, _, sqs = cloud
    url = env["EXECUTION_QUEUE_URL"]
    entries = [{"Id": str(i), "MessageBody": "{}"} for i in range(11)]
    with pytest.raises(ClientError):
        sqs.send_message_batch(QueueUrl=url, Entries=entries)
    resp = sqs.send_message_batch(QueueUrl=url, Entries=entries[:10])
    assert len(resp["Successful"]) == 10 and not resp.get("Failed")


# -- what only the twin can do (moto has no such knob) -----------------------------------------------


def test_the_twin_index_lags_on_purpose_and_in_write_order():
    now = [0]
    with TwinCloud(now_ms=lambda: now[0], index_lag_ms=1_000):
        env = provision(prefix="lag")
        ddb = aws.client("dynamodb")
        table = env["LEDGER_TABLE"]
        _put(ddb, table, "SLOT#l", activePk=_s("ACTIVE#01"), activeSk=_s("1#l"))
        assert _index_keys(ddb, table, "ActiveSlots", "activePk", "ACTIVE#01") == []  # not seen yet
        assert _get(ddb, table, "SLOT#l") is not None  # the table itself is consistent
        now[0] = 500
        ddb.update_item(TableName=table, Key={"pk": _s("SLOT#l"), "sk": _s("META")}, UpdateExpression="REMOVE activePk, activeSk")
        now[0] = 1_000
        assert _index_keys(ddb, table, "ActiveSlots", "activePk", "ACTIVE#01") == [("SLOT#l", "META")]  # the stale view
        now[0] = 1_500
        assert _index_keys(ddb, table, "ActiveSlots", "activePk", "ACTIVE#01") == []
        with pytest.raises(ClientError) as caught:
            ddb.query(TableName=table, IndexName="ActiveSlots", KeyConditionExpression="activePk = :p", ConsistentRead=True,
                      ExpressionAttributeValues={":p": _s("ACTIVE#01")})
        assert _code(caught.value) == "ValidationException"


def test_an_expression_attribute_name_no_expression_uses_is_refused(cloud):
    _, env, ddb, _ = cloud
    table = env["LEDGER_TABLE"]
    _put(ddb, table, "SLOT#n")
    calls = [
        lambda: ddb.update_item(TableName=table, Key={"pk": _s("SLOT#n"), "sk": _s("META")}, UpdateExpression="SET a = :v",
                                ExpressionAttributeNames={"#unused": "x"}, ExpressionAttributeValues={":v": _s("1")}),
        lambda: ddb.put_item(TableName=table, Item={"pk": _s("SLOT#n2"), "sk": _s("META")},
                             ConditionExpression="attribute_not_exists(pk)", ExpressionAttributeNames={"#unused": "x"}),
        lambda: ddb.query(TableName=table, KeyConditionExpression="pk = :p", ExpressionAttributeNames={"#unused": "x"},
                          ExpressionAttributeValues={":p": _s("SLOT#n")}),
    ]
    for call in calls:
        with pytest.raises(ClientError) as caught:
            call()
        assert _code(caught.value) == "ValidationException"
    assert _get(ddb, table, "SLOT#n2") is None
