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
    # the health profile watches with one alarm and one series; the full one with every alarm
    fixed_a = {line["name"]: line["usd"] for line in a["lines"] if line["fixed"]}
    assert fixed_a["CloudWatch alarms (AlarmProfile=health)"] == 0.10
    assert fixed_a["CloudWatch custom metrics (Health only)"] == 0.30
    fixed_c = {line["name"]: line["usd"] for line in c["lines"] if line["fixed"]}
    assert fixed_c["CloudWatch alarms (AlarmProfile=full)"] == report.template_facts()["alarms"] * 0.10
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
