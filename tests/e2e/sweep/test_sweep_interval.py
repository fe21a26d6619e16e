"""SweepIntervalMinutes (issue 25 (a)): the sweep told how often it is scheduled (SWEEP_INTERVAL_MS),
its lease checked against it, the embedded runtime and the dev server ticking at it.

The lease is the function's timeout at every interval: a running tick must always hold it. What
the interval adds is a bound on the other side: the lease of a tick that died has to be over when
the next scheduled tick comes, or that tick finds it held and does nothing. An interval shorter
than the lease is refused by every tick.
"""

from __future__ import annotations

import os

import pytest

from conftest import ms
from pixivflow import runtime
from pixivflow.local.devserver import DevServer, run_dev
from pixivflow.services.sweep import SWEEP_LEASE_MS, sweep_lease_ms
from support.builders import only, schedule
from support.queues import drop_executions

T0 = "2026-11-30T23:00:00Z"  # 08:00 Asia/Tokyo on 2026-12-01
T0_MS = ms(T0)
MIN = 60_000


def test_the_runtime_reads_the_interval_from_sweep_interval_ms_and_defaults_to_the_minute(monkeypatch):
    monkeypatch.delenv("SWEEP_INTERVAL_MS", raising=False)
    assert runtime._sweep_interval_ms() == 60_000  # noqa: SLF001 - the one reader of the variable
    monkeypatch.setenv("SWEEP_INTERVAL_MS", "300000")
    assert runtime._sweep_interval_ms() == 300_000  # noqa: SLF001
    monkeypatch.setenv("SWEEP_INTERVAL_MS", "5m")
    with pytest.raises(RuntimeError, match="SWEEP_INTERVAL_MS: '5m' is not a whole number of milliseconds"):
        runtime._sweep_interval_ms()  # noqa: SLF001


@pytest.mark.parametrize("minutes", [1, 2, 5, 10])
def test_a_tick_that_died_holding_its_lease_never_silences_the_next_scheduled_tick(make_runtime, downstream, minutes):
    rt = make_runtime(T0, mutate=only(schedule("pair", ["cats", "landscape"])), sweep_interval_minutes=minutes)
    interval = minutes * MIN
    assert rt.wiring.sweep_interval_ms == interval  # as template.yaml sets SWEEP_INTERVAL_MS for this value
    rt.fire("pair", iso=T0)
    assert drop_executions(rt) == 2  # both messages lost: the first tick past 5 min re-dispatches them
    rt.clock.set(T0_MS + 5 * MIN)
    lease_ms = sweep_lease_ms(rt.wiring.sweep_interval_ms)
    assert lease_ms == SWEEP_LEASE_MS  # a live tick (at most the 60 s timeout) always holds it
    died = rt.wiring.sweep_state.acquire_lease("sweep-that-died", rt.clock.now_ms(), lease_ms)
    assert died.acquired and died.until_ms <= rt.clock.now_ms() + interval

    rt.clock.advance(interval)  # the next scheduled tick
    taken_over = rt.sweep()
    assert "skipped" not in taken_over and taken_over["recovered"] == 1
    assert drop_executions(rt) == 2


def test_an_interval_shorter_than_the_lease_is_refused_by_every_tick_and_takes_no_lease(make_runtime, downstream):
    rt = make_runtime(T0, mutate=only(schedule("pair", ["cats", "landscape"])))
    rt.fire("pair", iso=T0)
    assert drop_executions(rt) == 2
    rt.clock.set(T0_MS + 5 * MIN)
    rt.wiring.sweep_interval_ms = 30_000  # a hand-set SWEEP_INTERVAL_MS: ticks would overlap their lease
    with pytest.raises(ValueError, match="SWEEP_INTERVAL_MS: 30000 ms is shorter than the sweep's 60000 ms lease"):
        rt.sweep()
    assert drop_executions(rt) == 0  # the refused tick did nothing
    rt.wiring.sweep_interval_ms = 60_000
    ran = rt.sweep()  # and left no lease behind: the next good tick runs at once
    assert "skipped" not in ran and ran["recovered"] == 1


def test_the_embedded_runtime_settles_on_ticks_of_its_interval(make_runtime, downstream):
    rt = make_runtime(T0, mutate=only(schedule("pair", ["cats", "landscape"])), sweep_interval_minutes=2)
    rt.fire("pair", iso=T0)
    assert drop_executions(rt) == 2
    elapsed = rt.settle()
    # the lost cells are recovered at the first 2-minute tick past their 5 minutes (a minute sweep: at 5)
    assert elapsed == 6 * MIN and rt.sweeps == 3
    slot = rt.wiring.ledger.get_slot("pair@2026-12-01T0800")
    assert slot is not None and slot.status == "success"


def test_the_dev_server_takes_a_sweep_interval_the_template_allows_and_refuses_others(tmp_path, capsys, monkeypatch):
    config = tmp_path / "config.yaml"
    config.write_text("schedules: []\n")
    assert DevServer(str(config), port=0).sweep_interval.minutes == 1  # template.yaml's default
    dev = DevServer(str(config), port=0, sweep_interval_minutes=5)  # nothing starts until start()
    assert dev.sweep_interval.ms == 300_000 and dev._sweep_cadence() == "every 5 minutes (--sweep-interval)"  # noqa: SLF001
    with pytest.raises(ValueError, match="SweepIntervalMinutes: 3 is not one of the allowed intervals"):
        DevServer(str(config), port=0, sweep_interval_minutes=3)

    from pixivflow.cli import main

    monkeypatch.delenv("PIXIVFLOW_CONFIG", raising=False)
    for quietened in ("POWERTOOLS_LOG_LEVEL", "POWERTOOLS_METRICS_DISABLED"):  # `dev` setdefaults them for good
        monkeypatch.setenv(quietened, os.environ.get(quietened, ""))
    assert main(["dev", "--demo", "--sweep-interval", "3", "--env-file", ""]) == 2
    assert capsys.readouterr().err == ("pixivflow dev: --sweep-interval: SweepIntervalMinutes: 3 is not one of the allowed "
                                       "intervals (1, 2, 5, 10 minutes)\n")
    assert run_dev(config=None, demo=True, sweep_interval=0) == 2
