"""The per-account rate gate and its ledger items (issue 10): cooldown doubling, Retry-After,
one escalation per wave across containers, pacing jitter, and the DynamoDB adapter's
conditional writes on the template's own table (moto)."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws

from pixivflow.adapters.pixiv.account_store import DynamoPixivAccounts, MemoryPixivAccounts
from pixivflow.adapters.pixiv.gate import MAX_COOLDOWN_MS, RateGate, cooldown_ms
from pixivflow.clock import Entropy, VirtualClock
from pixivflow.domain.errors import RateLimitedError
from pixivflow.local.provision import provision
from pixivflow.domain.accounts import AccountGate

T0 = 1_796_083_200_000


@pytest.fixture
def dynamo() -> Iterator[tuple[DynamoPixivAccounts, object, str]]:
    with mock_aws():
        table = provision()["LEDGER_TABLE"]
        client = boto3.client("dynamodb")
        yield DynamoPixivAccounts(client, table), client, table


@pytest.fixture(params=["memory", "dynamo"])
def store(request):
    if request.param == "memory":
        yield MemoryPixivAccounts()
    else:
        with mock_aws():
            yield DynamoPixivAccounts(boto3.client("dynamodb"), provision()["LEDGER_TABLE"])


def gate_on(store, clock, sleeps=None, pacing_ms=0, seed=5):
    sleeps = sleeps if sleeps is not None else []
    return RateGate(store, "main", now_ms=clock.now_ms, sleep=sleeps.append, uniform=Entropy(seed).uniform,
                    pacing_ms=pacing_ms, refresh_ms=5_000)


def test_cooldown_doubles_from_60_s_to_15_min_and_never_undercuts_retry_after():
    assert [cooldown_ms(n) for n in range(1, 7)] == [60_000, 120_000, 240_000, 480_000, 900_000, 900_000]
    assert cooldown_ms(1, retry_after_ms=90_000) == 90_000
    assert cooldown_ms(6, retry_after_ms=3_600_000) == 3_600_000  # Retry-After wins even past the cap
    assert MAX_COOLDOWN_MS == 15 * 60_000


def test_consecutive_penalties_escalate_and_a_success_after_the_cooldown_clears_them(store):
    clock = VirtualClock(T0)
    gate = gate_on(store, clock)
    waits = []
    for _ in range(6):
        waits.append(gate.penalize(None, status=429, where="/x"))
        clock.advance(waits[-1])  # the cooldown passes, the next request is rate limited again
    assert waits == [60_000, 120_000, 240_000, 480_000, 900_000, 900_000]
    assert store.gate("main").penalties == 6
    gate.before_request()
    gate.succeeded()
    assert store.gate("main").penalties == 0
    assert gate.penalize(None, status=429, where="/x") == 60_000  # back to the start


def test_requests_during_a_cooldown_are_refused_and_do_not_escalate_it(store):
    clock = VirtualClock(T0)
    gate = gate_on(store, clock)
    assert gate.penalize(None, status=429, where="/x") == 60_000
    clock.advance(10_000)
    with pytest.raises(RateLimitedError, match=r"^rate_limited: Pixiv account main is cooling down .*\(50 s left") as caught:
        gate.before_request()
    assert caught.value.retry_after_ms == 50_000
    # A request already in flight when the wave started is answered 429 too: same wave, no doubling.
    assert gate.penalize(None, status=429, where="/y") == 50_000
    assert store.gate("main").penalties == 1
    # ... but a longer Retry-After stretches it
    assert gate.penalize(120_000, status=429, where="/y") == 120_000
    assert (store.gate("main").penalties, store.gate("main").cooldown_until) == (1, T0 + 10_000 + 120_000)


def test_two_containers_share_one_gate(store):
    clock = VirtualClock(T0)
    a, b = gate_on(store, clock), gate_on(store, clock)
    b.before_request()  # b has read the (empty) gate
    a.penalize(None, status=429, where="/x")
    with pytest.raises(RateLimitedError):
        a.before_request()
    clock.advance(5_000)  # b re-reads the shared item at most every 5 s
    with pytest.raises(RateLimitedError, match="55 s left"):
        b.before_request()
    # both hit at once: the conditional write lets only one escalate
    clock.advance(55_000)
    a.state(fresh=True), b.state(fresh=True)
    a.penalize(None, status=429, where="/x")
    b.penalize(None, status=429, where="/x")
    assert store.gate("main").penalties == 2


def test_pacing_spaces_requests_by_requestPacingMs_plus_up_to_a_quarter_of_jitter(store):
    clock = VirtualClock(T0)
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock.advance(int(seconds * 1000))

    gate = RateGate(store, "main", now_ms=clock.now_ms, sleep=sleep, uniform=Entropy(11).uniform, pacing_ms=1000)
    gate.before_request()
    assert sleeps == []  # nothing to wait for before the first request
    clock.advance(300)
    gate.before_request()
    jitter = Entropy(11).uniform()  # the first request took its turn and set the gap after it
    assert sleeps == [(int(1000 * (1 + 0.25 * jitter)) - 300) / 1000]
    clock.advance(5_000)
    gate.before_request()
    assert len(sleeps) == 1  # long enough since the last request
    gate.before_request(pace=False)  # image downloads are not paced
    assert len(sleeps) == 1


def test_pacing_is_the_accounts_across_containers(store):
    """Issue 24: two containers (two gates on one store) share the account's request turns."""
    clock = VirtualClock(T0)
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock.advance(int(seconds * 1000))

    first = RateGate(store, "main", now_ms=clock.now_ms, sleep=sleep, uniform=lambda: 0.0, pacing_ms=1000)
    second = RateGate(store, "main", now_ms=clock.now_ms, sleep=sleep, uniform=lambda: 0.0, pacing_ms=1000)
    other = RateGate(store, "alt", now_ms=clock.now_ms, sleep=sleep, uniform=lambda: 0.0, pacing_ms=1000)
    first.before_request()
    clock.advance(200)
    second.before_request()  # another container, same account: waits out the first's gap
    assert sleeps == [0.8]
    other.before_request()  # another account is not held back
    assert sleeps == [0.8]


def test_dynamo_items_are_conditional_and_carry_no_token(dynamo):
    accounts, client, table = dynamo
    assert accounts.gate("main") == AccountGate()
    assert accounts.set_gate("main", AccountGate(), T0 + 60_000, 1, T0)
    assert not accounts.set_gate("main", AccountGate(), T0 + 99, 9, T0)  # stale view: refused
    assert accounts.gate("main") == AccountGate(T0 + 60_000, 1, 1)
    assert accounts.set_gate("main", AccountGate(T0 + 60_000, 1, 1), T0 + 60_000, 0, T0)
    assert accounts.gate("main") == AccountGate(T0 + 60_000, 0, 2)

    assert accounts.token_fingerprint("main") is None
    assert accounts.rotate_token("main", "fp-old", "fp-new", T0)  # first rotation ever
    assert not accounts.rotate_token("main", "fp-old", "fp-other", T0)  # a second container, same start: loses
    assert accounts.rotate_token("main", "fp-new", "fp-newer", T0)
    assert accounts.token_fingerprint("main") == "fp-newer"
    items = client.scan(TableName=table)["Items"]
    keys = sorted((i["pk"]["S"], i["sk"]["S"]) for i in items)
    assert keys == [("PIXIV#main", "GATE"), ("PIXIV#main", "TOKEN")]
    for item in items:
        assert not set(item) & {"activePk", "duePk", "callbackPk", "expiresAt"}  # never in a GSI, never expired


def test_a_permit_is_taken_only_when_free_expired_or_already_the_takers(store):
    """Issue 24: the permit items' conditional writes (memory twin and DynamoDB alike)."""
    assert store.take_permit("main", 0, "exec-a", T0, 90_000)
    assert not store.take_permit("main", 0, "exec-b", T0 + 1_000, 90_000)  # held and live: refused
    assert store.take_permit("main", 0, "exec-a", T0 + 1_000, 90_000)  # the holder's own re-take
    assert store.take_permit("main", 1, "exec-b", T0 + 1_000, 90_000)  # another permit is free
    assert not store.renew_permit("main", 0, "exec-b", T0 + 2_000, 90_000)  # only the holder renews
    assert store.renew_permit("main", 0, "exec-a", T0 + 2_000, 90_000)
    assert not store.release_permit("main", 0, "exec-b")  # only the holder releases
    assert [(p.holder, p.lease_until) for p in store.permits("main", 3)] == [
        ("exec-a", T0 + 92_000), ("exec-b", T0 + 91_000), (None, 0)]
    assert not store.take_permit("main", 0, "exec-c", T0 + 91_999, 90_000)
    assert store.take_permit("main", 0, "exec-c", T0 + 92_000, 90_000)  # a dead holder's lease ran out
    assert not store.renew_permit("main", 0, "exec-a", T0 + 92_001, 90_000)  # ...and it cannot renew it back
    assert store.release_permit("main", 0, "exec-c")
    assert store.permits("main", 1)[0].holder is None
    assert store.take_permit("alt", 0, "exec-d", T0, 90_000)  # accounts are independent


def test_the_governor_grants_max_concurrency_permits_then_says_when_to_ask_again(store):
    from pixivflow.adapters.pixiv.governor import PERMIT_LEASE_MS, RETRY_SLACK_MS, AccountGovernor

    clock = VirtualClock(T0)
    governor = AccountGovernor(store, "main", 2, now_ms=clock.now_ms)
    assert governor.admit("a").granted and governor.admit("b").granted
    clock.advance(10_000)
    busy = governor.admit("c")
    assert (busy.granted, busy.reason, busy.wait_until) == (False, "pixiv_account_busy", T0 + PERMIT_LEASE_MS + RETRY_SLACK_MS)
    governor.release("a")
    assert governor.admit("c").granted  # a released permit is free at once
    assert store.set_gate("main", AccountGate(), T0 + 600_000, 1, clock.now_ms())
    cooling = governor.admit("d")
    assert (cooling.granted, cooling.reason, cooling.wait_until) == (False, "rate_limit_cooldown", T0 + 600_000)


def test_a_cooldown_keeps_its_cause_so_an_outage_never_reads_as_a_rate_limit(store):
    """The token endpoint unreachable puts the account on the same doubling cooldown as a rate
    limit, but a request refused meanwhile fails with the cause (``network_error``), and a cell the
    governor holds back waits for an outage, not a rate limit. A later 429 in the same wave keeps the
    cause that began it; the next wave takes its own."""
    from pixivflow.adapters.pixiv.governor import AccountGovernor
    from pixivflow.domain.errors import SourceOutage

    clock = VirtualClock(T0)
    gate = gate_on(store, clock)
    assert gate.penalize(None, status=None, where="oauth", cause="network_error") == 60_000
    with pytest.raises(SourceOutage) as refused:
        gate.before_request()
    assert not isinstance(refused.value, RateLimitedError)
    assert (refused.value.reason, refused.value.retry_after_ms) == ("network_error", 60_000)
    assert str(refused.value).startswith("network_error: Pixiv account main is cooling down")
    waiting = AccountGovernor(store, "main", 1, now_ms=clock.now_ms).admit("exec-a")
    assert (waiting.granted, waiting.reason, waiting.cause) == (False, "outage_cooldown", "network_error")

    gate.penalize(90_000, status=429, where="/v1/search/illust")  # same wave: stretched, cause kept
    assert store.gate("main").cause == "network_error"
    clock.advance(store.gate("main").cooldown_until - T0)
    gate.penalize(None, status=429, where="/v1/search/illust")  # a new wave: a rate limit
    with pytest.raises(RateLimitedError):
        gate_on(store, clock).before_request()
    assert store.gate("main").cause == "rate_limited"
