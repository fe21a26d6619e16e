"""The workloads ``make bench`` measures, each in a fresh embedded runtime (moto by default, the
in-memory twins where the volume calls for it), through the real handlers.

A scenario fires a warm-up occurrence first (the first invocation of a container imports lazily
loaded modules, which is cold-start time, not per-cell time), then resets the meter and runs the
measured one end to end: the trigger, Lambda's event source mappings (the queue pumps) until the
slot is terminal, and nothing else. Per delivered cell figures are totals over delivered cells.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import quote as _quote


def quote(value: str) -> str:
    return _quote(value, safe="")

import yaml

from meter import Meter

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "events" / "demo"
TOKENS = {"trigger": "bench-trigger-token-0123456789", "jobs": "bench-jobs-token-0123456789"}
WARM_UP = "2026-11-29T23:00:00Z"
MEASURED = "2026-11-30T23:00:00Z"
BENCH_TAGS = 90  # one tag (and three works) per generated target: no candidate is skipped as a duplicate


def ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).astimezone(timezone.utc).timestamp() * 1000)


# -- configuration --------------------------------------------------------------------------------


def bench_catalog() -> dict[str, Any]:
    catalog = json.loads((DEMO / "catalog.json").read_text())
    for t in range(BENCH_TAGS):
        for n in range(3):
            wid = 500_000 + t * 10 + n
            catalog["illusts"].append({
                "id": wid, "type": "illust", "title": f"Bench work {t}-{n}", "tags": [{"name": f"bench-{t:02d}"}],
                "user": {"id": 9100 + t, "name": f"artist{t}"}, "create_date": f"2026-11-{10 + n:02d}T00:00:00+09:00",
                "total_bookmarks": 100 + n, "page_count": 1,
                "image_urls": {"large": f"https://i.example.invalid/{wid}_p0.png"},
            })
    return catalog


def bench_config(tmp: Path, downstream_url: str, mutate: Callable[[dict], None] | None = None) -> Path:
    """The demo config, its route at the loopback downstream, plus generated plans: ``bench-<n>``
    (n of the generated targets) and ``fanout`` (three targets on two routes)."""
    cfg = yaml.safe_load((DEMO / "config.yaml").read_text())
    cfg["delivery"]["targets"]["review"]["url"] = downstream_url
    cfg["delivery"]["targets"]["second"] = {"kind": "webhook", "url": downstream_url + "/second"}
    catalog = tmp / "catalog.json"
    catalog.write_text(json.dumps(bench_catalog()))
    cfg["source"]["path"] = str(catalog)
    for t in range(BENCH_TAGS):
        cfg["targets"].append({"id": f"b{t:02d}", "type": "illustration", "mode": "search", "tag": f"bench-{t:02d}",
                               "limit": 1, "storageMode": "cache", "delivery": {"target": "review"}})
    for t in range(3):
        cfg["targets"].append({"id": f"f{t}", "type": "illustration", "mode": "search", "tag": f"bench-{80 + t:02d}",
                               "limit": 1, "storageMode": "cache", "delivery": {"targets": ["review", "second"]}})
    for n in (1, 3, 10, 90):
        cfg["schedules"].append({"id": f"bench-{n}", "cron": "0 8 * * *", "timezone": "Asia/Tokyo",
                                 "targetIds": [f"b{t:02d}" for t in range(n)]})
    cfg["schedules"].append({"id": "fanout", "cron": "0 8 * * *", "timezone": "Asia/Tokyo", "targetIds": ["f0", "f1", "f2"]})
    cfg["jobs"] = {"callbackAllowHosts": ["127.0.0.1"]}
    if mutate:
        mutate(cfg)
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


# -- the runtime --------------------------------------------------------------------------------


class LogSink(io.TextIOBase):
    """Takes the Powertools Logger's stream and stdout (EMF metrics are printed): nothing reaches the
    report, and the bytes and metric series are what CloudWatch Logs would ingest and bill."""

    def __init__(self) -> None:
        self.bytes = 0
        self.lines = 0
        self.series: set[tuple[str, tuple]] = set()
        self.events: Counter = Counter()

    def write(self, text: str) -> int:
        self.bytes += len(text.encode())
        for raw in text.splitlines():
            if not raw.strip():
                continue
            self.lines += 1
            if raw.startswith("{"):
                try:
                    line = json.loads(raw)
                except ValueError:
                    continue
                aws = line.get("_aws")
                if aws:
                    for directive in aws.get("CloudWatchMetrics", []):
                        for metric in directive.get("Metrics", []):
                            for dims in directive.get("Dimensions", []) or [[]]:
                                self.series.add((metric["Name"], tuple((d, str(line.get(d))) for d in dims)))
                elif line.get("event"):
                    self.events[line["event"]] += 1
        return len(text)

    def reset(self) -> None:
        self.bytes = self.lines = 0
        self.events.clear()


@dataclass
class Bench:
    """A started embedded runtime, a meter on it and the loopback downstream."""

    rt: Any
    meter: Meter
    downstream: Any
    sink: LogSink

    def fire(self, schedule_id: str, iso: str) -> dict[str, Any]:
        """Scheduler's fire for ``iso``, a minute before it on the clock if the clock is not past that."""
        if self.rt.clock.now_ms() < ms(iso) - 60_000:
            self.rt.clock.set(ms(iso) - 60_000)
        return self.rt.fire(schedule_id, iso=iso)

    def settle(self) -> None:
        self.rt.settle()

    def job_call(self, method: str, path: str, body: Any = None, query: dict | None = None) -> tuple[int, Any]:
        return self.rt.http(method, path, body, token=TOKENS["jobs"], function="job_events", query=query)

    def delivered(self, slot_id: str) -> int:
        state = self.rt.wiring.ledger.load(slot_id)
        return sum(1 for c in state.snapshot_cells() if c.status == "submitted")

    def measure(self) -> "Window":
        return Window(self)


class Window:
    """``with bench.measure() as w: ...``: the meter and the log sink count only inside."""

    def __init__(self, bench: Bench) -> None:
        self.bench = bench
        self.calls: list = []
        self.invocations: list = []
        self.log_bytes = 0
        self.log_lines = 0
        self.posts = 0  # requests the downstream route answered
        self.series: set = set()  # EMF metric series seen
        self._posts_before = 0

    def __enter__(self) -> "Window":
        self.bench.meter.reset()
        self.bench.sink.reset()
        self.bench.meter.enabled = True
        self._posts_before = len(self.bench.downstream.requests)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.bench.meter.errors:
            raise RuntimeError("the meter failed to price a call:\n" + self.bench.meter.errors[0])
        self.calls = list(self.bench.meter.calls)
        self.invocations = list(self.bench.meter.invocations)
        self.log_bytes, self.log_lines = self.bench.sink.bytes, self.bench.sink.lines
        self.posts = len(self.bench.downstream.requests) - self._posts_before
        self.series = set(self.bench.sink.series)
        self.bench.meter.enabled = False


@contextlib.contextmanager
def bench_runtime(*, backend: str = "moto", mutate: Callable[[dict], None] | None = None,
                  start: str = WARM_UP) -> Iterator[Bench]:
    from pixivflow.clock import VirtualClock
    from pixivflow.local.downstream import Downstream
    from pixivflow.local.harness import EmbeddedRuntime
    from pixivflow.observability import logger

    sink = LogSink()
    saved_stream = logger.registered_handler.stream
    saved_metrics = os.environ.get("POWERTOOLS_METRICS_DISABLED")
    logger.registered_handler.stream = sink
    os.environ["POWERTOOLS_METRICS_DISABLED"] = "false"  # EMF lines are log bytes CloudWatch bills
    try:
        with tempfile.TemporaryDirectory(prefix="pixivflow-bench-") as tmp, Downstream() as downstream, \
                contextlib.redirect_stdout(sink):
            config = bench_config(Path(tmp), downstream.url, mutate)
            clock = VirtualClock(ms(start) - 60_000)
            with EmbeddedRuntime(config, clock, tokens=TOKENS, backend=backend, prefix="bench") as rt:
                meter = Meter().attach(rt)
                meter.enabled = False
                yield Bench(rt, meter, downstream, sink)
    finally:
        logger.registered_handler.stream = saved_stream
        if saved_metrics is None:
            os.environ.pop("POWERTOOLS_METRICS_DISABLED", None)
        else:
            os.environ["POWERTOOLS_METRICS_DISABLED"] = saved_metrics


# -- scenarios ------------------------------------------------------------------------------------


@dataclass
class Measured:
    name: str
    delivered: int
    window: Window
    detail: dict[str, Any] = field(default_factory=dict)


def scheduled_slot(schedule_id: str, *, backend: str = "moto", mutate=None, name: str | None = None,
                   before_measure: Callable[[Bench], None] | None = None) -> Measured:
    """One scheduled occurrence of ``schedule_id``, fire to terminal slot."""
    with bench_runtime(backend=backend, mutate=mutate) as bench:
        bench.fire(schedule_id, WARM_UP)
        bench.settle()
        if before_measure:
            before_measure(bench)
        with bench.measure() as window:
            result = bench.fire(schedule_id, MEASURED)
            bench.settle()
        slot_id = result["slot_id"]
        state = bench.rt.wiring.ledger.load(slot_id)
        assert state is not None and state.slot.status == "success", (slot_id, state and state.slot.status)
        delivered = bench.delivered(slot_id)
        return Measured(name or schedule_id, delivered, window,
                        {"slot_id": slot_id, "targets": len(state.slot.target_ids), "scheduler_fires": 1,
                         "downstream_posts": len(bench.downstream.requests), **stored_bytes(bench, slot_id)})


def stored_bytes(bench: Bench, slot_id: str) -> dict[str, int]:
    """What one occurrence leaves stored, as DynamoDB and S3 bill storage: every item of its slot's
    partition (slot, cells, intents = outbox rows, events) and of the other item kinds that name it
    (route-work confirmations, notification rows), in DynamoDB's item size plus its 100-byte index
    overhead per item; and every artifact object's bytes."""
    from meter import item_size

    from pixivflow import aws

    ddb, table = aws.client("dynamodb"), bench.rt.env["LEDGER_TABLE"]
    items = []
    for page in ddb.get_paginator("scan").paginate(TableName=table):
        items += page["Items"]
    mine = [i for i in items if i["pk"]["S"] == f"SLOT#{slot_id}" or slot_id in json.dumps(i)]
    ledger = sum(item_size(i) + 100 for i in mine)
    s3_bytes = objects = 0
    bucket = bench.rt.env.get("ARTIFACT_BUCKET")
    if bucket:
        s3, token = aws.client("s3"), None
        while True:
            page = s3.list_objects_v2(Bucket=bucket, **({"ContinuationToken": token} if token else {}))
            for obj in page.get("Contents", []):
                s3_bytes += obj["Size"]
                objects += 1
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                break
    return {"ledger_items": len(mine), "ledger_bytes": ledger, "artifact_bytes_all_slots": s3_bytes,
            "artifact_objects_all_slots": objects}


def admission(targets: int, *, backend: str = "moto") -> Measured:
    """Only the trigger invocation of a ``targets``-target occurrence (the cells are not run)."""
    with bench_runtime(backend=backend) as bench:
        bench.fire(f"bench-{targets}", WARM_UP)  # warm: the trigger's first run imports lazily
        with bench.measure() as window:
            result = bench.fire(f"bench-{targets}", MEASURED)
        assert result.get("sent") == targets, result
        return Measured(f"admission of {targets} targets", 0, window, {"slot_id": result["slot_id"]})


JOB_BODY = {"protocol_version": "1", "job_type": "candidate_search", "idempotency_key": "bench-job-1",
            "correlation_id": "bench:1", "params": {"query": {"tags": ["cats"]}}}


def _one_job_plan(cfg: dict) -> None:
    cfg["schedules"] = [s for s in cfg["schedules"] if s["id"] == "morning-tokyo"]
    cfg["schedules"][0]["targetIds"] = ["cats"]


def job_end_to_end(*, backend: str = "moto") -> tuple[Measured, Measured]:
    """``POST /jobs`` to a delivered job (the admission, its execution and delivery), then one events
    page and its ack."""
    with bench_runtime(backend=backend, mutate=_one_job_plan) as bench:
        warm = dict(JOB_BODY, idempotency_key="bench-warm-up")
        status, body = bench.job_call("POST", "/jobs", warm)
        assert status == 202, body
        bench.settle()
        bench.job_call("GET", f"/jobs/{quote(body['job']['job_id'])}/events")
        with bench.measure() as job:
            status, body = bench.job_call("POST", "/jobs", JOB_BODY)
            assert status == 202, body
            bench.settle()
        job_id = body["job"]["job_id"]
        delivered = bench.delivered(job_id)
        with bench.measure() as page:
            status, events = bench.job_call("GET", f"/jobs/{quote(job_id)}/events")
            assert status == 200 and events["events"], events
            status, acked = bench.job_call("POST", f"/jobs/{quote(job_id)}/events/ack",
                                           {"ack_through": events["events"][-1]["event_id"]})
            assert status == 200, acked
        return (Measured("POST /jobs, end to end", delivered, job, {"api_requests": 1}),
                Measured("events page + ack", 0, page, {"api_requests": 2, "events": len(events["events"])}))


def _schedules(count: int) -> Callable[[dict], None]:
    """A config of ``count`` enabled schedules: ``bench-1`` (the warm-up fire's) and clones of it."""
    def mutate(cfg: dict) -> None:
        first = next(s for s in cfg["schedules"] if s["id"] == "bench-1")
        cfg["schedules"] = [first] + [dict(first, id=f"idle-{k}") for k in range(1, count)]
    return mutate


def idle_tick(*, backend: str = "moto", schedules: int | None = None) -> Measured:
    """One sweep tick with no live work: the fixed cost the stack pays every sweep interval. The tick
    reads every enabled schedule's watch (missed fires), so its cost depends on how many the
    config has: ``schedules`` gives it that many (default: the bench config's own)."""
    with bench_runtime(backend=backend, mutate=_schedules(schedules) if schedules else None) as bench:
        bench.fire("bench-1", WARM_UP)
        bench.settle()
        bench.rt.sweep()  # its first tick starts the schedule watches: not the steady state
        bench.rt.clock.advance(60_000)
        with bench.measure() as window:
            bench.rt.sweep()
        return Measured("idle sweep tick", 0, window, {"scheduler_fires": 1, "schedules": len(bench.rt.wiring.config.schedules)})


def sweep_flatness(finished: list[int], *, backend: str = "twin") -> dict[int, Measured]:
    """The sweep's requests with ``n`` finished slots in the ledger (plus one live, stalled slot),
    for each ``n``: cloned from one real finished slot, so every item has the pipeline's shape."""
    out: dict[int, Measured] = {}
    for n in finished:
        with bench_runtime(backend=backend) as bench:
            rt = bench.rt
            result = bench.fire("bench-1", WARM_UP)
            bench.settle()
            template = result["slot_id"]
            clone_finished(rt, template, n)
            bench.rt.sweep()  # the stack's first tick starts the schedule watches
            live = bench.fire("bench-1", MEASURED)  # a live slot whose message is then lost
            _drop_execution_messages(rt)
            rt.clock.advance(31 * 60_000)  # past queuedTimeoutMs: the stall rule ends it
            with bench.measure() as window:
                swept = rt.sweep()
            assert rt.wiring.ledger.get_slot(live["slot_id"]).status == "failed", swept
            out[n] = Measured(f"sweep with {n} finished slots", 0, window, {"swept": swept})
    return out


def sweep_live(live: list[int], *, backend: str = "twin", schedule: str = "bench-10") -> dict[int, Measured]:
    """One sweep tick with ``n`` live ``schedule`` slots in the ActiveSlots index, for each ``n``
    (the scale model: what a live slot costs the sweep). Each is a copy of one admitted slot
    whose cells are queued (dispatched a minute ago, so no rule acts on it): the sweep reads it and
    leaves it, as it does every healthy live slot each minute."""
    out: dict[int, Measured] = {}
    for n in live:
        with bench_runtime(backend=backend) as bench:
            rt = bench.rt
            bench.rt.sweep()  # the stack's first tick starts the schedule watches
            template = bench.fire(schedule, MEASURED)["slot_id"]
            _drop_execution_messages(rt)
            clone_live(rt, template, n - 1) if n else rt.wiring.ledger.finish_slot(template, "failed", rt.clock.now_ms())
            rt.clock.advance(60_000)
            with bench.measure() as window:
                swept = rt.sweep()
            assert swept["activeSlots"] == n and swept["recovered"] == swept["scanned"] == 0, swept
            out[n] = Measured(f"sweep with {n} live slots", 0, window, {"swept": swept})
    return out


def clone_live(rt: Any, template_slot: str, count: int) -> None:
    """``count`` copies of a live slot's partition, each in the active index under its own shard."""
    from pixivflow import aws
    from pixivflow.adapters.dynamo_ledger import shard_of

    ddb = aws.client("dynamodb")
    table = rt.env["LEDGER_TABLE"]
    items = ddb.query(TableName=table, KeyConditionExpression="pk = :pk", ConsistentRead=True,
                      ExpressionAttributeValues={":pk": {"S": f"SLOT#{template_slot}"}})["Items"]
    for n in range(count):
        slot_id = f"{template_slot}-live-{n:06d}"
        for item in items:
            clone = {**item, "pk": {"S": f"SLOT#{slot_id}"}, "slotId": {"S": slot_id}}
            if "activePk" in item:
                created = item["activeSk"]["S"].partition("#")[0]
                clone |= {"activePk": {"S": f"ACTIVE#{shard_of(slot_id):02d}"}, "activeSk": {"S": f"{created}#{slot_id}"}}
            ddb.put_item(TableName=table, Item=clone)


def clone_finished(rt: Any, template_slot: str, count: int) -> int:
    """Write ``count`` copies of a finished slot's partition (its slot item, cells and intents,
    outcome record included) straight into the table, bypassing the meter."""
    from pixivflow import aws

    ddb = aws.client("dynamodb")
    table = rt.env["LEDGER_TABLE"]
    items = ddb.query(TableName=table, KeyConditionExpression="pk = :pk", ConsistentRead=True,
                      ExpressionAttributeValues={":pk": {"S": f"SLOT#{template_slot}"}})["Items"]
    assert not any("activePk" in i or "duePk" in i for i in items)
    written = 0
    batch: list[dict] = []
    for n in range(count):
        slot_id = f"{template_slot}-old-{n:06d}"
        for item in items:
            clone = dict(item)
            clone["pk"] = {"S": f"SLOT#{slot_id}"}
            clone["slotId"] = {"S": slot_id}
            batch.append({"PutRequest": {"Item": clone}})
            if len(batch) == 25:
                ddb.batch_write_item(RequestItems={table: batch})
                written += len(batch)
                batch = []
    if batch:
        ddb.batch_write_item(RequestItems={table: batch})
        written += len(batch)
    return written


def _drop_execution_messages(rt: Any) -> None:
    from pixivflow import aws

    sqs = aws.client("sqs")
    url = rt.env["EXECUTION_QUEUE_URL"]
    while True:
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        if not messages:
            return
        for m in messages:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
