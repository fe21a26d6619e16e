"""What a deployment costs a month (issue 25): the three profiles, every line priced from the
bench's prices or named "price not in the kit" with what it would be billed on, and make bench
failing when a line is neither."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))  # the bench's meter and scenarios

import monthly  # noqa: E402
import report  # noqa: E402
import scenarios  # noqa: E402


def _bills():
    m = scenarios.scheduled_slot("morning-tokyo", backend="twin", name="3 targets")
    f = report.figures(m.window, report.template_facts(), per=m.delivered, scheduler_fires=1)
    ref = {"per_cell": f, "dollars": report.dollars(f)}
    facts = report.template_facts()
    idle = report.figures(scenarios.idle_tick(backend="twin").window, facts, per=1, scheduler_fires=1)
    return report.monthly_figures(ref, idle, {}, facts, 6, {"3 targets": m.detail | {"delivered": m.delivered}}), m


def test_the_three_profiles_are_priced_line_by_line_with_storage_and_nothing_silently_zero():
    mo, m = _bills()
    assert [b["key"] for b in mo["profiles"]] == ["a", "b", "c"]
    assert mo["unpriced"] == []
    a, b, c = mo["profiles"]
    assert a["cells_per_month"] == 240 and a["alarm_profile"] == "health" and a["accounts"] == 1
    assert (b["cells_per_month"], c["cells_per_month"]) == (90_000, 1_000_000)
    for bill in mo["profiles"]:
        names = {line["name"]: line for line in bill["lines"]}
        for stored in ("S3 storage", "DynamoDB storage", "DynamoDB point-in-time recovery", "CloudWatch Logs storage"):
            assert stored in names, (bill["key"], stored)
        # the kit has no DynamoDB storage or PITR price: named with the quantity, never a zero
        for unpriced in ("DynamoDB storage", "DynamoDB point-in-time recovery"):
            assert names[unpriced]["usd"] is None and names[unpriced]["named"] == "price not in the kit"
            assert "GB" in names[unpriced]["quantity"]
        assert names["S3 storage"]["usd"] > 0
        assert bill["total"] == sum(line["usd"] for line in bill["lines"] if line["usd"] is not None)
    # the health profile watches with one alarm reading three metrics (Health and the sweep's free
    # Invocations and Errors: billed per metric read) and one series billed only in the hours it is
    # published (issue 25 (a)); the full one with every alarm
    fixed_a = {line["name"]: line["usd"] for line in a["lines"] if line["fixed"]}
    assert abs(fixed_a["CloudWatch alarms (AlarmProfile=health)"] - 3 * 0.10) < 1e-12
    hours = report.A["health_hours_published_per_month"]
    assert abs(fixed_a["CloudWatch custom metrics (Health, unhealthy hours only)"] - 0.30 * hours / 720) < 1e-12
    fixed_c = {line["name"]: line["usd"] for line in c["lines"] if line["fixed"]}
    facts = report.template_facts()
    assert facts["alarm_metrics_by_profile"]["full"] == facts["alarms"] + 2  # HealthAlarm reads 3, every other 1
    assert abs(fixed_c["CloudWatch alarms (AlarmProfile=full)"] - (facts["alarms"] + 2) * 0.10) < 1e-12
    # the ledger bytes are measured from the slot's own items, not assumed
    assert m.detail["ledger_items"] >= 1 + 3 + 3  # the slot, its cells, their intents
    assert mo["ledger_bytes_per_cell"] == m.detail["ledger_bytes"] / m.delivered


def test_a_line_with_neither_a_price_nor_a_name_fails_make_bench(capsys):
    profile = monthly.profiles(report.A)[0]
    bill = monthly.summarise(profile, [monthly.Line("S3 storage", 0.1), monthly.Line("mystery", None)], report.P, report.A, 1)
    assert monthly.check_every_line_priced_or_named([bill]) == ["(a) mystery"]
    assert report.exit_code({"monthly": {"unpriced": ["(a) mystery"]}}) == 2
    assert "mystery" in capsys.readouterr().err
    assert report.exit_code({"monthly": {"unpriced": []}}) == 0


def test_a_smaller_sweep_bills_its_waits_by_the_gb_while_its_cpu_stretches():
    """SweepMemorySize (issue 25, profile a): the minute's idle tick re-priced at 128 MB from the same
    measured window. Its requests' waits shrink with the memory; its own CPU takes longer in the same
    proportion, so that part of the GB-seconds stays what it was."""
    idle = scenarios.idle_tick(backend="twin")
    big, small = report.template_facts(), report.template_facts(SweepMemorySize=128)
    assert (big["functions"]["stall_sweep"]["memory_mb"], small["functions"]["stall_sweep"]["memory_mb"]) == (512, 128)
    f_big = report.figures(idle.window, big, per=1, scheduler_fires=1)
    f_small = report.figures(idle.window, small, per=1, scheduler_fires=1)
    lat = report.A["latency_ms"]
    calls = [c for c in idle.window.calls if c.function == "stall_sweep"]
    wait_s = sum(lat["dynamodb"] if c.service == "dynamodb" else lat["sqs"] for c in calls if c.service in ("dynamodb", "sqs")) / 1000
    assert wait_s > 0
    saved = f_big["lambda"]["gb_s_modelled"] - f_small["lambda"]["gb_s_modelled"]
    assert abs(saved - wait_s * (512 - 128) / 1024) < 1e-9
    tick_big = report.fixed_monthly(f_big, {}, big, 1, "health")["sweep ticks (DynamoDB, Lambda, Scheduler)"]
    tick_small = report.fixed_monthly(f_small, {}, small, 1, "health")["sweep ticks (DynamoDB, Lambda, Scheduler)"]
    assert abs((tick_big - tick_small) - saved * report.P["lambda_gb_s_arm64"] * big["sweep_ticks_per_month"]) < 1e-9


def test_a_cold_start_is_billed_for_its_cpu_at_the_memorys_share_plus_its_waits():
    """INIT + first invocation measured on one core of this machine: on Lambda its CPU runs at the
    memory's share of a vCPU (1 vCPU at 1,769 MB), its waits (wall minus CPU) as they were."""
    measured = {"wall_s": 0.8, "cpu_s": 0.6}
    assert abs(report.init_seconds(measured, 1769) - 0.8) < 1e-9
    assert abs(report.init_seconds(measured, 512) - (0.6 * 1769 / 512 + 0.2)) < 1e-9
    assert report.init_seconds(1.5, 128) == 1.5  # a bare wall-clock figure is taken as it is
    facts = report.template_facts()
    small = report.template_facts(SweepMemorySize=128)
    first = {fn: measured for fn in facts["functions"]}
    idle = {"dynamodb": {"wru": 0, "rru": 0}, "sqs": {"billed_requests": 0}, "lambda": {"invocations": 0, "gb_s_modelled": 0},
            "s3": {"requests_by_op": {}}, "scheduler_fires": 0, "api_requests": 0, "log_bytes": 0}
    init_big = report.fixed_monthly(idle, first, facts, 1, "health")["cold starts (INIT billed)"]
    init_small = report.fixed_monthly(idle, first, small, 1, "health")["cold starts (INIT billed)"]
    # the sweep's share: its CPU part is the same GB-s at any size under one vCPU; only 0.2 s of waiting shrinks
    expected = 0.2 * (512 - 128) / 1024 * report.A["cold_starts_per_function_per_month"] * report.P["lambda_gb_s_arm64"]
    assert abs((init_big - init_small) - expected) < 1e-12


def test_the_sweeps_ticks_a_month_follow_the_template_and_a_5_minute_sweep_lowers_profile_a():
    """SweepIntervalMinutes (issue 25 (a)): the ticks a month are the template's schedule over the
    bench's month, not a stated figure, and (a)'s bill falls with them. Only the fixed lines move."""
    month_s = monthly.MONTH_DAYS * 86_400
    for minutes in (1, 2, 5, 10):
        facts = report.template_facts(SweepIntervalMinutes=minutes)
        assert facts["sweep_every_s"] == minutes * 60 and facts["sweep_interval_minutes"] == minutes
        assert facts["sweep_ticks_per_month"] == month_s / (minutes * 60)
    assert report.template_facts()["sweep_ticks_per_month"] == 43_200  # the default keeps the minute sweep
    mo, _ = _bills()
    a, b, c = mo["profiles"]
    by = a["by_sweep_interval"]
    assert list(by) == ["1", "2", "5", "10"]
    assert abs(by["1"]["total"] - a["total"]) < 1e-12  # the default row is the bill printed above it
    assert by["5"]["total"] < by["2"]["total"] < by["1"]["total"]
    assert by["5"]["sweep_ticks_per_month"] == 8_640
    # a tick costs the same at any interval: a fifth of the ticks is a fifth of their lines
    fixed_1 = report.fixed_monthly(report.figures(scenarios.idle_tick(backend="twin").window, report.template_facts(), per=1,
                                                  scheduler_fires=1), {}, report.template_facts(), 1, "health")
    saved = by["1"]["total"] - by["5"]["total"]
    ticks_lines = fixed_1["sweep ticks (DynamoDB, Lambda, Scheduler)"] + fixed_1["sweep tick logs"]
    assert abs(saved - ticks_lines * 4 / 5) < 0.01 * ticks_lines
    # every 10 minutes the sweep is past the stated keep-alive: a cold start at every tick
    assert by["10"]["sweep_cold_starts_per_month"] == 4_320 > by["5"]["sweep_cold_starts_per_month"]
    assert (b["by_sweep_interval"]["5"]["total"] < b["total"]) and (c["by_sweep_interval"]["5"]["total"] < c["total"])


def test_each_profile_pays_the_sweep_tick_of_its_own_schedules():
    """Every tick reads one watch per enabled schedule (missed fires, issue 16), so a profile's fixed
    month is priced from its own idle tick, measured at its number of schedules: the published
    deployment's two schedules cost its minute tick 6 read units fewer than the bench config's eight,
    and a thousand schedules cost a tick a BatchGetItem per hundred."""
    m = scenarios.scheduled_slot("morning-tokyo", backend="twin", name="3 targets")
    facts = report.template_facts()
    f = report.figures(m.window, facts, per=m.delivered, scheduler_fires=1)
    ref = {"per_cell": f, "dollars": report.dollars(f)}
    shared = scenarios.idle_tick(backend="twin")
    assert shared.detail["schedules"] == 8
    own = {p.key: scenarios.idle_tick(backend="twin", schedules=p.schedules) for p in monthly.profiles(report.A)}
    assert {k: v.detail["schedules"] for k, v in own.items()} == {"a": 2, "b": 30, "c": 1_111}
    details = {"3 targets": m.detail | {"delivered": m.delivered}}
    one = report.monthly_figures(ref, report.figures(shared.window, facts, per=1, scheduler_fires=1), {}, facts, 6, details)
    each = report.monthly_figures(ref, report.figures(shared.window, facts, per=1, scheduler_fires=1), {}, facts, 6, details,
                                  idle_by_profile=own)
    a_one, a_each = one["profiles"][0], each["profiles"][0]
    shared_rru = report.figures(shared.window, facts, per=1, scheduler_fires=1)["dynamodb"]["rru"]
    assert a_each["idle_tick"]["schedules"] == 2 and a_each["idle_tick"]["dynamodb_rru"] == shared_rru - 6
    ticks = facts["sweep_ticks_per_month"]
    line = "sweep ticks (DynamoDB, Lambda, Scheduler)"

    def usd(bill):
        return next(x["usd"] for x in bill["lines"] if x["name"] == line)

    assert abs((usd(a_one) - usd(a_each)) - 6 * ticks * report.P["dynamodb_rru"]) < 0.002  # the reads, and a little CPU
    c_tick = each["profiles"][2]["idle_tick"]
    assert c_tick["dynamodb_rru"] == shared_rru - 8 + 1_111 and c_tick["dynamodb_requests"] == 6 - 1 + 12
