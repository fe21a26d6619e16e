"""The incremental sweep (issue 25): a tick visits the live slots from the cursor the previous tick
left, starts no new slot past its budget (``SWEEP_BUDGET_MS``, under half its 60 s lease), and the
next tick resumes where it stopped, so every live slot is visited however many there are.

A tick is made slow by moving the virtual clock inside the ledger reads it makes: what the sweep
does is read off its counters, its ``sweep.recovered`` lines and the execution queue."""

from __future__ import annotations

from conftest import ms
from pixivflow.adapters.dynamo_ledger import shard_of
from pixivflow.services.sweep import SWEEP_BUDGET_MS
from support.builders import only, schedule
from support.queues import drop_executions

T0 = "2026-11-30T23:00:00Z"  # 08:00 Asia/Tokyo on 2026-12-01
T0_MS = ms(T0)
MIN = 60_000


def _names() -> list[str]:
    """Six schedules whose slots fall two in one active-index shard and four in a later one, so a
    three-slot tick stops inside the second shard and the next must resume past a position in it."""
    by_shard: dict[int, list[str]] = {}
    for n in range(200):
        by_shard.setdefault(shard_of(f"walk{n}@2026-12-01T0800"), []).append(f"walk{n}")
    first = min(s for s, names in by_shard.items() if len(names) >= 2)
    second = min(s for s, names in by_shard.items() if len(names) >= 4 and s > first)
    return by_shard[first][:2] + by_shard[second][:4]


NAMES = _names()


def _six_lost_slots(make_runtime):
    """Six one-cell slots whose execution messages were lost, at the 5-minute mark where the sweep
    re-dispatches them (DESIGN §4 "Recovery")."""
    rt = make_runtime(T0, mutate=only(*(schedule(n, ["cats"]) for n in NAMES)))
    for name in NAMES:
        assert rt.fire(name, iso=T0)["sent"] == 1
    assert drop_executions(rt) == 6
    rt.clock.set(T0_MS + 5 * MIN)
    return rt


def _rescued(logs) -> list[str]:
    return [line["slot_id"] for line in logs.events("sweep.recovered")]


def test_a_tick_past_its_budget_leaves_the_rest_of_the_walk_to_the_next_tick(make_runtime, logs, monkeypatch):
    rt = _six_lost_slots(make_runtime)
    ledger = rt.wiring.ledger
    real_load = ledger.load
    step = SWEEP_BUDGET_MS * 2 // 5  # each slot's read takes 10 s of the tick: three fit the 25 s budget

    def slow_load(slot_id):
        rt.clock.advance(step)
        return real_load(slot_id)

    monkeypatch.setattr(ledger, "load", slow_load)
    first = rt.sweep()
    assert (first["activeSlots"], first["recovered"], first["passComplete"]) == (3, 3, 0)
    assert drop_executions(rt) == 3
    assert len(_rescued(logs)) == 3

    second = rt.sweep()  # resumes after the third slot: the other three, never the first three again
    assert second["recovered"] == 3 and second["errors"] == 0
    assert drop_executions(rt) == 3
    assert sorted(_rescued(logs)) == sorted(f"{n}@2026-12-01T0800" for n in NAMES)  # each once

    monkeypatch.setattr(ledger, "load", real_load)
    third = rt.sweep()  # at full speed, one tick is a whole pass again: all six, nothing left to do
    assert (third["activeSlots"], third["recovered"], third["passComplete"]) == (6, 0, 1)
    assert drop_executions(rt) == 0
    [line] = [e for e in logs.events("sweep.finished")][-1:]
    assert line["passComplete"] == 1 and line["shardsWalked"] == rt.wiring.ledger.active_shards()


def test_a_tick_whose_budget_is_gone_before_its_first_slot_still_moves_the_walk_on(make_runtime, logs, monkeypatch):
    """A slow first index read (30 s) spends the budget before the first slot: the tick still
    takes one slot, so the walk never stands still and six ticks visit all six slots."""
    rt = _six_lost_slots(make_runtime)
    ledger = rt.wiring.ledger
    real_page = ledger.active_page

    first_read = []

    def slow_page(*args, **kwargs):
        if first_read:  # a tick's first index read is the slow one
            first_read.clear()
            rt.clock.advance(SWEEP_BUDGET_MS + 5_000)
        return real_page(*args, **kwargs)

    monkeypatch.setattr(ledger, "active_page", slow_page)
    for _ in NAMES:
        first_read.append(True)
        result = rt.sweep()
        assert (result["activeSlots"], result["recovered"]) == (1, 1)
    assert drop_executions(rt) == 6
    assert sorted(_rescued(logs)) == sorted(f"{n}@2026-12-01T0800" for n in NAMES)  # each once
