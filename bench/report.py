"""``make bench``: what a delivered cell costs, priced the way AWS bills it.

    python bench/report.py [--json bench/report.json] [--quick]

Runs the workloads of ``scenarios`` through the real handlers on the embedded runtime (moto, and
the in-memory twins for the 100,000-slot ledger), meters every AWS request (``meter``), prices
them from ``prices.json`` (copied, with sources, from the team kit), and prints one report: per
delivered cell by slot size, the job API, the dollars per million delivered cells next to Step
Functions, Lambda durable functions and Temporal Cloud, the write units by ledger step, trigger
admission, the sweep against ledger size, the scale model and the cold start. Nothing is logged:
Powertools' output is counted (CloudWatch ingests it) and discarded. ``--quick`` skips the
100,000-slot ledger and runs fewer cold-start samples (the honesty tests use it).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT / "shared")]

import load  # noqa: E402
import monthly  # noqa: E402
import scenarios  # noqa: E402
from meter import Call  # noqa: E402

PRICES = json.loads((HERE / "prices.json").read_text())
P = {k: v["usd"] / v["per"] for k, v in PRICES["services"].items()}
A = {k: v["value"] for k, v in PRICES["assumptions"].items() if not k.startswith("_")}
MILLION = 1_000_000
MONTH_HOURS = 30 * 24  # the bench's month (monthly.MONTH_DAYS)
SQS_OPS = ("SendMessage", "SendMessageBatch", "ReceiveMessage", "DeleteMessage", "DeleteMessageBatch",
           "ChangeMessageVisibility", "ChangeMessageVisibilityBatch")
S3_PUT_TIER = {"PutObject", "CopyObject", "ListObjectsV2", "ListObjects", "DeleteObjects", "CreateMultipartUpload",
               "UploadPart", "CompleteMultipartUpload", "PostObject"}
S3_GET_TIER = {"GetObject", "HeadObject"}
S3_FREE = {"DeleteObject"}
STEP_ORDER = ("admit", "claim", "bind", "reserve", "intent", "outbox claim", "settle", "rollup", "outcome record",
              "index maintenance")


# -- template facts ---------------------------------------------------------------------------------


def _resolve(tpl: dict[str, Any], value: Any, params: dict[str, Any]) -> Any:
    """A property's value under ``params``: parameter Refs, the ``Has<X>`` conditions the
    concurrency knobs use (``!If [cond, !Ref p, !Ref AWS::NoValue]``) and a ``!FindInMap`` keyed
    by a parameter (the sweep's interval); None for AWS::NoValue."""
    if isinstance(value, dict) and "Ref" in value:
        return params.get(value["Ref"]) if value["Ref"] != "AWS::NoValue" else None
    if isinstance(value, dict) and "Fn::FindInMap" in value:
        mapping, top, second = (_resolve(tpl, v, params) for v in value["Fn::FindInMap"])
        return tpl["Mappings"][mapping][str(top)][second]
    if isinstance(value, dict) and "Fn::If" in value:
        name, yes, no = value["Fn::If"]
        test = tpl["Conditions"][name]["Fn::Not"][0]["Fn::Equals"]
        return _resolve(tpl, yes if str(_resolve(tpl, test[0], params)) != str(test[1]) else no, params)
    return value


def _int(value: Any) -> int | None:
    return None if value in (None, "") else int(value)


def template_facts(template: Path = ROOT / "template.yaml", **overrides: Any) -> dict[str, Any]:
    """What the template deploys, under its parameter defaults (or ``overrides``): each function's
    memory, architecture, timeout, event source batch and MaximumConcurrency, reserved concurrency,
    and the sweep's schedule rate. ``template``: another copy (the scale model's own test)."""
    from pixivflow.local.template import load_template

    tpl = load_template(template)
    params = {name: p.get("Default") for name, p in tpl["Parameters"].items()} | overrides
    glob = tpl.get("Globals", {}).get("Function", {})
    functions: dict[str, dict[str, Any]] = {}
    alarms = 0
    full_only = 0  # alarms that exist only with AlarmProfile=full
    # CloudWatch bills an alarm per metric it reads: an alarm on an expression (HealthAlarm) pays
    # for each of its inputs (bench/prices.json cloudwatch_alarm_month)
    alarm_metrics = {"health": 0, "full": 0}
    for logical, res in tpl["Resources"].items():
        if res["Type"] == "AWS::CloudWatch::Alarm":
            alarms += 1
            full_only += res.get("Condition") == "FullAlarms"
            reads = sum(1 for m in res["Properties"].get("Metrics") or [] if "MetricStat" in m) or 1
            alarm_metrics["full"] += reads
            alarm_metrics["health"] += 0 if res.get("Condition") == "FullAlarms" else reads
        if res["Type"] != "AWS::Serverless::Function":
            continue
        props = res.get("Properties", {})
        name = Path(str(props.get("CodeUri", ""))).name
        esm = next((e["Properties"] for e in (props.get("Events") or {}).values() if e.get("Type") == "SQS"), {})
        functions[name] = {
            "logical_id": logical,
            "memory_mb": int(_resolve(tpl, props.get("MemorySize", glob.get("MemorySize", 128)), params)),
            "arch": (props.get("Architectures") or glob.get("Architectures") or ["x86_64"])[0],
            "timeout_s": int(_resolve(tpl, props.get("Timeout", glob.get("Timeout", 3)), params)),
            "max_concurrency": _int(_resolve(tpl, (esm.get("ScalingConfig") or {}).get("MaximumConcurrency"), params)),
            "max_concurrency_parameter": ((esm.get("ScalingConfig") or {}).get("MaximumConcurrency") or {}).get("Ref")
            if isinstance((esm.get("ScalingConfig") or {}).get("MaximumConcurrency"), dict) else None,
            "reserved_concurrency": _int(_resolve(tpl, props.get("ReservedConcurrentExecutions"), params)),
            "batch_size": esm.get("BatchSize"),
        }
    every_s = _sweep_rate_s(tpl, params)
    return {"functions": functions, "alarms": alarms, "alarms_by_profile": {"health": alarms - full_only, "full": alarms},
            "alarm_metrics_by_profile": alarm_metrics,
            "sweep_every_s": every_s,
            # what the fixed lines are billed on: one tick per interval for the bench's month
            "sweep_ticks_per_month": monthly.MONTH_DAYS * 86_400 / every_s,
            "sweep_interval_minutes": int(params["SweepIntervalMinutes"]),
            "sweep_intervals_allowed": [int(v) for v in tpl["Parameters"]["SweepIntervalMinutes"]["AllowedValues"]],
            "retention_days": int(tpl["Parameters"]["RetentionDays"]["Default"]),
            "log_retention_days": int(tpl["Parameters"]["LogRetentionDays"]["Default"])}


def _sweep_rate_s(tpl: dict[str, Any], params: dict[str, Any]) -> int:
    """Seconds between the stall sweep's ticks: its ScheduleV2 event's ``rate(N unit)`` as the
    parameters deploy it (the expression is read, not the parameter, so the figure is the schedule's)."""
    props = next(r["Properties"] for r in tpl["Resources"].values() if r["Type"] == "AWS::Serverless::Function"
                 and Path(str(r["Properties"].get("CodeUri", ""))).name == "stall_sweep")
    [expr] = [_resolve(tpl, e["Properties"]["ScheduleExpression"], params) for e in props["Events"].values()
              if e["Type"] == "ScheduleV2"]
    count, unit = expr.removeprefix("rate(").removesuffix(")").split()
    return int(count) * {"minute": 60, "minutes": 60, "hour": 3600, "hours": 3600}[unit]


# -- per-window figures -----------------------------------------------------------------------------


def lambda_figures(window: scenarios.Window, facts: dict[str, Any]) -> dict[str, Any]:
    """Invocations and GB-seconds: measured here (handler wall time on moto, an estimate) and
    modelled (own compute measured here + every AWS request at an assumed in-Region latency + the
    route's answer time), the latter priced."""
    lat = A["latency_ms"]
    by_fn: dict[str, list[Call]] = {}
    for c in window.calls:
        by_fn.setdefault(c.function or "", []).append(c)
    invocations = Counter(i.function for i in window.invocations)
    measured = modelled = 0.0
    for inv in window.invocations:
        memory_gb = facts["functions"].get(inv.function, {}).get("memory_mb", 512) / 1024
        measured += math.ceil(inv.seconds * 1000) / 1000 * memory_gb
    for fn, count in invocations.items():
        memory_mb = facts["functions"].get(fn, {}).get("memory_mb", 512)
        memory_gb = memory_mb / 1024
        # own compute: the handler thread's CPU with the twins'/moto's and the source's taken out,
        # stretched by the memory's share of a vCPU (load.ONE_VCPU_MB: 1 vCPU at 1,769 MB)
        share = min(1.0, memory_mb / load.ONE_VCPU_MB)
        own = sum(max(0.0, i.cpu_seconds - i.outside_cpu_seconds) for i in window.invocations if i.function == fn) / share
        wait_ms = 0.0
        for c in by_fn.get(fn, []):
            if c.service == "dynamodb":
                wait_ms += lat["dynamodb"]
            elif c.service == "sqs" and c.step != "esm":
                wait_ms += lat["sqs"]  # ESM polling runs outside the function
            elif c.service == "s3":
                wait_ms += lat["s3_put"] if c.op in S3_PUT_TIER or c.op in S3_FREE else lat["s3_get"]
        if fn == "deliver":
            wait_ms += lat["route_post"] * window.posts
        modelled += (own + wait_ms / 1000) * memory_gb
    return {"invocations": dict(invocations), "gb_s_measured": measured, "gb_s_modelled": modelled}


def figures(window: scenarios.Window, facts: dict[str, Any], *, per: int, scheduler_fires: int = 0,
            api_requests: int = 0) -> dict[str, Any]:
    """Everything a window asked of AWS, divided by ``per`` (delivered cells, or 1)."""
    per = max(1, per)
    ddb = [c for c in window.calls if c.service == "dynamodb"]
    sqs = [c for c in window.calls if c.service == "sqs" and c.step != "idle"]
    s3 = [c for c in window.calls if c.service == "s3"]
    lam = lambda_figures(window, facts)
    out = {
        "dynamodb": {
            "wru": sum(c.wru + c.index_wru for c in ddb) / per,
            "rru": sum(c.rru for c in ddb) / per,
            "requests": sum(1 for _ in ddb) / per,
            "requests_by_op": {op: n / per for op, n in sorted(Counter(c.op for c in ddb).items())},
            "wru_by_step": {k: v / per for k, v in _by_step(ddb).items()},
        },
        "sqs": {
            "billed_requests": sum(c.chunks for c in sqs) / per,
            "requests_by_op": {op: n / per for op, n in sorted(Counter(c.op for c in sqs).items())},
            "messages_sent": sum(c.messages for c in sqs if c.op.startswith("Send")) / per,
        },
        "lambda": {
            "invocations": sum(lam["invocations"].values()) / per,
            "invocations_by_function": {k: v / per for k, v in sorted(lam["invocations"].items())},
            "gb_s_measured": lam["gb_s_measured"] / per,
            "gb_s_modelled": lam["gb_s_modelled"] / per,
        },
        "s3": {"requests_by_op": {op: n / per for op, n in sorted(Counter(c.op for c in s3).items())}},
        "scheduler_fires": scheduler_fires / per,
        "api_requests": api_requests / per,
        "log_bytes": (window.log_bytes + A["platform_log_bytes_per_invocation"] * len(window.invocations)) / per,
    }
    return out


def _by_step(calls: list[Call]) -> dict[str, float]:
    out: dict[str, float] = {}
    for c in calls:
        if c.wru:
            out[c.step] = out.get(c.step, 0) + c.wru
        if c.index_wru:
            out["index maintenance"] = out.get("index maintenance", 0) + c.index_wru
    return out


def dollars(f: dict[str, Any], arch: str = "arm64") -> dict[str, float]:
    """Dollars per million of whatever ``f`` is per one of (cells, jobs, pages)."""
    s3_ops = f["s3"]["requests_by_op"]
    gb_s = P["lambda_gb_s_arm64" if arch == "arm64" else "lambda_gb_s_x86"]
    return {
        "DynamoDB writes": f["dynamodb"]["wru"] * P["dynamodb_wru"] * MILLION,
        "DynamoDB reads": f["dynamodb"]["rru"] * P["dynamodb_rru"] * MILLION,
        "SQS": f["sqs"]["billed_requests"] * P["sqs_request"] * MILLION,
        "Lambda requests": f["lambda"]["invocations"] * P["lambda_request"] * MILLION,
        "Lambda compute": f["lambda"]["gb_s_modelled"] * gb_s * MILLION,
        "S3 requests": (sum(n for op, n in s3_ops.items() if op in S3_PUT_TIER) * P["s3_put"]
                        + sum(n for op, n in s3_ops.items() if op in S3_GET_TIER) * P["s3_get"]) * MILLION,
        "EventBridge Scheduler": f["scheduler_fires"] * P["scheduler_invocation"] * MILLION,
        "API Gateway": f["api_requests"] * P["api_gateway_http_request"] * MILLION,
        "CloudWatch Logs": f["log_bytes"] / 1e9 * P["cloudwatch_logs_ingest_gb"] * MILLION,
    }


def init_seconds(first: Any, memory_mb: int) -> float:
    """A cold start's billed seconds on Lambda at ``memory_mb``: its CPU (INIT + first invocation,
    measured by bench/coldstart.py) stretched by the memory's share of a vCPU as every other compute
    figure here is (load.ONE_VCPU_MB), plus the time it waited (wall minus CPU: its AWS calls), which
    no size changes. A bare number is a wall-clock figure taken as it is (what callers without a
    cold-start run pass)."""
    if not isinstance(first, dict):
        return float(first)
    wall, cpu = first["wall_s"], min(first["cpu_s"], first["wall_s"])
    return cpu / min(1.0, memory_mb / load.ONE_VCPU_MB) + (wall - cpu)


def fixed_monthly(idle: dict[str, Any], first_invocation_s: dict[str, Any], facts: dict[str, Any],
                  metric_series: int, alarm_profile: str = "full") -> dict[str, float]:
    """What the stack costs a month whatever it delivers. ``first_invocation_s``: per function, its
    cold start as ``{"wall_s", "cpu_s"}`` (or a bare wall-clock figure; 1 s when unmeasured)."""
    ticks = facts["sweep_ticks_per_month"]
    tick = dollars(idle)
    polls = 2 * A["esm_pollers_per_queue"] * (30 * 86_400 / A["esm_poll_wait_s"])
    init_gb_s = 0.0
    for fn, spec in facts["functions"].items():
        memory_mb = spec.get("memory_mb", 512)
        init_gb_s += init_seconds(first_invocation_s.get(fn, 1.0), memory_mb) * memory_mb / 1024 * cold_starts(fn, facts)
    return {
        "sweep ticks (DynamoDB, Lambda, Scheduler)": sum(v for k, v in tick.items() if k != "CloudWatch Logs") / MILLION * ticks,
        "sweep tick logs": tick["CloudWatch Logs"] / MILLION * ticks,
        "idle queue polling (2 ESMs)": polls * P["sqs_request"],
        "cold starts (INIT billed)": init_gb_s * P["lambda_gb_s_arm64"],
        # the health profile's one series is published only in a minute that counts a problem, and
        # a custom metric is billed by the hours it is published (prices.json)
        f"CloudWatch custom metrics ({'Health, unhealthy hours only' if alarm_profile == 'health' else 'EMF series seen'})":
            (A["health_hours_published_per_month"] / MONTH_HOURS if alarm_profile == "health" else metric_series)
            * P["cloudwatch_custom_metric_month"],
        f"CloudWatch alarms (AlarmProfile={alarm_profile})":
            facts["alarm_metrics_by_profile"][alarm_profile] * P["cloudwatch_alarm_month"],
    }


def cold_starts(function: str, facts: dict[str, Any]) -> float:
    """New execution environments a function starts a month. A sweep whose ticks are further apart
    than Lambda keeps an idle environment (a stated assumption) starts one at every tick: the
    interval's saving on ticks is then partly paid back in INIT."""
    if function == "stall_sweep" and facts["sweep_every_s"] >= A["lambda_idle_keepalive_s"]:
        return max(A["cold_starts_per_function_per_month"], facts["sweep_ticks_per_month"])
    return A["cold_starts_per_function_per_month"]


def floor_statement(per_cell: dict[str, Any], lines: dict[str, float]) -> str:
    """What no saving inside the design can go under, from this run's own figures."""
    puts = per_cell["s3"]["requests_by_op"].get("PutObject", 0)
    s3_floor = 1 * P["s3_put"] * MILLION  # a one-file work: its one PUT, stored before its intent
    # the writes a crash-safe cell cannot skip (docs/explanation/ledger.md): claim, bind, reserve, intent, hand-off,
    # outbox claim, settle the row, settle the cell (8 x 1 KB), plus the slot's own (create + index,
    # close + index, the outcome record) spread over its cells
    ddb_floor = 8 * P["dynamodb_wru"] * MILLION
    return (f"Floor: S3 sets it. Every work is stored before its intent: one PUT per file (the file "
            f"list rides in the intent), {puts:.2f} PUTs per cell here, ${s3_floor:.2f} for a one-file work alone at ${P['s3_put'] * 1000:.3f} "
            f"per 1,000 PUTs. Next DynamoDB: the 8 single-item writes a crash-safe cell cannot skip are "
            f"${ddb_floor:.2f}, ${lines['DynamoDB writes']:.2f} with the slot's own writes. Those two alone are "
            f"${s3_floor + ddb_floor:.2f} > $10.")


# -- a month ------------------------------------------------------------------------------------------


def monthly_figures(ref_cells: dict[str, Any], idle_f: dict[str, Any], first: dict[str, float], facts: dict[str, Any],
                    series: int, details: dict[str, Any], load_run: dict[str, Any] | None = None,
                    compute: dict[str, Any] | None = None, idle_window: scenarios.Window | None = None,
                    idle_by_profile: dict[str, scenarios.Measured] | None = None) -> dict[str, Any]:
    """The three monthly profiles, from this run's per-cell figures (3-target slots) and
    the template's facts; plus the stored bytes measured here. With the long run (``load_run``,
    ``compute``), Lambda compute is its measured CPU per cell (catalogue time: the Pixiv wait is its
    own line) and the Pixiv requests per cell are the ones the long run counted. ``idle_by_profile``:
    each profile's own idle tick (measured at its number of schedules); without it, ``idle_f`` and
    ``idle_window`` serve every profile."""
    detail = details["3 targets"]
    ledger_per_cell = detail["ledger_bytes"] / max(1, detail["delivered"])
    measured_work = detail["artifact_bytes_all_slots"] / max(1, 2 * detail["delivered"])  # warm-up + measured slot
    memory_gb = facts["functions"].get("execute", {}).get("memory_mb", 512) / 1024
    per_million = dict(ref_cells["dollars"])
    a = A
    if compute is not None and load_run is not None:
        per_million["Lambda compute"] = compute["catalog"]["gb_s_per_cell"] * P["lambda_gb_s_arm64"] * MILLION
        requests = sum(load_run["run"]["source_calls_per_cell"].values())
        a = {**A, "pixiv_seconds_per_cell": {**A["pixiv_seconds_per_cell"], "requests": requests}}
    ticks: dict[str, tuple[dict[str, Any], scenarios.Window | None]] = {
        p.key: (idle_f, idle_window) if idle_by_profile is None
        else (figures(idle_by_profile[p.key].window, facts, per=1, scheduler_fires=1), idle_by_profile[p.key].window)
        for p in monthly.profiles(a)}
    bills = []
    for profile in monthly.profiles(a):
        tick = ticks[profile.key][0]
        fixed = fixed_monthly(tick, first, facts, series, profile.alarm_profile)
        bills.append(monthly.bill(profile, per_million=per_million, per_cell=ref_cells["per_cell"], prices=P, a=a,
                                  fixed=fixed, ledger_bytes_per_cell=ledger_per_cell, memory_gb=memory_gb,
                                  retention_days_ledger=facts["retention_days"]))
        # the same month at each SweepIntervalMinutes the template allows: only the fixed lines move
        by_interval = {}
        for minutes in facts["sweep_intervals_allowed"]:
            f = template_facts(SweepIntervalMinutes=minutes)
            b = monthly.bill(profile, per_million=per_million, per_cell=ref_cells["per_cell"], prices=P, a=a,
                             fixed=fixed_monthly(tick, first, f, series, profile.alarm_profile),
                             ledger_bytes_per_cell=ledger_per_cell, memory_gb=memory_gb, retention_days_ledger=f["retention_days"])
            by_interval[str(minutes)] = {"total": b["total"], "fixed": b["fixed"], "sweep_ticks_per_month": f["sweep_ticks_per_month"],
                                         "sweep_cold_starts_per_month": cold_starts("stall_sweep", f)}
        bills[-1]["by_sweep_interval"] = by_interval
        bills[-1]["idle_tick"] = {"schedules": profile.schedules, "dynamodb_rru": tick["dynamodb"]["rru"],
                                  "dynamodb_requests": tick["dynamodb"]["requests"], "sqs_requests": tick["sqs"]["billed_requests"],
                                  "gb_s_modelled": tick["lambda"]["gb_s_modelled"]}
    variants = {}
    if compute is not None and load_run is not None:
        variants = {p.key: what_it_would_take([p], bills, per_million, ref_cells, ticks[p.key][0], first, facts, series,
                                              ledger_per_cell, load_run, a, ticks[p.key][1])[p.key] for p in monthly.profiles(a)}
    for b in bills:
        b["free_tier"] = free_tier_credit(b, ticks[b["key"]][0], facts)
        b["total_with_free_tier"] = b["total"] - sum(b["free_tier"].values())
        b["variants"] = variants.get(b["key"], {})
    items_per_cell = detail["ledger_items"] / max(1, detail["delivered"])
    days = facts["retention_days"] + A["ttl_deletion_lag_days"]
    table = {b["key"]: {"items": round(b["cells_per_month"] / monthly.MONTH_DAYS * days * items_per_cell),
                        "gb": b["cells_per_month"] / monthly.MONTH_DAYS * days * ledger_per_cell / 1e9,
                        "days_kept": days} for b in bills}
    return {"profiles": bills, "ledger_bytes_per_cell": ledger_per_cell, "ledger_items_per_slot": detail["ledger_items"],
            "ledger_items_per_cell": items_per_cell, "steady_state_table": table,
            "measured_work_bytes": measured_work, "stated_work_bytes": A["work_bytes"],
            "unpriced": monthly.check_every_line_priced_or_named(bills),
            "goals": {"a": 1.0, "c_per_million": 15.0}}


FREE = A["always_free"]


def free_tier_credit(bill: dict[str, Any], idle_f: dict[str, Any], facts: dict[str, Any]) -> dict[str, float]:
    """What the always-free tiers the kit states (SQS 1M requests, Lambda 1M requests and 400,000
    GB-s, Scheduler 14M invocations a month) take off this bill, service by service: shown beside
    the list price, never folded into it. The sweep's line is split by service from its tick."""
    usd = {line["name"]: line["usd"] or 0.0 for line in bill["lines"]}
    tick = dollars(idle_f)
    ticks = facts["sweep_ticks_per_month"]
    sweep = {k: v / MILLION * ticks for k, v in tick.items()}
    sqs = usd.get("SQS", 0) + usd.get("idle queue polling (2 ESMs)", 0) + sweep["SQS"]
    requests = usd.get("Lambda requests", 0) + sweep["Lambda requests"]
    gb_s = (usd.get("Lambda compute", 0) + usd.get("Lambda waiting on Pixiv (assumed)", 0)
            + usd.get("cold starts (INIT billed)", 0) + sweep["Lambda compute"])
    scheduler = usd.get("EventBridge Scheduler", 0) + sweep["EventBridge Scheduler"]
    return {f"SQS ({FREE['sqs_requests']:,} requests)": min(sqs, FREE["sqs_requests"] * P["sqs_request"]),
            f"Lambda ({FREE['lambda_requests']:,} requests)": min(requests, FREE["lambda_requests"] * P["lambda_request"]),
            f"Lambda ({FREE['lambda_gb_s']:,} GB-s)": min(gb_s, FREE["lambda_gb_s"] * P["lambda_gb_s_arm64"]),
            f"EventBridge Scheduler ({FREE['scheduler_invocations']:,} invocations)":
                min(scheduler, FREE["scheduler_invocations"] * P["scheduler_invocation"])}


def what_it_would_take(profiles: list[monthly.Profile], bills: list[dict[str, Any]], per_million: dict[str, float],
                       ref_cells: dict[str, Any], idle_f: dict[str, Any], first: dict[str, float], facts: dict[str, Any],
                       series: int, ledger_per_cell: float, load_run: dict[str, Any], a: dict[str, Any],
                       idle_window: scenarios.Window | None = None) -> dict[str, Any]:
    """The same month under each lever, each priced by the same arithmetic: a smaller
    execute memory (ExecuteMemorySize: the Pixiv wait is billed by the GB), the catalogue source
    (no Pixiv wait), and both; with the idle tick's window, a smaller sweep (SweepMemorySize: the
    minute's tick re-priced from its own measured CPU and requests at that size, and its INIT)."""
    import dataclasses

    out: dict[str, Any] = {}
    sweep_sizes = (128, 256) if idle_window is not None else ()
    for profile in profiles:
        rows = {}
        levers: list[tuple[str, dict[str, Any], str]] = [
            ("ExecuteMemorySize=128", {"ExecuteMemorySize": 128}, profile.works_from), ("catalogue source", {}, "catalog"),
            ("catalogue source + ExecuteMemorySize=128", {"ExecuteMemorySize": 128}, "catalog")]
        levers += [(f"SweepMemorySize={mb}", {"SweepMemorySize": mb}, profile.works_from) for mb in sweep_sizes]
        for label, knobs, source in levers:
            f = template_facts(**knobs) if knobs else facts
            tick = figures(idle_window, f, per=1, scheduler_fires=1) if idle_window is not None and "SweepMemorySize" in knobs else idle_f
            lines = dict(per_million)
            lines["Lambda compute"] = load.compute_model(load_run, f, A, source="catalog")["gb_s_per_cell"] * P["lambda_gb_s_arm64"] * MILLION
            p = dataclasses.replace(profile, works_from=source)
            fixed = fixed_monthly(tick, first, f, series, profile.alarm_profile)
            b = monthly.bill(p, per_million=lines, per_cell=ref_cells["per_cell"], prices=P, a=a, fixed=fixed,
                             ledger_bytes_per_cell=ledger_per_cell, memory_gb=f["functions"]["execute"]["memory_mb"] / 1024,
                             retention_days_ledger=f["retention_days"])
            rows[label] = {"total": b["total"], "per_million_cells": b["per_million_cells"],
                           "sweep_tick_gb_s": tick["lambda"]["gb_s_modelled"]}
        out[profile.key] = rows
    return out


# -- comparisons ------------------------------------------------------------------------------------


def alternatives(targets: int, ours: dict[str, float], work_lines: dict[str, float]) -> list[dict[str, Any]]:
    """The same work (a ``targets``-target slot, one work per cell, one route) on the orchestrators an
    operator would pick instead. Their orchestration charge, counted by each one's own rule, plus
    what they need besides: a Lambda invocation per task, the Scheduler fire, one conditional
    DynamoDB put per cell for the cross-slot route dedupe (it spans workflows) and the same
    work itself (Lambda compute, S3, logs)."""
    per_slot = 1 / targets
    dedupe = 1 * P["dynamodb_wru"] * MILLION
    fire = per_slot * P["scheduler_invocation"] * MILLION
    work = sum(work_lines.values())

    def row(name, rule, units, price, invocations):
        orchestration = units * price * MILLION + invocations * P["lambda_request"] * MILLION + fire + dedupe
        return {"name": name, "rule": rule, "units_per_cell": units, "orchestration": orchestration,
                "all_in": orchestration + work}

    sfn_units = 5 + 4 * per_slot
    durable_units = 4 + 2 * per_slot
    temporal_units = 4 + 3 * per_slot
    return [
        row("Step Functions Standard",
            "state transitions: per cell 5 (select+bind+reserve, download+store, deliver, ACK choice, settle), "
            f"per slot 4 (admit, map, rollup+record, succeed); each retry +1 (none here) = {sfn_units:.2f}/cell",
            sfn_units, P["step_functions_standard_transition"], 4 + 2 * per_slot),
        row("Lambda durable functions",
            "durable operations: per cell 4 steps (select+bind+reserve, download+store, deliver, settle), per slot 2 "
            f"(admit, rollup+record); waits and callbacks +1 each (none here) = {durable_units:.2f}/cell; "
            "checkpoint data: price not in the kit",
            durable_units, P["lambda_durable_operation"], per_slot),
        row("Temporal Cloud",
            "actions: per cell 4 activities, per slot workflow start + 2 activities; heartbeats, timers and retries "
            f"+1 each (none here) = {temporal_units:.2f}/cell at the $50/M tier; workers' hosting: price not in the kit",
            temporal_units, P["temporal_cloud_action"], 4 + 2 * per_slot),
    ]


# -- scale --------------------------------------------------------------------------------------


def sweep_live_cost(measured: dict[int, Any], facts: dict[str, Any]) -> dict[str, Any]:
    """What a live slot costs one sweep tick, and what a tick costs with none, from two measured
    ticks (``scenarios.sweep_live``: 0 and n live slots): DynamoDB requests, read units and the
    function's own CPU (the twins' taken out), scaled to the stall_sweep memory's vCPU share."""
    share = min(1.0, facts["functions"].get("stall_sweep", {}).get("memory_mb", 512) / load.ONE_VCPU_MB)

    def tick(m: Any) -> dict[str, float]:
        ddb = [c for c in m.window.calls if c.service == "dynamodb"]
        index = [c for c in ddb if c.op == "Query" and c.method.split(":")[0] == "active_page"]
        cpu = sum(max(0.0, i.cpu_seconds - i.outside_cpu_seconds) for i in m.window.invocations) / share
        return {"requests": len(ddb), "rru": sum(c.rru for c in ddb), "index_rru": sum(c.rru for c in index), "cpu_s": cpu}

    none, n = min(measured), max(measured)
    base, full = tick(measured[none]), tick(measured[n])
    per_slot = {k: (full[k] - base[k]) / (n - none) for k in base}
    per_slot["index_rru"] = full["index_rru"] / n  # an upper bound: each query's minimum charge spread over n rows
    return {"live_measured": n, "per_slot": per_slot, "fixed": base, "vcpu_share": share}


def sweep_rows(live_slots: float, cost: dict[str, Any], facts: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The sweep at ``live_slots``: its tick against the function's timeout, and its pass
    over the live slots against the shortest wait its rules act after. Everything from the code's
    constants, the template (timeout, schedule rate) and the measured cost of a live slot."""
    from pixivflow.services.timing import REDISPATCH_AFTER_MS, REDRIVE_GRACE_MS
    from pixivflow.services.sweep import MAX_SLOTS_PER_TICK, SWEEP_BUDGET_MS

    lat = A["latency_ms"]["dynamodb"] / 1000
    per, fixed = cost["per_slot"], cost["fixed"]
    slot_s = per["requests"] * lat + per["cpu_s"]  # one live slot, read and judged, in sequence
    fixed_s = fixed["requests"] * lat + fixed["cpu_s"]  # the rest of a tick: index heads, re-drive, watches, health
    budget_s, timeout_s, every_s = SWEEP_BUDGET_MS / 1000, facts["functions"]["stall_sweep"]["timeout_s"], facts["sweep_every_s"]
    per_tick = min(MAX_SLOTS_PER_TICK, budget_s / slot_s)  # live slots one tick visits at most
    pass_s = live_slots * slot_s
    tick_s = min(pass_s, budget_s + slot_s) + fixed_s
    wait_ms = min(REDISPATCH_AFTER_MS, REDRIVE_GRACE_MS)  # the shortest wait after which a rule acts on a slot
    ticks_in_wait = wait_ms / 1000 / every_s
    pass_ticks = live_slots / per_tick  # ticks of budget one pass needs (<= 1: every tick is a whole pass)
    rows = [
        {"limit": f"the sweep: a tick's time (StallSweepFunction Timeout {timeout_s} s = its lease; budget "
                  f"{budget_s:.0f} s, then {fixed_s:.1f} s of fixed work)",
         "need": tick_s, "have": timeout_s,
         "raise": f"none needed: the walk stops at its budget ({budget_s:.0f} s) and the next tick resumes at its cursor"},
        {"limit": f"the sweep: one pass over the live slots (s; {slot_s * 1000:.1f} ms a slot) vs the walk time of the "
                  f"ticks inside the rules' shortest wait ({wait_ms // 1000} s: {ticks_in_wait:g} ticks x {budget_s:.0f} s)",
         "need": pass_s, "have": ticks_in_wait * budget_s,
         "raise": f"one pass fits one tick up to {per_tick:,.0f} live slots; beyond, a pass spans ticks and recovery and "
                  "re-drive act up to that many minutes late (per-shard leases and one schedule per shard would run them "
                  "in parallel)"},
    ]
    model = {"live_slots": live_slots, "slot_ms": slot_s * 1000, "fixed_s": fixed_s, "slots_per_tick": per_tick,
             "pass_s": pass_s, "tick_s": tick_s, "budget_s": budget_s, "timeout_s": timeout_s, "every_s": every_s,
             "pass_ticks": pass_ticks, "wait_s": wait_ms / 1000, "measured_live": cost["live_measured"]}
    return rows, model


def scale_model(ten: dict[str, Any], ten_calls: list[Call], sweep_cost: dict[str, Any], facts: dict[str, Any],
                targets: int, compute: dict[str, Any]) -> dict[str, Any]:
    """1,000 slot admissions/s of 10-target slots = 10,000 cell executions/s, from the measured
    request model of the 10-target slot, the long run's Lambda time per cell (``compute``), the
    sweep's measured cost of a live slot (``sweep_live_cost``) and the template's knobs. Computed,
    not load-tested."""
    from pixivflow.adapters.dynamo_ledger import SHARDS

    admissions, cells = 1_000, 10_000
    shards = SHARDS
    # Lambda seconds per cell, from the long run: the catalogue source (the one that can feed this
    # rate: Pixiv accounts cannot, see ``feed``), and the deliver function's own per cell
    model = compute["catalog"]["functions"]
    exec_s, deliver_s = model["execute"]["seconds_per_cell"], model["deliver"]["seconds_per_cell"]
    # a slot's cells run in parallel: its writes land on its partition within about one cell's
    # execute + deliver time (at least a second: DynamoDB's per-partition limit is per second)
    burst_s = max(1.0, exec_s + deliver_s)
    per_slot = {"by_pk": Counter(), "index": Counter()}
    for c in ten_calls:
        if c.service != "dynamodb":
            continue
        kind = c.method.split(":")[0]
        if c.wru:
            pk = "SLOT# (one slot's partition)" if kind not in ("reserve_work", "release_work_reservation") else "WORK# (one item per route and work)"
            per_slot["by_pk"][pk] += c.wru
        if c.index_wru:
            index = "ActiveSlots" if kind in ("create_slot", "finish_slot", "leave_active_index", "terminalise_slot") else "DueOutbox"
            per_slot["index"][index] += c.index_wru
    rows = []
    slot_partition_wru = per_slot["by_pk"]["SLOT# (one slot's partition)"]
    rows.append({"key": f"SLOT#<slotId> (10-target slot, its cells in parallel, {burst_s:.1f} s)",
                 "wcu_s": slot_partition_wru / burst_s,
                 "limit": 1000, "note": "each slot its own key: 1,000 slots/s spread over 1,000 partitions"})
    rows.append({"key": f"SLOT#<slotId> (90-target slot, {burst_s:.1f} s)", "wcu_s": slot_partition_wru / targets * 90 / burst_s,
                 "limit": 1000, "note": "the largest slot (90 targets): a 1 s burst, once; over 50% -> cells in groups of 30 on "
                                        "SLOT#<id>#<k> keep each under 25% (designed in docs/explanation/scale.md, not built)"})
    for index, wru in sorted(per_slot["index"].items()):
        rate = wru * admissions / shards
        rows.append({"key": f"{index} shard (1 of {shards})", "wcu_s": rate, "limit": 1000,
                     "note": f"{wru:.0f} index writes per slot x {admissions}/s / {shards} shards"})
    if "DueOutbox" not in per_slot["index"]:
        rows.append({"key": f"DueOutbox shard (1 of {shards})", "wcu_s": 0.0, "limit": 1000,
                     "note": "delivery rows no longer enter it (found through their open slot); jobs' callback rows do"})
    rows.append({"key": "WORK#<route>#<type>#<workId> (a work every slot wants)", "wcu_s": 1.0, "rcu_s": admissions * 0.5,
                 "limit": 1000, "note": "worst case, every admission on one tag: each reads the owner (eventually consistent); "
                                        "one reserves, a stale reader's refused put is billed 1 WCU"})
    every_s = facts["sweep_every_s"]
    rows.append({"key": "SWEEP#LEASE", "wcu_s": 2 / every_s, "limit": 1000,
                 "note": f"taken and released once a tick (every {every_s} s), the walk's cursor on the release"})
    exec_fn, deliver_fn = facts["functions"].get("execute", {}), facts["functions"].get("deliver", {})
    trigger_s = model.get("trigger", {}).get("seconds_per_cell", 0.0) * targets  # per admission
    exec_need, deliver_need = cells * exec_s, cells * deliver_s
    concurrency = exec_need
    gate_reads = concurrency / 5  # each warm execute container re-reads the gate every 5 s
    rows.append({"key": "PIXIV#<accountId>/GATE (one Pixiv account)", "wcu_s": 0.0, "rcu_s": gate_reads, "limit": 3000,
                 "note": "a consistent GetItem per container per 5 s; writes only on a 429 (conditional, once per penalty)"})
    sqs_rps = ten["sqs"]["billed_requests"] * cells
    # a slot is live from its admission until its last cell settles: its cells run in parallel,
    # so about one cell's execute + deliver time (the long run's), rounded up to whole seconds
    slot_s = math.ceil(exec_s + deliver_s)
    live_slots = admissions * slot_s
    sweep_limits, sweep = sweep_rows(live_slots, sweep_cost, facts)
    # the walk reads one shard at a time, a slot every slot_ms: its index rows and each slot's partition
    per = sweep_cost["per_slot"]
    rows.append({"key": f"ActiveSlots shard (1 of {shards}), the sweep's walk", "wcu_s": 0.0,
                 "rcu_s": per["index_rru"] / (sweep["slot_ms"] / 1000), "limit": 3000,
                 "note": f"one shard at a time, a row every {sweep['slot_ms']:.1f} ms ({per['index_rru']:.2f} RRU a row "
                         "at most, measured)"})
    rows.append({"key": "SLOT#<slotId>, read by the sweep", "wcu_s": 0.0, "rcu_s": per["rru"] / every_s, "limit": 3000,
                 "note": f"{per['requests']:.0f} consistent read ({per['rru']:.1f} RRU) of each live slot once a tick"})
    for r in rows:
        r["share"] = max(r.get("wcu_s", 0) / 1000, r.get("rcu_s", 0) / 3000)
    esm_max = 1000  # ScalingConfig.MaximumConcurrency's range is 2 to 1,000 (Lambda API reference)
    account_quota = 1000  # Service Quotas "Concurrent executions" (L-B99A9384), default 1,000 per Region
    lambda_need = exec_need + deliver_need + admissions * trigger_s
    exec_param = exec_fn.get("max_concurrency_parameter") or "ExecuteMaxConcurrency"
    deliver_param = deliver_fn.get("max_concurrency_parameter") or "DeliverMaxConcurrency"
    limits = [
        {"limit": f"execute ESM MaximumConcurrency ({exec_param}={exec_fn.get('max_concurrency')})", "need": exec_need,
         "have": exec_fn.get("max_concurrency") or esm_max,
         "raise": f"{exec_param}={min(esm_max, math.ceil(exec_need)):,}"
                  + ("" if exec_need <= esm_max else f" (the most one ESM takes: {math.ceil(exec_need / esm_max)} "
                                                     "execution queues, or fewer seconds a cell)")},
        {"limit": f"deliver ESM MaximumConcurrency ({deliver_param}={deliver_fn.get('max_concurrency')})", "need": deliver_need,
         "have": deliver_fn.get("max_concurrency") or esm_max,
         "raise": f"{deliver_param}={min(esm_max, math.ceil(deliver_need)):,}"
                  + ("" if deliver_need <= esm_max else f" ({math.ceil(deliver_need / esm_max)} outbox queues)")},
        {"limit": "Lambda Concurrent executions (Service Quotas L-B99A9384, default 1,000)", "need": lambda_need,
         "have": account_quota,
         "raise": f"Service Quotas request to {math.ceil(lambda_need / 0.8 / 1000) * 1000:,} (80% headroom); then "
                  "ExecuteReservedConcurrency / DeliverReservedConcurrency at their MaximumConcurrency"},
        {"limit": "EventBridge Scheduler invocations (1,000/s default)", "need": admissions, "have": 1000,
         "raise": "Service Quotas request; or fewer, larger slots (one fire admits up to 90 cells)"},
        *sweep_limits,
        {"limit": "SQS standard queue requests/s", "need": sqs_rps, "have": float("inf"), "raise": "none needed (no published limit)"},
    ]
    for lim in limits:
        lim["share"] = lim["need"] / lim["have"] if lim["have"] else float("inf")
    # the template's own ceiling: what the deployed defaults reach, function by function
    reach = {"execute": (exec_fn.get("max_concurrency") or esm_max) / exec_s,
             "deliver": (deliver_fn.get("max_concurrency") or esm_max) / deliver_s,
             "account quota": account_quota / (exec_s + deliver_s)}
    aws_limits = [lim for lim in limits if "ESM" not in lim["limit"] and "sweep" not in lim["limit"]]
    first_aws = max(aws_limits, key=lambda x: x["share"])
    pixiv_s = compute["pixiv"]["functions"]["execute"]["outside_s_per_cell"]
    feed = {"pixiv_s_per_cell": pixiv_s, "accounts_for_rate": math.ceil(cells * pixiv_s),
            "note": f"one account at maxConcurrency 1 serves {1 / pixiv_s:.2f} cells/s ({pixiv_s:.1f} s of Pixiv a cell): "
                    f"{math.ceil(cells * pixiv_s):,} accounts for {cells:,} cells/s, which Pixiv would not bear; the "
                    "catalogue source (a pre-fetched catalogue of works, no Pixiv request in the cell) feeds it"}
    knobs = {exec_param: min(esm_max, math.ceil(exec_need)), deliver_param: min(esm_max, math.ceil(deliver_need)),
             "ExecuteReservedConcurrency": min(esm_max, math.ceil(exec_need)),
             "DeliverReservedConcurrency": min(esm_max, math.ceil(deliver_need)),
             "Concurrent executions quota (L-B99A9384)": math.ceil(lambda_need / 0.8 / 1000) * 1000,
             # one ESM runs at most 1,000 at once: beyond it the queue itself must be split (not built)
             "execution queues (ESMs) needed": math.ceil(exec_need / esm_max),
             "outbox queues (ESMs) needed": math.ceil(deliver_need / esm_max)}
    binding = max(limits + [{"limit": r["key"], "share": r["share"]} for r in rows], key=lambda x: x["share"])
    return {"admissions_per_s": admissions, "cells_per_s": cells, "partitions": rows, "limits": limits,
            "binds_first": binding["limit"], "lambda_s_per_cell": exec_s, "deliver_s_per_cell": deliver_s,
            "live_slots": live_slots, "sweep": sweep, "template_reaches_cells_per_s": reach,
            "template_ceiling": min(reach.values()), "first_binding_aws_limit": first_aws["limit"],
            "knobs_for_rate": knobs, "feed": feed}


# -- cold start ---------------------------------------------------------------------------------------


def cold_start(runs: int, quick: bool = False, functions: tuple[str, ...] | None = None) -> dict[str, Any]:
    import coldstart

    return coldstart.measure(runs=runs, quick=quick, functions=functions)


LOAD_JSON = HERE / "load.json"


def load_figures(quick: bool, cells: tuple[int, int] | None = None) -> dict[str, Any]:
    """The long run's figures: ``bench/load.json`` as ``make load`` wrote it (100,000 cells), else a
    shorter run of the same code now (its N is printed and kept in the JSON)."""
    if not quick and LOAD_JSON.exists():
        data = json.loads(LOAD_JSON.read_text())
        data["origin"] = f"make load ({LOAD_JSON.relative_to(ROOT)}, {data.get('generated', 'undated')})"
        return data
    n, large = cells or ((100, 10) if quick else (2_000, 60))
    data = load.measure(n, large_cells=large)
    data["origin"] = f"measured now ({n:,} cells; `make load` runs the 100,000)"
    return data


# -- printing -----------------------------------------------------------------------------------------


NOT_PRICED = "price not in the kit"
# What it would take to bring down the line that keeps a profile above its goal.
HOLDS = {
    "idle queue polling (2 ESMs)": "Lambda's SQS event source mappings long-poll each queue with five connections whatever "
                                   "the traffic; one queue for both kinds of message would halve it, and the SQS free tier "
                                   "(1M requests, stated in the kit) covers it entirely",
    "S3 requests": "one PUT per stored file is the floor (every work is stored before its intent): fewer files per work, or "
                   "not storing works that are only passed through",
    "DynamoDB writes": "the 8 single-item writes a crash-safe cell cannot skip (section 3's floor)",
    "Lambda compute": "measured CPU plus assumed AWS latency: a smaller memory size, or arm64 already",
    "CloudWatch Logs": "fewer info lines per cell (LogLevel=WARNING), or a shorter LogRetentionDays",
    "Lambda waiting on Pixiv (assumed)": "the execute function is billed while it waits out Pixiv's pacing (about 1 s "
                                         "between a cell's requests, what an account can bear) and the download: a "
                                         "smaller execute memory size bills less of it, the catalogue source needs none; "
                                         "without it this profile's engine is what sections 1 and 3 measure",
}


def _fmt(x: float, nd: int = 2) -> str:
    return f"{x:,.{nd}f}"


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    return "\n".join([line(header), "  ".join("-" * w for w in widths)] + [line(r) for r in rows])


def render(report: dict[str, Any]) -> str:
    out: list[str] = []
    add = out.append

    def wrap(text: str, first: str, rest: str | None = None) -> None:
        import textwrap

        out.extend(textwrap.wrap(text, 112, initial_indent=first, subsequent_indent=rest if rest is not None else first))
    cells = report["cells"]
    add("PixivFlow Serverless: what a delivered cell costs (make bench)")
    add(f"prices: bench/prices.json ({PRICES['region']}, copied {PRICES['copied_on']}); moto in-process unless noted; "
        f"{report['elapsed_s']:.0f} s")
    add("")
    add("1. Per delivered cell (scheduled slots on a kind: webhook route, no outcome notifications)")
    names = list(cells)
    rows = []
    for label, key in (("DynamoDB WRU", ("dynamodb", "wru")), ("DynamoDB RRU", ("dynamodb", "rru")),
                       ("DynamoDB requests", ("dynamodb", "requests"))):
        rows.append([label] + [_fmt(cells[n]["per_cell"][key[0]][key[1]]) for n in names])
    ops = sorted({op for n in names for op in cells[n]["per_cell"]["dynamodb"]["requests_by_op"]})
    for op in ops:
        rows.append([f"  {op}"] + [_fmt(cells[n]["per_cell"]["dynamodb"]["requests_by_op"].get(op, 0)) for n in names])
    rows.append(["SQS requests (billed)"] + [_fmt(cells[n]["per_cell"]["sqs"]["billed_requests"]) for n in names])
    sqs_ops = [op for op in SQS_OPS if any(op in cells[n]["per_cell"]["sqs"]["requests_by_op"] for n in names)]
    for op in sqs_ops:
        rows.append([f"  {op}"] + [_fmt(cells[n]["per_cell"]["sqs"]["requests_by_op"].get(op, 0)) for n in names])
    if "ChangeMessageVisibilityBatch" not in sqs_ops:  # listed as the issue asks: none on the happy path
        rows.append(["  ChangeMessageVisibility"] + ["0.00" for _ in names])
    rows.append(["Lambda invocations"] + [_fmt(cells[n]["per_cell"]["lambda"]["invocations"]) for n in names])
    rows.append(["Lambda GB-s, measured here"] + [_fmt(cells[n]["per_cell"]["lambda"]["gb_s_measured"], 4) for n in names])
    rows.append(["Lambda GB-s, modelled (priced)"] + [_fmt(cells[n]["per_cell"]["lambda"]["gb_s_modelled"], 4) for n in names])
    s3_ops = sorted({op for n in names for op in cells[n]["per_cell"]["s3"]["requests_by_op"]})
    for op in s3_ops:
        rows.append([f"S3 {op}"] + [_fmt(cells[n]["per_cell"]["s3"]["requests_by_op"].get(op, 0)) for n in names])
    rows.append(["EventBridge Scheduler fires"] + [_fmt(cells[n]["per_cell"]["scheduler_fires"]) for n in names])
    rows.append(["log bytes ingested"] + [_fmt(cells[n]["per_cell"]["log_bytes"], 0) for n in names])
    rows.append(["$ per 1M cells, variable"] + [_fmt(sum(cells[n]["dollars"].values())) for n in names])
    add(table(rows, ["per delivered cell"] + names))
    add("  SQS as Lambda's event source mapping makes them: one ReceiveMessage per batch (BatchSize 10; a slot's")
    add("  messages arrive together here), one DeleteMessageBatch per batch, no ChangeMessageVisibility on success;")
    add("  empty polls are priced as a fixed cost below. 64 KB chunks: every message here is one chunk.")
    add("  GB-s modelled = own compute measured here + each AWS request at an assumed in-Region latency")
    add(f"  ({', '.join(f'{k} {v} ms' for k, v in A['latency_ms'].items())}) x configured memory: an estimate.")
    add("")

    add("2. The job API (Workflow Protocol v1)")
    rows = []
    for key, label in (("job", "POST /jobs, end to end (1 target)"), ("events", "GET events page + POST ack")):
        f = report["jobs"][key]["figures"]
        rows.append([label, _fmt(f["dynamodb"]["wru"]), _fmt(f["dynamodb"]["rru"]), _fmt(f["dynamodb"]["requests"], 0),
                     _fmt(f["sqs"]["billed_requests"], 0), _fmt(f["lambda"]["invocations"], 0),
                     _fmt(sum(v for v in f["s3"]["requests_by_op"].values()), 0), _fmt(f["api_requests"], 0),
                     _fmt(sum(report["jobs"][key]["dollars"].values()))])
    add(table(rows, ["per job / per page", "WRU", "RRU", "DDB req", "SQS req", "Lambda", "S3 req", "API GW", "$ per 1M"]))
    for key in ("job", "events"):
        ops = report["jobs"][key]["figures"]["dynamodb"]["requests_by_op"]
        add(f"  {key}: DynamoDB {', '.join(f'{op} {n:g}' for op, n in ops.items())}")
    add("")

    ref = report["reference"]
    add(f"3. Dollars per million delivered cells ({ref['name']}; 1M cells a month, free tiers excluded)")
    rows = [[k, _fmt(v)] for k, v in ref["lines"].items()]
    rows.append(["fixed costs spread over 1M cells:", ""])
    rows += [[f"  {k}", _fmt(v)] for k, v in ref["fixed"].items()]
    rows.append(["all in", _fmt(ref["all_in"])])
    rows.append(["  of which the engine (no CloudWatch)", _fmt(ref["engine"])])
    add(table(rows, ["service", "$ per 1M cells"]))
    wrap(f"goal <= $10 all in: {'met' if ref['all_in'] <= 10 else 'NOT met'}. {ref['floor']}", "  ")
    add("")
    add("   same work, other orchestrators ($ per 1M delivered cells; orchestration = their charge + Lambda requests")
    add("   for their tasks + the Scheduler fire + 1 conditional DynamoDB put per cell for the route dedupe;")
    add("   all in adds the same work: Lambda compute, S3 and logs as ours)")
    rows = [["PixivFlow (this engine)", "-", _fmt(ref["orchestration"]), _fmt(ref["all_in"]), "[0]"]]
    for n, alt in enumerate(report["alternatives"], 1):
        rows.append([alt["name"], _fmt(alt["units_per_cell"]), _fmt(alt["orchestration"]), _fmt(alt["all_in"]), f"[{n}]"])
    add(table(rows, ["orchestrator", "units/cell", "orchestration", "all in", "rule"]))
    add("   [0] measured here: DynamoDB + SQS + Lambda requests + Scheduler, and the sweep and queue polling")
    for n, alt in enumerate(report["alternatives"], 1):
        wrap(f"[{n}] {alt['rule']}", "   ", "       ")
    add("")

    add("4. Write units per delivered cell by ledger step")
    steps = [s for s in STEP_ORDER if any(s in cells[n]["per_cell"]["dynamodb"]["wru_by_step"] for n in names)]
    extra = sorted({s for n in names for s in cells[n]["per_cell"]["dynamodb"]["wru_by_step"]} - set(steps))
    rows = [[s] + [_fmt(cells[n]["per_cell"]["dynamodb"]["wru_by_step"].get(s, 0)) for n in names] for s in steps + extra]
    rows.append(["total"] + [_fmt(cells[n]["per_cell"]["dynamodb"]["wru"]) for n in names])
    add(table(rows, ["step"] + names))
    add("  claim: the cell lease (and the slot's pending->running once); intent: the intent row and the cell's")
    add("  move to delivery_pending; settle: the ACK on the row and the cell's move to submitted; rollup: the slot's")
    add("  close; index maintenance: every sparse-index entry written or removed.")
    add("")

    add("5. Trigger admission (one scheduled fire; the cells are not run)")
    rows = []
    for n, a in report["admission"].items():
        rows.append([n, _fmt(a["dynamodb"], 0), _fmt(a["sqs"], 0), f"{a['goal_dynamodb']} + {a['goal_sqs']}",
                     "yes" if a["dynamodb"] <= a["goal_dynamodb"] and a["sqs"] <= a["goal_sqs"] else "NO",
                     ", ".join(f"{k} {v:g}" for k, v in a["ops"].items())])
    add(table(rows, ["targets", "DynamoDB req", "SQS req", "goal (2 + ceil(n/10))", "met", "requests"]))
    add("")

    add("6. The sweep against ledger size (one tick; one live slot it terminalises; the in-memory twins)")
    rows = []
    for n, s in report["sweep"].items():
        rows.append([f"{int(n):,}", _fmt(s["dynamodb"], 0), _fmt(s["rru"]), _fmt(s["wru"]), ", ".join(f"{k} {v}" for k, v in s["ops"].items())])
    add(table(rows, ["finished slots", "DynamoDB req", "RRU", "WRU", "requests"]))
    flat = len({(s["dynamodb"], s["rru"]) for s in report["sweep"].values()}) == 1
    add(f"  flat: {'yes' if flat else 'NO'} (it reads the sparse indexes and the live slot only)")
    add("")

    sc = report["scale"]
    add(f"7. Scale (computed from the 10-target request model, not load-tested): {sc['admissions_per_s']:,} slot "
        f"admissions/s, {sc['cells_per_s']:,} cell executions/s")
    rows = [[r["key"], _fmt(r.get("wcu_s", 0), 1), _fmt(r.get("rcu_s", 0), 1), f"{r['share']:.0%}", r["note"]]
            for r in sc["partitions"]]
    add(table(rows, ["hottest keys", "WCU/s", "RCU/s", "of 1,000 WCU / 3,000 RCU", "note"]))
    rows = [[lim["limit"], _fmt(lim["need"], 0), "unlimited" if lim["have"] == float("inf") else _fmt(lim["have"], 0),
             "-" if lim["share"] == 0 else f"{lim['share']:.0%}", lim["raise"]] for lim in sc["limits"]]
    add(table(rows, ["limit", "needed", "have", "use", "how it is raised"]))
    add(f"  binds first: {sc['binds_first']}; the first AWS limit: {sc['first_binding_aws_limit']}.")
    add(f"  Lambda seconds per cell (section 10, catalogue source): execute {sc['lambda_s_per_cell']:.3f}, deliver "
        f"{sc['deliver_s_per_cell']:.3f}; live slots at once: ~{sc['live_slots']:,}.")
    sw = sc["sweep"]
    wrap(f"the sweep (incremental, services/sweep.py): a live slot costs a tick {sw['slot_ms']:.1f} ms (measured over "
         f"{sw['measured_live']} live slots: requests x stated latency + own CPU at the function's vCPU share); a tick walks "
         f"the live slots from its cursor for at most {sw['budget_s']:.0f} s, so it visits {sw['slots_per_tick']:,.0f}; "
         f"{sw['live_slots']:,} live slots take {sw['pass_s']:.1f} s, {sw['pass_ticks']:.2f} of a tick's budget.", "  ")
    wrap("the template as deployed (its defaults) reaches: " + ", ".join(f"{k} {v:,.0f} cells/s" for k, v in
         sc["template_reaches_cells_per_s"].items()) + f"; so {sc['template_ceiling']:,.0f} cells/s.", "  ")
    wrap(f"to reach {sc['cells_per_s']:,} cells/s: " + ", ".join(f"{k}={v:,}" for k, v in sc["knobs_for_rate"].items())
         + f". Fed by: {sc['feed']['note']}.", "  ")
    add("")

    mo = report["monthly"]
    add("8. A month, all in (list prices; every line priced from bench/prices.json or named)")
    add(f"   stored per delivered cell, measured here: {mo['ledger_bytes_per_cell']:,.0f} B of ledger items "
        f"({mo['ledger_items_per_slot']} items for a 3-target slot); a fake-Pixiv work is {mo['measured_work_bytes']:,.0f} B, "
        f"so storage is priced at the stated sizes: {', '.join(f'{k} {v:,} B' for k, v in mo['stated_work_bytes'].items())}")
    for b in mo["profiles"]:
        add("")
        tick = b.get("idle_tick") or {}
        add(f"  ({b['key']}) {b['name']}: {b['cells_per_month']:,} cells a month, {b['accounts']} Pixiv account(s), "
            f"{b.get('schedules', 1):,} schedule(s), AlarmProfile={b['alarm_profile']}, artifacts {b['retention_days']} days")
        if tick:
            wrap(f"its idle sweep tick, measured at {tick['schedules']:,} schedules ({b.get('schedules_why', '')}; one watch "
                 f"read each): {tick['dynamodb_requests']:.0f} DynamoDB requests, {tick['dynamodb_rru']:.1f} read units, "
                 f"{tick['sqs_requests']:.0f} SQS requests, {tick['gb_s_modelled']:.3f} GB-s", "      ")
        wrap(f"source: {b['source']}; accounts: {b['accounts_why']}", "      ")
        rows = [[line["name"], NOT_PRICED if line["usd"] is None else _fmt(line["usd"], 3), line["quantity"]]
                for line in b["lines"]]
        rows.append(["all in (priced lines)", _fmt(b["total"], 2), f"${b['per_million_cells']:,.2f} per million cells"])
        add(table(rows, ["line", "$ a month", "billed on"]))
    a_bill = next(b for b in mo["profiles"] if b["key"] == "a")
    c_bill = next(b for b in mo["profiles"] if b["key"] == "c")
    add("")
    add(f"  goal (a) <= ${mo['goals']['a']:.2f} a month: {'met' if a_bill['total'] <= mo['goals']['a'] else 'NOT met'} "
        f"(${a_bill['total']:.2f}; fixed ${a_bill['fixed']:.2f})")
    add(f"  goal (c) <= ${mo['goals']['c_per_million']:.2f} per million cells: "
        f"{'met' if c_bill['per_million_cells'] <= mo['goals']['c_per_million'] else 'NOT met'} (${c_bill['per_million_cells']:.2f})")
    sweep_goal = ", ".join(f"{m} min ${v['total']:.2f}" for m, v in a_bill["by_sweep_interval"].items())
    met = [m for m, v in a_bill["by_sweep_interval"].items() if v["total"] <= mo["goals"]["a"]]
    wrap(f"(a) by SweepIntervalMinutes (the sweep's ticks, their logs and the sweep's cold starts; the HealthAlarm "
         f"costs the same at any period): {sweep_goal}; goal met at {', '.join(met) + ' min' if met else 'none'}. "
         "The price: a stalled or timed-out occurrence, a missed fire or a lost message is acted on up to that many "
         "minutes later, and HealthAlarm pages after two bad intervals (README, SweepIntervalMinutes)", "  ", "      ")
    for b in mo["profiles"]:
        credit = ", ".join(f"{k} ${v:.2f}" for k, v in b["free_tier"].items() if v)
        wrap(f"({b['key']}) with the always-free tiers (named, not in the figures above: {credit}): "
             f"${b['total_with_free_tier']:.2f} a month", "  ", "      ")
        if b["variants"]:
            wrap(f"({b['key']}) levers: " + "; ".join(f"{k} ${v['total']:.2f} (${v['per_million_cells']:.2f}/M)"
                                                    for k, v in b["variants"].items()), "  ", "      ")
    for b in (a_bill, c_bill):
        goal = mo["goals"]["a"] if b["key"] == "a" else mo["goals"]["c_per_million"] * b["cells_per_month"] / 1e6
        if b["total"] > goal:
            top = max((line for line in b["lines"] if line["usd"]), key=lambda line: line["usd"])
            wrap(f"({b['key']}) is held above its goal most by '{top['name']}' (${top['usd']:.2f}): {HOLDS.get(top['name'], 'see section 3')}",
                 "  ", "      ")
    add(f"  named, not priced: {', '.join(sorted(set(n for b in mo['profiles'] for n in b['named'])))}")
    tt = mo["steady_state_table"]
    wrap(f"steady-state table (every item a slot writes expires {report['template']['retention_days']} days on, "
         f"RetentionDays; + {A['ttl_deletion_lag_days']} days of TTL lag; {mo['ledger_items_per_cell']:.2f} items and "
         f"{mo['ledger_bytes_per_cell']:,.0f} B a cell, measured): "
         + "; ".join(f"({k}) {v['items']:,} items, {v['gb']:,.3f} GB" for k, v in tt.items())
         + "; plus one watch item per schedule and the Pixiv account items.", "  ")
    wru = {n: report["cells"][n]["per_cell"]["dynamodb"]["wru"] for n in ("1 target", "3 targets", "10 targets") if n in report["cells"]}
    add("  write units per delivered cell: " + ", ".join(f"{v:.2f} at {n}" for n, v in wru.items()))
    add("")

    cs = report["cold_start"]
    bare = cs["bare_function"]
    nan_ = float("nan")
    add(f"9. Cold start that counts: INIT + first invocation, fresh interpreter, from the {cs['from']}, median of "
        f"{cs['runs']} run(s)")
    wrap(f"against a bare function: {bare['label']}: INIT {_fmt(bare['import_ms'], 0)} ms + first call "
         f"{_fmt(bare['first_ms'], 0)} ms = {_fmt(bare['init_first_ms'], 0)} ms "
         f"({_fmt(bare.get('init_first_cpu_ms', nan_), 0)} ms of CPU)", "  ")
    nan = float("nan")
    rows = []
    for name, m in cs["handlers"].items():
        rows.append([name, _fmt(m["init_ms"], 0), _fmt(m["first_invocation_ms"], 0), _fmt(m["init_first_ms"], 0),
                     f"{m['init_first_ratio']:.2f}x", _fmt(m.get("init_first_cpu_ms", nan), 0),
                     f"{m.get('init_first_cpu_ratio', nan):.2f}x", _fmt(m.get("warm_invocation_ms", nan), 0), _fmt(m.get("layer_ms", nan), 0),
                     f"{m.get('layer_ratio', nan):.2f}x", _fmt(m.get("layer_nopyc_ms", nan), 0), _fmt(m.get("max_rss_mb", nan), 0)])
    rows.append(["(bare function)", _fmt(bare["import_ms"], 0), _fmt(bare["first_ms"], 0), _fmt(bare["init_first_ms"], 0),
                 "1.00x", _fmt(bare.get("init_first_cpu_ms", nan), 0), "1.00x", _fmt(bare["warm_ms"], 0), _fmt(cs.get("bare_layer_ms") or nan, 0), "1.00x",
                 _fmt(cs.get("bare_layer_nopyc_ms") or nan, 0), _fmt(bare.get("max_rss_mb", nan), 0)])
    add(table(rows, ["handler", "INIT ms", "1st invocation ms", "INIT + 1st ms", "ratio", "CPU ms", "CPU ratio", "2nd ms",
                     "import only ms", "ratio", "w/o bytecode ms", "peak RSS MB"]))
    add("  1st invocation: against moto in server mode on 127.0.0.1: it builds the runtime graph (the config read from")
    add("  SSM as deployed, a JSON document; the clients) and imports the modules its path needs, as on Lambda after")
    add("  INIT (trigger: a scheduled fire; execute/deliver: a record for a missing slot/row; stall_sweep: a tick on an")
    add("  empty ledger; job_events: GET /capabilities). The probe builds Lambda's context object itself.")
    add(f"  built layer: {cs.get('layer', {}).get('note', 'not built')}")
    add("  CPU: the probe's own CPU over the same span (INIT + 1st): a shared, loaded machine stretches the wall clock")
    add("  with waits for a core that Lambda's dedicated share does not have; moto's answers are in the wall clock only.")
    add("  peak RSS: the interpreter's peak resident memory after two invocations (Lambda's runtime client adds its own).")
    add(f"  goal INIT + 1st <= 1.3x the bare function: {'met' if cs['worst_ratio'] <= 1.3 else 'NOT met'} "
        f"(worst {cs['worst_ratio']:.2f}x wall clock, {cs.get('worst_cpu_ratio', nan_):.2f}x CPU)")
    parts = cs.get("parts_ms") or {}
    if parts:
        # what the first invocation spends beyond the bare function, step by step (bench/coldstart._PARTS)
        bare_ms = (cs.get("bare_function") or {}).get("init_first_ms") or nan_
        steps = "; ".join(f"{name} {ms:.0f} ms" for name, ms in parts.items())
        wrap(f"where it goes (one fresh interpreter from the layer, step by step): {steps}. The goal allows "
             f"{0.3 * bare_ms:.0f} ms over the bare function: what the config costs (its models, its validation, "
             f"its SSM read) is over that alone; meeting it would take a config that needs no validation at cold "
             f"start (checked at deploy time, loaded as data) and no SSM model of its own.", "  ")
    add("")

    co = report["compute"]
    ld = report["load"]
    add(f"10. Compute from measurement: {ld['cells']:,} cells of {ld['targets_per_slot']}-target slots on the twins "
        f"(target {ld['target_cells']:,}; {ld['origin']})")
    add(f"   own CPU = the handler thread's CPU minus the twins' and the source's; Lambda time = CPU / (memory / "
        f"{load.ONE_VCPU_MB:,} MB) + requests x stated latency + stated Pixiv time")
    for src, label in (("pixiv", "Pixiv source"), ("catalog", "catalogue source")):
        model = co[src]
        rows = []
        for fn, f in model["functions"].items():
            m = ld["functions"][fn]
            rows.append([fn, _fmt(m["cpu_ms_per_cell"], 2), _fmt(ld["cpu_ms_per_mb_per_cell"].get(fn, 0), 2), str(f["memory_mb"]),
                         f"{f['vcpu_share']:.2f}", _fmt(f["compute_s_per_cell"] * 1000, 1), _fmt(f["aws_s_per_cell"] * 1000, 1),
                         _fmt(f["outside_s_per_cell"] * 1000, 0), _fmt(f["gb_s_per_cell"], 4),
                         "-" if f["max_concurrency"] is None else str(f["max_concurrency"]),
                         "-" if f["cells_per_s"] is None else _fmt(f["cells_per_s"], 1)])
        add(f"   {label} ({model['work_bytes'] / 1e6:g} MB a work):")
        add(table(rows, ["function", "CPU ms/cell", "+ms/MB", "MB", "vCPU", "compute ms", "AWS ms", "outside ms",
                         "GB-s/cell", "max conc.", "cells/s"]))
        add(f"   GB-s per cell {model['gb_s_per_cell']:.4f}; cells/s at the template's MaximumConcurrency: "
            f"{_fmt(model['cells_per_s'] or 0, 1)}")
    px = A["pixiv_seconds_per_cell"]
    calls = ", ".join(f"{k} {v:g}" for k, v in ld["source_calls_per_cell"].items())
    wrap(f"assumed, not measured: AWS latency per request ({', '.join(f'{k} {v} ms' for k, v in A['latency_ms'].items())}), "
         f"S3 upload {A['s3_mb_per_s']} MB/s, Pixiv {px['pacing_s']:g} s per request (the published configs' pacing) and "
         f"{px['mb_per_s']} MB/s; counted here: source requests per cell {calls}.", "   ")
    return "\n".join(out)


# -- main -----------------------------------------------------------------------------------------------


def run(quick: bool = False, smoke: bool = False) -> dict[str, Any]:
    """``quick``: no 100,000-slot ledger, one cold-start run, a short load run. ``smoke`` (the
    report's own test): quick, every scenario on the in-memory twins, a 100-slot sweep, the cold
    start of the trigger function alone against the bare function, a 20-cell load run."""
    quick = quick or smoke
    backend = "twin" if smoke else "moto"
    began = time.monotonic()
    facts = template_facts()
    sinks_series: set = set()

    def collect(m: scenarios.Measured) -> None:
        sinks_series.update(m.window.series)

    cells: dict[str, Any] = {}
    cells_detail: dict[str, Any] = {}
    cell_calls: dict[str, list[Call]] = {}
    for label, schedule in (("1 target", "bench-1"), ("3 targets", "morning-tokyo"), ("10 targets", "bench-10"),
                            ("2-route fan-out (3 targets)", "fanout")):
        m = scenarios.scheduled_slot(schedule, name=label, backend=backend)
        collect(m)
        f = figures(m.window, facts, per=m.delivered, scheduler_fires=m.detail["scheduler_fires"])
        cells[label] = {"schedule": schedule, "delivered": m.delivered, "per_cell": f, "dollars": dollars(f)}
        cells_detail[label] = m.detail | {"delivered": m.delivered}
        cell_calls[label] = m.window.calls

    job, page = scenarios.job_end_to_end(backend=backend)
    collect(job)
    collect(page)
    jobs = {}
    for key, m in (("job", job), ("events", page)):
        f = figures(m.window, facts, per=1, api_requests=m.detail["api_requests"])
        jobs[key] = {"figures": f, "dollars": dollars(f), "delivered": m.delivered}

    admission = {}
    for n in (1, 10, 90):
        m = scenarios.admission(n, backend=backend)
        ddb = [c for c in m.window.calls if c.service == "dynamodb"]
        sqs = [c for c in m.window.calls if c.service == "sqs" and c.step != "idle"]
        admission[str(n)] = {"dynamodb": len(ddb), "sqs": len(sqs), "goal_dynamodb": 2, "goal_sqs": math.ceil(n / 10),
                             "ops": dict(Counter(f"{c.service}:{c.op}" for c in ddb + sqs))}

    idle = scenarios.idle_tick(backend=backend)
    collect(idle)
    idle_f = figures(idle.window, facts, per=1, scheduler_fires=1)
    # each monthly profile's own tick: it reads one watch per enabled schedule (Profile.schedules)
    idle_by_profile = {p.key: scenarios.idle_tick(backend=backend, schedules=p.schedules) for p in monthly.profiles(A)}

    sizes = [100] if smoke else [1_000, 10_000] + ([] if quick else [100_000])
    sweep = {}
    for n, m in scenarios.sweep_flatness(sizes).items():
        ddb = [c for c in m.window.calls if c.service == "dynamodb"]
        sweep[str(n)] = {"dynamodb": len(ddb), "rru": sum(c.rru for c in ddb), "wru": sum(c.wru + c.index_wru for c in ddb),
                         "ops": dict(sorted(Counter(c.op for c in ddb).items()))}

    sweep_cost = sweep_live_cost(scenarios.sweep_live([0, 20 if smoke else 200]), facts)

    cs = cold_start(runs=3 if quick else 5, quick=quick, functions=("trigger",) if smoke else None)
    # INIT is billed too: each function's cold start, its CPU scaled to its memory in fixed_monthly
    first = {k: {"wall_s": v["init_first_ms"] / 1000, "cpu_s": v.get("init_first_cpu_ms", v["init_first_ms"]) / 1000}
             for k, v in cs["handlers"].items()}

    load_run = load_figures(quick, cells=(20, 10) if smoke else None)
    compute = {src: load.compute_model(load_run, facts, A, source=src) for src in ("pixiv", "catalog")}

    ref_name = "3 targets"
    ref_cells = cells[ref_name]
    fixed = fixed_monthly(idle_f, first, facts, len(sinks_series), "full")
    cells_month = A["cells_per_month"]
    fixed_per_m = {k: v / cells_month * MILLION for k, v in fixed.items()}
    lines = dict(ref_cells["dollars"])
    lines = {k: v for k, v in lines.items() if k != "API Gateway"}
    all_in = sum(lines.values()) + sum(fixed_per_m.values())
    cloudwatch = lines["CloudWatch Logs"] + sum(v for k, v in fixed_per_m.items() if "CloudWatch" in k or "logs" in k)
    orchestration = (lines["DynamoDB writes"] + lines["DynamoDB reads"] + lines["SQS"] + lines["Lambda requests"]
                     + lines["EventBridge Scheduler"] + fixed_per_m["sweep ticks (DynamoDB, Lambda, Scheduler)"]
                     + fixed_per_m["idle queue polling (2 ESMs)"])
    work_lines = {k: lines[k] for k in ("Lambda compute", "S3 requests", "CloudWatch Logs")}
    floor = floor_statement(ref_cells["per_cell"], lines)
    reference = {"name": f"{ref_name}, demo plan morning-tokyo", "lines": lines, "fixed": fixed_per_m, "all_in": all_in,
                 "engine": all_in - cloudwatch, "orchestration": orchestration, "floor": floor}
    monthly_bills = monthly_figures(ref_cells, idle_f, first, facts, len(sinks_series), cells_detail, load_run, compute,
                                    idle_window=idle.window, idle_by_profile=idle_by_profile)
    report = {
        "generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "monthly": monthly_bills,
        "prices": {"file": "bench/prices.json", "copied_on": PRICES["copied_on"], "assumptions": A},
        "template": facts,
        "cells": cells,
        "jobs": jobs,
        "reference": reference,
        "alternatives": alternatives(3, lines, work_lines),
        "admission": admission,
        "idle_tick": idle_f,
        "sweep": sweep,
        "scale": scale_model(cells["10 targets"]["per_cell"], cell_calls["10 targets"], sweep_cost, facts, 10, compute),
        "cold_start": cs,
        "load": {"origin": load_run["origin"], "cells": load_run["run"]["cells"], "target_cells": load_run["target_cells"],
                 "targets_per_slot": load_run["run"]["targets_per_slot"], "elapsed_s": load_run["run"]["elapsed_s"],
                 "functions": load_run["run"]["functions"], "cpu_ms_per_mb_per_cell": load_run["cpu_ms_per_mb_per_cell"],
                 "source_calls_per_cell": load_run["run"]["source_calls_per_cell"]},
        "compute": compute,
        "metric_series": len(sinks_series),
    }
    report["elapsed_s"] = time.monotonic() - began
    return report


def _offline_aws_env() -> None:
    """Fake credentials and no endpoint or profile: every request goes to moto or the twins."""
    for key, value in {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_SESSION_TOKEN": "bench",
                       "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1"}.items():
        os.environ[key] = value
    os.environ.pop("AWS_ENDPOINT_URL", None)
    os.environ.pop("AWS_PROFILE", None)


def main(argv: list[str] | None = None) -> int:
    _offline_aws_env()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default=str(HERE / "report.json"), help="where to write the JSON report")
    parser.add_argument("--quick", action="store_true", help="skip the 100,000-slot ledger; fewer cold-start runs")
    parser.add_argument("--smoke", action="store_true", help="the cheapest run that fills every section (the report's test)")
    args = parser.parse_args(argv)
    report = run(quick=args.quick, smoke=args.smoke)
    text = render(report)
    Path(args.json).write_text(json.dumps(report, indent=1, default=str))
    print(text)
    print(f"\n(JSON: {os.path.relpath(args.json)})")
    return exit_code(report)


def exit_code(report: dict[str, Any]) -> int:
    """2 when a line has neither a price nor the name 'price not in the kit': a figure the report
    cannot price is never silently zero."""
    unpriced = report["monthly"]["unpriced"]
    if unpriced:
        print("make bench: these lines have no price and are not named as 'price not in the kit': "
              + ", ".join(unpriced), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
