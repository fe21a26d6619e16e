"""pixivflow.local.provision() on moto: template.yaml's own table, queues and bucket (DESIGN §9, §12)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from pixivflow.local import provision
from pixivflow.local.template import load_template

REPO = Path(__file__).resolve().parents[2]
PREFIX = "pixivflow-local"
ENV_KEYS = {
    "LEDGER_TABLE",
    "EXECUTION_QUEUE_URL",
    "OUTBOX_QUEUE_URL",
    "EXECUTION_DLQ_URL",
    "OUTBOX_DLQ_URL",
    "SCHEDULER_DLQ_URL",
    "DEAD_LETTER_QUEUE_URLS",
    "ARTIFACT_BUCKET",
}


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE", "AWS_SESSION_TOKEN", "PIXIVFLOW_TEMPLATE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ap-northeast-1")
    with mock_aws():
        yield


def queue_attributes(url: str) -> dict[str, str]:
    return boto3.client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]


def test_provision_returns_the_handler_env_for_created_resources(aws: None) -> None:
    env = provision()

    assert set(env) == ENV_KEYS
    assert env["LEDGER_TABLE"] == f"{PREFIX}-ledgertable"
    assert env["ARTIFACT_BUCKET"] == f"{PREFIX}-artifactbucket"
    sqs = boto3.client("sqs")
    for key, logical in [("EXECUTION_QUEUE_URL", "executionqueue"), ("OUTBOX_QUEUE_URL", "outboxqueue"),
                         ("EXECUTION_DLQ_URL", "executiondlq"), ("OUTBOX_DLQ_URL", "outboxdlq"),
                         ("SCHEDULER_DLQ_URL", "schedulerdlq")]:
        assert sqs.get_queue_url(QueueName=f"{PREFIX}-{logical}")["QueueUrl"] == env[key]
    # the dead-letter queues the sweep's Health metric counts (the sweep's DEAD_LETTER_QUEUE_URLS)
    assert env["DEAD_LETTER_QUEUE_URLS"].split(",") == [env["EXECUTION_DLQ_URL"], env["OUTBOX_DLQ_URL"], env["SCHEDULER_DLQ_URL"]]
    assert boto3.client("dynamodb").describe_table(TableName=env["LEDGER_TABLE"])["Table"]["TableStatus"] == "ACTIVE"
    buckets = {b["Name"] for b in boto3.client("s3").list_buckets()["Buckets"]}
    assert env["ARTIFACT_BUCKET"] in buckets

    # every queue the template declares exists (the scheduler DLQ too), and nothing else
    declared = {lid.lower() for lid, r in load_template()["Resources"].items() if r["Type"] == "AWS::SQS::Queue"}
    existing = {url.rsplit("/", 1)[1] for url in sqs.list_queues()["QueueUrls"]}
    assert existing == {f"{PREFIX}-{lid}" for lid in declared}
    assert f"{PREFIX}-schedulerdlq" in existing


def test_ledger_table_has_the_templates_keys_gsis_and_ttl(aws: None) -> None:
    env = provision()
    ddb = boto3.client("dynamodb")
    table = ddb.describe_table(TableName=env["LEDGER_TABLE"])["Table"]

    assert table["KeySchema"] == [
        {"AttributeName": "pk", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ]
    assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    gsis = {g["IndexName"]: g for g in table["GlobalSecondaryIndexes"]}
    assert set(gsis) == {"ActiveSlots", "DueOutbox", "OpenCallbacks", "JobsByCreated", "FailedCells", "SlotsByCreated", "DeadRows"}
    assert {n: [k["AttributeName"] for k in g["KeySchema"]] for n, g in gsis.items()} == {
        "ActiveSlots": ["activePk", "activeSk"],
        "DueOutbox": ["duePk", "dueSk"],
        "OpenCallbacks": ["callbackPk", "callbackSk"],
        "JobsByCreated": ["jobsPk", "jobsSk"],
        "FailedCells": ["failPk", "failSk"],
        "SlotsByCreated": ["slotsPk", "slotsSk"],
        "DeadRows": ["deadPk", "deadSk"],
    }
    assert {n: g["Projection"]["ProjectionType"] for n, g in gsis.items() if g["Projection"]["ProjectionType"] != "KEYS_ONLY"} == {
        "FailedCells": "INCLUDE"}
    assert gsis["FailedCells"]["Projection"]["NonKeyAttributes"] == ["terminalReasonCode"]
    ttl = ddb.describe_time_to_live(TableName=env["LEDGER_TABLE"])["TimeToLiveDescription"]
    assert ttl == {"TimeToLiveStatus": "ENABLED", "AttributeName": "expiresAt"}

    # sparse: only an item carrying the GSI keys shows up in the index
    ddb.put_item(TableName=env["LEDGER_TABLE"], Item={
        "pk": {"S": "SLOT#a"}, "sk": {"S": "META"}, "activePk": {"S": "ACTIVE#3"}, "activeSk": {"S": "0001#a"}})
    ddb.put_item(TableName=env["LEDGER_TABLE"], Item={"pk": {"S": "SLOT#b"}, "sk": {"S": "META"}})
    hits = ddb.query(TableName=env["LEDGER_TABLE"], IndexName="ActiveSlots",
                     KeyConditionExpression="activePk = :p", ExpressionAttributeValues={":p": {"S": "ACTIVE#3"}})
    assert [i["pk"]["S"] for i in hits["Items"]] == ["SLOT#a"]


@pytest.mark.parametrize("queue_key,dlq_key", [("EXECUTION_QUEUE_URL", "EXECUTION_DLQ_URL"),
                                                ("OUTBOX_QUEUE_URL", "OUTBOX_DLQ_URL")])
def test_queue_redrives_to_its_dlq_after_five_receives(aws: None, queue_key: str, dlq_key: str) -> None:
    env = provision()
    attrs = queue_attributes(env[queue_key])
    dlq_arn = queue_attributes(env[dlq_key])["QueueArn"]

    redrive = json.loads(attrs["RedrivePolicy"])
    assert redrive["deadLetterTargetArn"] == dlq_arn
    assert int(redrive["maxReceiveCount"]) == 5
    assert attrs["VisibilityTimeout"] == "360"
    assert attrs["MessageRetentionPeriod"] == "345600"
    assert queue_attributes(env[dlq_key])["MessageRetentionPeriod"] == str(14 * 24 * 3600)


def test_a_message_received_five_times_lands_in_the_dlq(aws: None) -> None:
    env = provision()
    sqs = boto3.client("sqs")
    sqs.send_message(QueueUrl=env["EXECUTION_QUEUE_URL"], MessageBody='{"slotId": "s", "targetId": "t"}')
    for _ in range(5):
        (message,) = sqs.receive_message(QueueUrl=env["EXECUTION_QUEUE_URL"], VisibilityTimeout=0)["Messages"]
    assert "Messages" not in sqs.receive_message(QueueUrl=env["EXECUTION_QUEUE_URL"], VisibilityTimeout=0)
    dead = sqs.receive_message(QueueUrl=env["EXECUTION_DLQ_URL"])["Messages"]
    assert [m["Body"] for m in dead] == [message["Body"]]


def test_second_provision_is_idempotent_and_keeps_data(aws: None) -> None:
    first = provision()
    ddb, sqs = boto3.client("dynamodb"), boto3.client("sqs")
    ddb.put_item(TableName=first["LEDGER_TABLE"], Item={"pk": {"S": "SLOT#x"}, "sk": {"S": "META"}})
    sqs.send_message(QueueUrl=first["OUTBOX_QUEUE_URL"], MessageBody='{"kind": "delivery", "key": "k"}')
    boto3.client("s3").put_object(Bucket=first["ARTIFACT_BUCKET"], Key="a/b", Body=b"bytes")
    queues_before = sorted(sqs.list_queues()["QueueUrls"])

    second = provision()

    assert second == first
    assert sorted(sqs.list_queues()["QueueUrls"]) == queues_before
    assert ddb.list_tables()["TableNames"] == [first["LEDGER_TABLE"]]
    assert "Item" in ddb.get_item(TableName=first["LEDGER_TABLE"], Key={"pk": {"S": "SLOT#x"}, "sk": {"S": "META"}})
    assert queue_attributes(first["OUTBOX_QUEUE_URL"])["ApproximateNumberOfMessages"] == "1"
    assert boto3.client("s3").get_object(Bucket=first["ARTIFACT_BUCKET"], Key="a/b")["Body"].read() == b"bytes"
    assert json.loads(queue_attributes(second["EXECUTION_QUEUE_URL"])["RedrivePolicy"])["maxReceiveCount"] == 5


def test_prefix_names_separate_resources(aws: None) -> None:
    a = provision(prefix="stack-a")
    b = provision(prefix="stack-b")
    assert a["LEDGER_TABLE"] == "stack-a-ledgertable"
    assert b["LEDGER_TABLE"] == "stack-b-ledgertable"
    assert set(a.values()).isdisjoint(b.values())
    assert sorted(boto3.client("dynamodb").list_tables()["TableNames"]) == ["stack-a-ledgertable",
                                                                            "stack-b-ledgertable"]
    with pytest.raises(ValueError, match="prefix"):
        provision(prefix="Bad_Prefix")


def test_provision_follows_the_given_template(aws: None, tmp_path: Path) -> None:
    """DLQs are created first even when declared after the queue; parameters resolve to their defaults;
    properties a local endpoint does not take (KMS, SSE, PITR) are skipped; FIFO queues get `.fifo`."""
    path = tmp_path / "template.yaml"
    path.write_text(
        """
Parameters:
  Receives: {Type: Number, Default: 3}
Resources:
  ExecutionQueue:
    Type: AWS::SQS::Queue
    Properties:
      VisibilityTimeout: 120
      DelaySeconds: 2
      KmsMasterKeyId: !If [UseKms, !Ref Key, !Ref AWS::NoValue]
      MaximumMessageSize: !Ref AWS::NoValue
      RedrivePolicy:
        deadLetterTargetArn: !GetAtt ExecutionDLQ.Arn
        maxReceiveCount: !Ref Receives
  ExecutionDLQ:
    Type: AWS::SQS::Queue
    Properties:
      MessageRetentionPeriod: 60
  LedgerTable:
    Type: AWS::DynamoDB::Table
    Properties:
      BillingMode: PAY_PER_REQUEST
      AttributeDefinitions: [{AttributeName: id, AttributeType: S}]
      KeySchema: [{AttributeName: id, KeyType: HASH}]
      PointInTimeRecoverySpecification: {PointInTimeRecoveryEnabled: true}
      SSESpecification: !If [UseKms, {SSEEnabled: true}, !Ref AWS::NoValue]
  Events:
    Type: AWS::SQS::Queue
    Properties:
      FifoQueue: true
      ContentBasedDeduplication: true
""",
        encoding="utf-8",
    )
    env = provision(path, prefix="custom")

    assert env == {
        "LEDGER_TABLE": "custom-ledgertable",
        "EXECUTION_QUEUE_URL": boto3.client("sqs").get_queue_url(QueueName="custom-executionqueue")["QueueUrl"],
        "EXECUTION_DLQ_URL": boto3.client("sqs").get_queue_url(QueueName="custom-executiondlq")["QueueUrl"],
        "DEAD_LETTER_QUEUE_URLS": boto3.client("sqs").get_queue_url(QueueName="custom-executiondlq")["QueueUrl"],
    }
    attrs = queue_attributes(env["EXECUTION_QUEUE_URL"])
    assert attrs["VisibilityTimeout"] == "120"
    assert attrs["DelaySeconds"] == "2"
    redrive = json.loads(attrs["RedrivePolicy"])
    assert redrive["deadLetterTargetArn"] == queue_attributes(env["EXECUTION_DLQ_URL"])["QueueArn"]
    assert int(redrive["maxReceiveCount"]) == 3
    fifo = boto3.client("sqs").get_queue_url(QueueName="custom-events.fifo")["QueueUrl"]
    assert queue_attributes(fifo)["FifoQueue"] == "true"
    assert queue_attributes(fifo)["ContentBasedDeduplication"] == "true"
    table = boto3.client("dynamodb").describe_table(TableName="custom-ledgertable")["Table"]
    assert table["KeySchema"] == [{"AttributeName": "id", "KeyType": "HASH"}]
    assert not table.get("GlobalSecondaryIndexes")
