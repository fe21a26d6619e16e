"""Issue 24: one Pixiv account is never hammered. The account's ``maxConcurrency`` permits hold
across executors (the real execute handler, run by ten threads at once against the loopback fake
Pixiv, which records how many of its requests overlap); a cell that finds no permit waits in its
queue without using an attempt; a cell blocked by a cooldown is retried once, at its end.
"""

from __future__ import annotations

import threading

import pytest

from pixivflow.adapters.pixiv.governor import PERMIT_LEASE_MS
from pixivflow.local.fake_pixiv import DEFAULT_REFRESH_TOKEN, FakePixiv
from pixivflow.services.execution import BUSY_POLL_FIRST_MS
from support.builders import both, fake_pixiv, pixiv_config, pixiv_runtime

FIRE = "2026-11-30T23:00:00Z"
SLOT = "pixiv-morning@2026-12-01T0800"
N_TARGETS = 10


def ranking_target(n: int) -> dict:
    # No delivery route: each cell stores the day's top work under its own prefix (no cross-cell dedupe).
    return {"id": f"daily{n}", "type": "illustration", "mode": "ranking", "rankingMode": "day",
            "rankingDate": "YESTERDAY", "limit": 1, "storageMode": "persistent"}


fake = fake_pixiv()


@pytest.fixture
def start(make_runtime, monkeypatch):
    monkeypatch.setenv("PIXIV_REFRESH_TOKEN", DEFAULT_REFRESH_TOKEN)

    def factory(fake: FakePixiv, *, max_concurrency: int | None, targets: list[dict], pacing_ms: int = 0):
        def governed(cfg):
            if max_concurrency is not None:
                cfg.setdefault("schedulerRuntime", {})["resourceGovernance"] = {
                    "pixivAccounts": {"main": {"maxConcurrency": max_concurrency}}}

        return pixiv_runtime(make_runtime, both(pixiv_config(
            fake, targets, pixiv={"accountId": "main"}, network={"requestPacingMs": pacing_ms, "timeoutMs": 5000},
            download={"requestDelay": 0}), governed))

    return factory


def run_batches_on_threads(rt) -> None:
    """The execute pump hands each batch to one executor per record, all at once (ten containers)."""
    handler = rt.handlers["execute"]

    def parallel(event, context):
        failures: list[dict] = []
        threads = [threading.Thread(target=lambda r=r: failures.extend(
            (handler({"Records": [r]}, context) or {}).get("batchItemFailures", []))) for r in event["Records"]]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return {"batchItemFailures": failures}

    rt.pumps["execute"]._handler = parallel  # noqa: SLF001 - the pump plays the event source mapping


@pytest.mark.parametrize("limit", [1, 3])
def test_ten_executors_on_one_account_never_exceed_max_concurrency(start, fake, limit):
    fake.in_flight.latency_s = 0.02  # Pixiv's answer time: overlapping executors really overlap
    rt = start(fake, max_concurrency=limit, targets=[ranking_target(n) for n in range(N_TARGETS)])
    run_batches_on_threads(rt)
    # The first answers wait until the ten executors have really raced: every permit's holder has a
    # request at the fake and every other executor was refused a permit. Without the hold, a loaded
    # machine starts the threads so far apart that some never meet a holder.
    governor = rt.wiring.source.governor
    admit, refused = governor.admit, [0]

    def counting_admit(holder):
        admission = admit(holder)
        if not admission.granted:
            refused[0] += 1
            fake.in_flight.poke()
        return admission

    governor.admit = counting_admit
    raced = [False]  # once raced, every later answer (the waiters' turns) goes straight out

    def hold_until() -> bool:
        raced[0] = raced[0] or (refused[0] >= N_TARGETS - limit and fake.in_flight.current >= limit)
        return raced[0]

    fake.in_flight.hold_until = hold_until
    assert rt.fire("pixiv-morning", iso=FIRE)["slot_id"] == SLOT
    elapsed = rt.settle()
    # A waiter asks again after 2 s, 4 s, ... instead of sleeping to the holder's lease end (90 s)
    # although the holder finished in a moment. Measured on the harness (whose clock moves by
    # whole sweep minutes): 1,080 s -> 780 s at maxConcurrency 1, 360 s -> 180 s at 3.
    assert elapsed <= {1: 810_000, 3: 270_000}[limit], elapsed

    state = rt.wiring.ledger.load(SLOT)
    assert state.slot.status == "success"
    cells = state.snapshot_cells()
    assert {c.status for c in cells} == {"submitted"}  # stored, persistent: the outcome "submitted"
    # The account's own bound, measured at the fake: never more requests in flight than permits,
    # and with ten executors racing the permits were all in use at some point.
    assert fake.in_flight.peak == limit, fake.in_flight.peak
    assert fake.in_flight.hold_timeouts == 0  # the race happened: every answer was released by it
    # A cell that waited for a permit says so, and waiting used no attempt.
    waited = [c for c in cells if (c.candidate_report or {}).get("waited")]
    assert len(waited) >= N_TARGETS - limit
    assert all(c.candidate_report["waited"]["reason"] == "pixiv_account_busy" for c in waited)
    assert all(c.attempt_count == 1 for c in cells)
    # Every permit was given back at the end.
    permits = rt.wiring.source.governor._store.permits("main", limit)  # noqa: SLF001
    assert all(p.holder is None for p in permits)


def test_without_governance_the_published_default_is_one_permit(start, fake):
    fake.in_flight.latency_s = 0.02
    rt = start(fake, max_concurrency=None, targets=[ranking_target(n) for n in range(4)])
    run_batches_on_threads(rt)
    rt.fire("pixiv-morning", iso=FIRE)
    rt.settle()
    assert rt.wiring.ledger.load(SLOT).slot.status == "success"
    assert fake.in_flight.peak == 1


def test_a_waiting_cell_asks_again_sooner_and_sooner_never_past_the_holders_lease(start, fake, logs):
    rt = start(fake, max_concurrency=1, targets=[ranking_target(0)])
    governor = rt.wiring.source.governor
    # A dead executor of another slot holds the only permit: its lease runs out in PERMIT_LEASE_MS.
    now = rt.clock.now_ms()
    assert governor.admit("exec-dead").granted
    governor._held.clear()  # noqa: SLF001 - it died: nobody will release it
    rt.fire("pixiv-morning", iso=FIRE)
    rt.pump()
    cell = rt.wiring.ledger.get_cell(SLOT, "daily0")
    assert cell.status == "pending" and cell.attempt_count == 0
    due = cell.candidate_report["waited"]["until"]
    assert due == now + BUSY_POLL_FIRST_MS  # not the dead holder's lease end: a live one releases sooner
    assert cell.dispatched_at == due
    searched = len(fake.paths("api"))
    # Until the lease runs out every ask is refused, each waiting twice as long, the last one
    # exactly until the lease end; the sweep never re-dispatches the cell before its due time.
    lease_end = now + PERMIT_LEASE_MS + 1000
    while rt.clock.now_ms() < lease_end - 1000:
        due = rt.wiring.ledger.get_cell(SLOT, "daily0").candidate_report["waited"]["until"]
        rt.clock.advance(max(0, due - rt.clock.now_ms() - 1))
        rt.sweep()
        rt.pump()
        assert len(fake.paths("api")) == searched  # just before its due time: nothing ran
        rt.clock.advance(1)
        rt.pump()
    asks = [e["due_at"] - now for e in logs.events("cell.deferred")]
    assert asks[:5] == [2_000, 6_000, 14_000, 30_000, 62_000] and asks[-1] == PERMIT_LEASE_MS + 1000, asks
    rt.settle()
    cell = rt.wiring.ledger.get_cell(SLOT, "daily0")
    assert cell.status == "submitted" and cell.attempt_count == 1


@pytest.mark.parametrize("retry_after_s", [600, 1200])
def test_a_cooldown_blocked_cell_is_retried_once_at_the_cooldowns_end(start, fake, logs, retry_after_s):
    """600 s: one SQS delay to the cooldown's end. 1200 s: beyond SQS's 900 s cap, the early wake-up
    is handed back (no attempt, no Pixiv request) and the cell runs when the cooldown ends."""
    rt = start(fake, max_concurrency=1, targets=[ranking_target(0)])
    fake.fail("/v1/illust/ranking", 429, headers={"Retry-After": str(retry_after_s)})
    fired_at = ms_now = rt.clock.now_ms()
    rt.fire("pixiv-morning", iso=FIRE)
    rt.pump()
    cooldown_end = rt.wiring.source.governor.cooldown_until()
    assert cooldown_end >= ms_now + retry_after_s * 1000
    ranking = lambda: [r for r in fake.requests if r.path == "/v1/illust/ranking"]  # noqa: E731
    assert len(ranking()) == 1
    # Minute by minute, sweeps included, until the cooldown ends: Pixiv hears nothing from this cell.
    while rt.clock.now_ms() + 60_000 < cooldown_end:
        rt.clock.advance(60_000)
        rt.pump()
        rt.sweep()
        rt.pump()
        assert len(ranking()) == 1, rt.clock.now_ms() - fired_at
    rt.settle()
    cell = rt.wiring.ledger.get_cell(SLOT, "daily0")
    assert cell.status == "submitted"
    assert len(ranking()) == 2  # retried exactly once
    assert cell.attempt_count == 2  # the failed try and the retry; an early wake-up used none
    assert cell.started_at is not None and rt.clock.now_ms() >= cooldown_end
    assert len(logs.events("cell.retry_scheduled")) == 1
    assert len(logs.events("cell.deferred")) == (1 if retry_after_s > 900 else 0)
