"""DynamoDB's weaker guarantees, modelled by the twin on request (``TwinFaults``) and checked here (issue 20).

Answers under load (``UnprocessedItems`` / ``UnprocessedKeys``, ``TransactionConflict``, throttling) are
shapes a caller must handle: each case runs on the twin with the seeded model switched on, and on moto
through ``strict_moto.StrictMoto`` injecting the same answer (moto never gives it), so the caller-side
assertion is the same on both. The models in time (stale eventually consistent reads, TTL deletion,
per-item index lag) have no moto counterpart to inject into: on moto the case checks the half that is
the same everywhere (strongly consistent reads are current; an expired item stays readable until
something deletes it), on the twin the whole model, deterministically from the seed.
"""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from strict_moto import StrictMoto

from pixivflow import aws
from pixivflow.local.provision import provision
from pixivflow.local.twins import TwinCloud, TwinFaults


def S(v: str) -> dict:
    return {"S": v}


def K(pk: str, sk: str = "META") -> dict:
    return {"pk": S(pk), "sk": S(sk)}


def _error(code: str, op: str, **extra) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "injected as DynamoDB answers under load"},
                        "ResponseMetadata": {"HTTPStatusCode": 400}, **extra}, op)


class Clock:
    def __init__(self) -> None:
        self.ms = 1_800_000_000_000

    def __call__(self) -> int:
        return self.ms


def _backend(name: str, faults: TwinFaults, inject_for_moto, clock: Clock | None = None):
    """(client, table) inside the active mock: the twin with ``faults``, or moto with the injected answers."""
    if name == "twin":
        cloud = TwinCloud(faults=faults, now_ms=clock).install()
        env = provision(prefix="faults")
        return cloud, aws.client("dynamodb"), env["LEDGER_TABLE"]
    mock = mock_aws()
    mock.start()
    env = provision(prefix="faults")
    raw = aws.client("dynamodb")
    return mock, StrictMoto(raw, inject_for_moto(raw)), env["LEDGER_TABLE"]


@pytest.fixture
def stack():
    opened = []
    yield opened
    for thing in reversed(opened):
        (thing.uninstall if isinstance(thing, TwinCloud) else thing.stop)()


def _leave_last_unprocessed(raw, op: str):
    """moto answering as DynamoDB under load: all but the last request item processed, the last one returned."""
    def answer(kw):
        (table, requests), = kw["RequestItems"].items()
        if op == "batch_write_item":
            if len(requests) < 2:
                return None
            raw.batch_write_item(RequestItems={table: requests[:-1]})
            return {"UnprocessedItems": {table: requests[-1:]}}
        keys = requests["Keys"]
        if len(keys) < 2:
            return None
        got = raw.batch_get_item(RequestItems={table: {**requests, "Keys": keys[:-1]}})
        return {"Responses": got["Responses"], "UnprocessedKeys": {table: {**requests, "Keys": keys[-1:]}}}
    return answer


@pytest.mark.parametrize("name", ["moto", "twin"])
def test_a_batch_write_retried_with_its_unprocessed_items_stores_every_item_once(stack, name):
    mock, ddb, table = _backend(name, TwinFaults(seed=3, unprocessed=0.5),
                                lambda raw: {"batch_write_item": _leave_last_unprocessed(raw, "batch_write_item")})
    stack.append(mock)
    pending = {table: [{"PutRequest": {"Item": {**K(f"bw{i}"), "n": {"N": str(i)}}}} for i in range(25)]}
    rounds = 0
    while pending:
        pending = ddb.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
        rounds += 1
        assert rounds < 50
    assert rounds > 1  # some items came back unprocessed at least once
    stored = ddb.scan(TableName=table, ConsistentRead=True)["Items"]
    assert sorted(int(i["n"]["N"]) for i in stored) == list(range(25))


@pytest.mark.parametrize("name", ["moto", "twin"])
def test_a_batch_get_retried_with_its_unprocessed_keys_reads_every_item(stack, name):
    mock, ddb, table = _backend(name, TwinFaults(seed=5, unprocessed=0.5),
                                lambda raw: {"batch_get_item": _leave_last_unprocessed(raw, "batch_get_item")})
    stack.append(mock)
    for i in range(10):
        ddb.put_item(TableName=table, Item=K(f"bg{i}"))
    pending = {table: {"Keys": [K(f"bg{i}") for i in range(10)], "ConsistentRead": True}}
    found, rounds = [], 0
    while pending:
        resp = ddb.batch_get_item(RequestItems=pending)
        found += [i["pk"]["S"] for i in resp["Responses"].get(table, [])]
        pending = resp.get("UnprocessedKeys") or {}
        rounds += 1
        assert rounds < 50
    assert rounds > 1 and sorted(found) == sorted(f"bg{i}" for i in range(10))


def _conflict(kw):
    reasons = [{"Code": "None"} for _ in kw["TransactItems"]]
    reasons[0] = {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}
    return _error("TransactionCanceledException", "TransactWriteItems", CancellationReasons=reasons)


@pytest.mark.parametrize("name", ["moto", "twin"])
def test_a_transaction_conflict_cancels_it_whole_and_names_the_conflicting_action(stack, name):
    mock, ddb, table = _backend(name, TwinFaults(seed=1, transaction_conflict=1.0), lambda raw: {"transact_write_items": _conflict})
    stack.append(mock)
    actions = [{"Put": {"TableName": table, "Item": K("tc", f"s{i}")}} for i in range(3)]
    with pytest.raises(ClientError) as caught:
        ddb.transact_write_items(TransactItems=actions)
    assert caught.value.response["Error"]["Code"] == "TransactionCanceledException"
    codes = [r["Code"] for r in caught.value.response["CancellationReasons"]]
    assert sorted(codes) == ["None", "None", "TransactionConflict"]
    assert ddb.scan(TableName=table, ConsistentRead=True)["Items"] == []  # nothing written


def test_a_transaction_conflict_is_drawn_per_call_and_a_retry_commits_exactly_once():
    clock = Clock()
    with TwinCloud(faults=TwinFaults(seed=1, transaction_conflict=0.5), now_ms=clock):
        table = provision(prefix="faults")["LEDGER_TABLE"]
        ddb = aws.client("dynamodb")
        action = [{"Update": {"TableName": table, "Key": K("once"), "UpdateExpression": "ADD n :one",
                              "ExpressionAttributeValues": {":one": {"N": "1"}}}}]
        conflicts = 0
        while True:
            try:
                ddb.transact_write_items(TransactItems=action)
                break
            except ClientError as exc:
                assert exc.response["CancellationReasons"][0]["Code"] == "TransactionConflict"
                conflicts += 1
        assert ddb.get_item(TableName=table, Key=K("once"), ConsistentRead=True)["Item"]["n"] == {"N": "1"}
        assert conflicts > 0  # seed 1 draws a conflict before the commit


@pytest.mark.parametrize("name", ["moto", "twin"])
def test_a_throttled_call_changes_nothing_and_says_so_with_a_throttling_code(stack, name):
    mock, ddb, table = _backend(name, TwinFaults(seed=2, throttle=1.0),
                                lambda raw: {op: (lambda kw, op=op: _error("ProvisionedThroughputExceededException", op))
                                             for op in ("put_item", "get_item", "query")})
    stack.append(mock)
    for call in (lambda: ddb.put_item(TableName=table, Item=K("th")),
                 lambda: ddb.get_item(TableName=table, Key=K("th")),
                 lambda: ddb.query(TableName=table, KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": S("th")})):
        with pytest.raises(ClientError) as caught:
            call()
        assert caught.value.response["Error"]["Code"] in ("ProvisionedThroughputExceededException", "ThrottlingException")


def test_a_throttled_transaction_is_cancelled_with_a_throttling_reason():
    with TwinCloud(faults=TwinFaults(seed=2, throttle=1.0)):
        table = provision(prefix="faults")["LEDGER_TABLE"]
        ddb = aws.client("dynamodb")
        with pytest.raises(ClientError) as caught:
            ddb.transact_write_items(TransactItems=[{"Put": {"TableName": table, "Item": K("th")}}])
        assert [r["Code"] for r in caught.value.response["CancellationReasons"]] == ["ThrottlingError"]


# -- models in time ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["moto", "twin"])
def test_a_strongly_consistent_read_is_always_current(stack, name):
    clock = Clock()
    mock, ddb, table = _backend(name, TwinFaults(seed=4, stale_reads=1.0), lambda raw: {}, clock)
    stack.append(mock)
    ddb.put_item(TableName=table, Item={**K("sr"), "v": S("1")})
    ddb.put_item(TableName=table, Item={**K("sr"), "v": S("2")})
    assert ddb.get_item(TableName=table, Key=K("sr"), ConsistentRead=True)["Item"]["v"] == S("2")
    q = ddb.query(TableName=table, KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": S("sr")}, ConsistentRead=True)
    assert [i["v"] for i in q["Items"]] == [S("2")]


def test_an_eventually_consistent_read_may_see_the_version_before_a_recent_write():
    clock = Clock()
    with TwinCloud(faults=TwinFaults(seed=4, stale_reads=1.0, stale_window_ms=1_000), now_ms=clock):
        table = provision(prefix="faults")["LEDGER_TABLE"]
        ddb = aws.client("dynamodb")
        ddb.put_item(TableName=table, Item={**K("sr"), "v": S("1")})
        assert ddb.get_item(TableName=table, Key=K("sr")) == {}  # just created: an eventual read may not see it yet
        clock.ms += 5_000
        assert ddb.get_item(TableName=table, Key=K("sr"))["Item"]["v"] == S("1")
        ddb.put_item(TableName=table, Item={**K("sr"), "v": S("2")})
        ddb.put_item(TableName=table, Item=K("sr", "gone"))
        clock.ms += 10
        ddb.delete_item(TableName=table, Key=K("sr", "gone"))
        assert ddb.get_item(TableName=table, Key=K("sr"))["Item"]["v"] == S("1")
        q = ddb.query(TableName=table, KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": S("sr")})
        # the version before each item's latest write: "gone" is still there (its delete is the recent write)
        assert [(i["sk"]["S"], i.get("v")) for i in q["Items"]] == [("META", S("1")), ("gone", None)]
        batch = ddb.batch_get_item(RequestItems={table: {"Keys": [K("sr")]}})
        assert batch["Responses"][table][0]["v"] == S("1")
        clock.ms += 1_000  # past the window: every read current
        assert ddb.get_item(TableName=table, Key=K("sr"))["Item"]["v"] == S("2")
        assert [i["sk"]["S"] for i in ddb.scan(TableName=table)["Items"]] == ["META"]  # and "gone" is gone


def test_stale_reads_replay_from_the_seed():
    def run(seed: int) -> list[str]:
        clock = Clock()
        seen = []
        with TwinCloud(faults=TwinFaults(seed=seed, stale_reads=0.5), now_ms=clock):
            table = provision(prefix="faults")["LEDGER_TABLE"]
            ddb = aws.client("dynamodb")
            for i in range(30):
                ddb.put_item(TableName=table, Item={**K("rp"), "v": S(str(i))})
                clock.ms += 10
                seen.append(ddb.get_item(TableName=table, Key=K("rp"))["Item"]["v"]["S"] if i else "-")
        return seen
    assert run(8) == run(8)
    assert run(8) != run(9)
    assert any(a != b for a, b in zip(run(8)[1:], [str(i) for i in range(1, 30)]))  # some stale


@pytest.mark.parametrize("name", ["moto", "twin"])
def test_an_expired_item_is_readable_until_something_deletes_it(stack, name):
    clock = Clock()
    mock, ddb, table = _backend(name, TwinFaults(seed=6, ttl_delete_within_ms=60_000), lambda raw: {}, clock)
    stack.append(mock)
    past = str(clock.ms // 1000 - 10)
    ddb.put_item(TableName=table, Item={**K("ttl"), "expiresAt": {"N": past}})
    assert "Item" in ddb.get_item(TableName=table, Key=K("ttl"), ConsistentRead=True)


def test_the_ttl_sweep_deletes_expired_items_and_their_index_entries_and_nothing_else():
    clock = Clock()
    with TwinCloud(faults=TwinFaults(seed=6, ttl_delete_within_ms=60_000), now_ms=clock) as cloud:
        table = provision(prefix="faults")["LEDGER_TABLE"]
        ddb = aws.client("dynamodb")
        now_s = clock.ms // 1000
        ddb.put_item(TableName=table, Item={**K("exp"), "expiresAt": {"N": str(now_s - 1)}, "activePk": S("A"), "activeSk": S("1")})
        ddb.put_item(TableName=table, Item={**K("future"), "expiresAt": {"N": str(now_s + 3600)}})
        ddb.put_item(TableName=table, Item={**K("text"), "expiresAt": S(str(now_s - 1))})  # not a Number: TTL ignores it
        ddb.put_item(TableName=table, Item={**K("ancient"), "expiresAt": {"N": str(now_s - 6 * 365 * 86400)}})  # > 5 years
        assert "Item" in ddb.get_item(TableName=table, Key=K("exp"), ConsistentRead=True)
        assert cloud.dynamodb.sweep_ttl() == 1
        left = sorted(i["pk"]["S"] for i in ddb.scan(TableName=table, ConsistentRead=True)["Items"])
        assert left == ["ancient", "future", "text"]
        idx = ddb.query(TableName=table, IndexName="ActiveSlots", KeyConditionExpression="activePk = :p",
                        ExpressionAttributeValues={":p": S("A")})
        assert idx["Items"] == []


def test_ttl_deletes_on_its_own_at_a_seeded_moment_within_the_bound():
    def deleted_at(seed: int) -> int:
        clock = Clock()
        with TwinCloud(faults=TwinFaults(seed=seed, ttl_delete_within_ms=60_000), now_ms=clock):
            table = provision(prefix="faults")["LEDGER_TABLE"]
            ddb = aws.client("dynamodb")
            expiry_ms = (clock.ms // 1000 + 1) * 1000
            ddb.put_item(TableName=table, Item={**K("auto"), "expiresAt": {"N": str(expiry_ms // 1000)}})
            for step in range(0, 62_000, 500):
                clock.ms = expiry_ms + step
                if "Item" not in ddb.get_item(TableName=table, Key=K("auto"), ConsistentRead=True):
                    return step
        raise AssertionError("TTL never deleted the item")
    first = deleted_at(21)
    assert 0 <= first <= 60_500 and deleted_at(21) == first


def test_ttl_never_deletes_without_the_model():
    clock = Clock()
    with TwinCloud(now_ms=clock) as cloud:
        table = provision(prefix="faults")["LEDGER_TABLE"]
        ddb = aws.client("dynamodb")
        ddb.put_item(TableName=table, Item={**K("keep"), "expiresAt": {"N": str(clock.ms // 1000 - 1)}})
        clock.ms += 10 * 86_400_000
        assert "Item" in ddb.get_item(TableName=table, Key=K("keep"), ConsistentRead=True)
        assert cloud.dynamodb.sweep_ttl() == 1  # only an explicit sweep deletes


def _active(ddb, table) -> list[str]:
    resp = ddb.query(TableName=table, IndexName="ActiveSlots", KeyConditionExpression="activePk = :p",
                     ExpressionAttributeValues={":p": S("A")})
    return sorted(i["pk"]["S"] for i in resp["Items"])


def test_index_lag_is_per_item_later_writes_of_other_items_may_overtake():
    clock = Clock()
    lags = iter([900, 0, 500, 0])
    with TwinCloud(now_ms=clock, index_lag_ms=lambda: next(lags)):
        table = provision(prefix="faults")["LEDGER_TABLE"]
        ddb = aws.client("dynamodb")
        ddb.put_item(TableName=table, Item={**K("slow"), "activePk": S("A"), "activeSk": S("1")})   # visible at +900
        ddb.put_item(TableName=table, Item={**K("fast"), "activePk": S("A"), "activeSk": S("2")})   # visible at once
        assert _active(ddb, table) == ["fast"]  # a later write of another item overtook the earlier one
        clock.ms += 100
        ddb.update_item(TableName=table, Key=K("fast"), UpdateExpression="REMOVE activePk")         # lag 500: at +600
        ddb.put_item(TableName=table, Item={**K("fast"), "activePk": S("A"), "activeSk": S("3")})   # lag 0, yet after +600
        assert _active(ddb, table) == ["fast"]  # the stale view of "fast": its own writes stay in order
        clock.ms += 500
        assert _active(ddb, table) == ["fast"]
        clock.ms += 300
        assert _active(ddb, table) == ["fast", "slow"]


def test_seeded_index_lag_stays_within_its_bound_and_replays():
    def visible_after(seed: int) -> list[int]:
        clock = Clock()
        out = []
        with TwinCloud(now_ms=clock, faults=TwinFaults(seed=seed, index_lag_ms=1_000)) as cloud:
            table = provision(prefix="faults")["LEDGER_TABLE"]
            ddb = aws.client("dynamodb")
            for i in range(10):
                ddb.put_item(TableName=table, Item={**K(f"l{i}"), "activePk": S("A"), "activeSk": S(str(i))})
                due = cloud.dynamodb.index_pending_until()
                out.append(0 if due is None else due - clock.ms)
                cloud.dynamodb.settle_indexes()
        return out
    lags = visible_after(3)
    assert all(0 <= lag <= 1_000 for lag in lags) and len(set(lags)) > 1
    assert visible_after(3) == lags


def test_the_fault_knobs_refuse_what_is_not_a_chance():
    for bad in ({"stale_reads": 1.5}, {"throttle": -0.1}, {"index_lag_ms": -1}, {"ttl_delete_within_ms": -5}):
        with pytest.raises(ValueError):
            TwinFaults(**bad)
    assert TwinFaults() == TwinFaults(seed=0)  # everything off by default
