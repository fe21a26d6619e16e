"""The spec §13 oracle and one seeded chaos run, shared by ``test_chaos.py`` (a few seeds in
``make test``) and ``sim.py`` (``make sim``: ten thousand seeds on the in-memory twins).

A run drives simulated days of the demo schedules through the real handlers while
``chaos_support.Chaos`` injects faults, cuts one last occurrence mid-flight, stops every fault, lets
the system converge on the virtual clock and checks the ledger and the downstream against spec §13.
"""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from chaos_support import Chaos, Rates, dlq_depths
from pixivflow.domain.ack import parse_idempotency_key
from pixivflow.domain.cells import TERMINAL_SLOT_STATES, CellStatus
from pixivflow.domain.model import ACTIONABLE_OUTBOX, CONFIRMED_LEDGER, LedgerStatus
from pixivflow.domain.protocol import CANCELLED_REASON, EXPIRED_REASONS

CONVERGE_MS = 8 * 3_600_000
SUMMARY = "execution.summary"
LOG_ENVELOPE = {"level", "location", "timestamp", "service", "cold_start", "function_name", "function_memory_size",
                "function_arn", "function_request_id", "xray_trace_id", "sampling_rate", "message"}
CUT_SCHEDULE = "morning-tokyo"


def _count_summary_items(rt, slot_id: str) -> int:
    from pixivflow import aws

    resp = aws.client("dynamodb").query(
        TableName=rt.env["LEDGER_TABLE"], ConsistentRead=True, Select="COUNT",
        KeyConditionExpression="pk = :pk AND begins_with(sk, :sk)",
        ExpressionAttributeValues={":pk": {"S": f"SLOT#{slot_id}"}, ":sk": {"S": f"EVT#L#{SUMMARY}"}},
    )
    return int(resp["Count"])


def check_invariants(rt, downstream, chaos) -> tuple[list[str], Counter, list[str]]:
    """Spec §13 on the converged ledger and downstream.

    Returns (violations, slots by status, outbox rows of terminal cells still inside their budget)."""
    ledger = rt.wiring.ledger
    config = rt.wiring.config
    now = rt.clock.now_ms()
    problems: list[str] = []
    by_status: Counter = Counter()
    records = downstream.records  # idempotency key -> record (accepted records only)
    budget_rows: list[str] = []  # actionable rows of terminal cells whose own budget still runs (reported)

    # 2. no (route, work) in two downstream records; no cell with two records
    per_work: dict[tuple, list[str]] = defaultdict(list)
    per_cell: dict[tuple, list[str]] = defaultdict(list)
    for key in records:
        route, work_type, work_id, slot_id, target_id = parse_idempotency_key(key)
        per_work[(route, work_type, work_id)].append(key)
        per_cell[(slot_id, target_id, route)].append(key)  # fan-out: one record per route (spec §10.3)
    for work, keys in per_work.items():
        if len(keys) > 1:
            problems.append(f"[2] work {work} delivered {len(keys)} times: {keys}")
    for cell_id, keys in per_cell.items():
        target = config.target(cell_id[1])
        if target is not None and target.single_work and len(keys) > 1:
            problems.append(f"[2] single-work cell {cell_id[:2]} has {len(keys)} downstream records on {cell_id[2]}: {keys}")

    # (route, work_id) some row may have posted: a review recorded uncertain (it may be in the chat)
    maybe_on_route = {(i.route, str(i.work_id)) for sid in ledger.slot_ids() for i in ledger.load(sid).intents
                      if i.remote_status == "uncertain"}

    for slot_id in ledger.slot_ids():
        state = ledger.load(slot_id)
        slot = state.slot
        by_status[slot.status] += 1
        # 1. every slot terminal, every snapshot cell materialised and terminal
        if slot.status not in TERMINAL_SLOT_STATES:
            problems.append(f"[1] slot {slot_id} is {slot.status}")
        if state.missing_targets():
            problems.append(f"[1] slot {slot_id} never materialised cells {state.missing_targets()}")
        for cell in state.snapshot_cells():
            where = f"{slot_id}/{cell.target_id}"
            if not cell.terminal:
                problems.append(f"[1] cell {where} is {cell.status}")
            target = config.target(cell.target_id)
            routes = target.routes() if target else []
            intents = state.intents_for(cell.target_id)
            # 3. submitted <=> a confirmed intent AND a downstream record of that exact work
            if cell.status == CellStatus.SUBMITTED and routes:
                for route in routes:
                    confirmed = [i for i in intents if i.route == route and i.status in CONFIRMED_LEDGER]
                    if not confirmed:
                        problems.append(f"[3] submitted cell {where} has no delivered/duplicate intent on {route}")
                        continue
                    for i in confirmed:
                        if i.work_id != cell.work_id:
                            problems.append(f"[3] submitted cell {where} (work {cell.work_id}) confirmed by intent of work {i.work_id}")
                        rec = records.get(i.idempotency_key)
                        if rec is None and i.status == LedgerStatus.DUPLICATE and i.attempts == 0 and (
                                (route, str(cell.work_id)) in maybe_on_route or any(
                                    parse_idempotency_key(key)[0] == route and str(r.get("work_id")) == str(cell.work_id)
                                    for key, r in records.items())):
                            # never sent: the route got the work from the cell that held it first
                            # (binding._record_taken), under that cell's key, or may have (its
                            # review recorded uncertain: sending it again could post it twice)
                            continue
                        if rec is None or str(rec.get("work_id")) != str(cell.work_id):
                            problems.append(f"[3] submitted cell {where}: downstream never recorded work {cell.work_id} "
                                            f"(key {i.idempotency_key}, remote failed={i.idempotency_key in chaos.remote_failed})")
            if cell.status == CellStatus.SUBMITTED and not routes and intents:
                problems.append(f"[3] download-only cell {where} has intents")
            # 4. single-work: one intent per route, all for the cell's work
            if target is not None and target.single_work:
                per_route = Counter(i.route for i in intents)
                for route, n in per_route.items():
                    if n > 1:
                        problems.append(f"[4] single-work cell {where} has {n} intents on {route}: {[i.work_id for i in intents]}")
                for i in intents:
                    if i.work_id != cell.work_id:
                        problems.append(f"[4] cell {where} bound to {cell.work_id} has an intent for work {i.work_id}")
            # 6. reason codes
            if cell.terminal:
                if cell.status == CellStatus.SUBMITTED and cell.terminal_reason_code:
                    problems.append(f"[6] submitted cell {where} carries reason {cell.terminal_reason_code}")
                if cell.status != CellStatus.SUBMITTED and not cell.terminal_reason_code:
                    problems.append(f"[6] {cell.status} cell {where} has no terminalReasonCode (lastError={cell.last_error!r})")
            # 7. no actionable outbox row left behind a terminal cell (unless its budget still runs)
            for i in intents:
                if cell.terminal and i.outbox_status in ACTIONABLE_OUTBOX:
                    running = (i.outbox_status == "retry_wait" and i.next_attempt_at > now and i.attempts < i.max_attempts) or (
                        i.outbox_status == "processing" and (i.lease_until or 0) > now)
                    if running:
                        budget_rows.append(i.idempotency_key)
                    else:
                        problems.append(f"[7] {cell.status} cell {where}: outbox row {i.idempotency_key} still "
                                        f"{i.outbox_status} (due {i.next_attempt_at}, attempts {i.attempts}/{i.max_attempts})")
            # 3b. a downstream record whose cell did not end submitted (posted, yet reported as not delivered).
            # The one exception is a consumer's cancel (spec §12.7, README "Cancel"): it fails every open
            # cell, also one whose post was in flight or already answered but not yet rolled up; whether
            # such a post came before the commit is oracle_jobs' [cancel] rule. And fan-out: a route whose
            # row failed fails the cell while another route holds the work (spec §10.3), a reported
            # partial delivery, not a lie; so does a route that never got a row when the sweep's stall
            # or timeout rule ended the cell (its executor died between two rows' writes and no
            # re-dispatch ran it again: seed 5206).
            cancelled = cell.status == CellStatus.FAILED and cell.terminal_reason_code == CANCELLED_REASON
            unqueued = cell.status == CellStatus.FAILED and cell.terminal_reason_code in EXPIRED_REASONS and any(
                r not in {j.route for j in intents} for r in routes)
            for i in intents:
                partial = unqueued or any(j.route != i.route and j.status == "failed" for j in intents)
                if i.idempotency_key in records and cell.status != CellStatus.SUBMITTED and not cancelled and not partial:
                    problems.append(f"[3] downstream holds {i.idempotency_key} but cell {where} ended {cell.status} "
                                    f"({cell.terminal_reason_code}); intent {i.status}/{i.outbox_status}")
        # 5. exactly one execution.summary per terminal slot
        if slot.status in TERMINAL_SLOT_STATES:
            n = _count_summary_items(rt, slot_id)
            record = ledger.get_event(slot_id, SUMMARY)
            if n != 1 or record is None:
                problems.append(f"[5] terminal slot {slot_id} has {n} {SUMMARY} events")
            # 5b. the record says what the ledger says (issue 20, routes world seed 379: a stall
            # committed between a rollup's record and its close, and the slot ended failed under a
            # ``success`` record); its logged lines are checked against the slot in check_outcome_lines.
            recorded = ((record or {}).get("detail") or {}).get("outcome", {}).get("status")
            if record is not None and recorded != slot.status:
                problems.append(f"[5b] terminal slot {slot_id} is {slot.status} but its {SUMMARY} says {recorded}")

    # 2 (cont.) a downstream record must belong to a slot of this ledger
    known = set(ledger.slot_ids())
    for key in records:
        slot_id = parse_idempotency_key(key)[3]
        if slot_id not in known:
            problems.append(f"[2] downstream record {key} names an unknown slot")
    return problems, by_status, budget_rows


def _cut_mid_flight(rt, chaos, after_ms: int):
    """One more occurrence under chaos, NOT settled: the faults stop while it is in flight
    (leases held by hard crashes, delayed messages, retry_wait rows), so convergence after
    the stop has real work to do."""
    from pixivflow.domain.occurrence import fires_between

    schedule = rt.wiring.config.schedule(CUT_SCHEDULE)
    at = fires_between(schedule.cron, schedule.timezone, after_ms, after_ms + 86_400_000)[0]
    rt.clock.set(at)
    result = rt.fire(CUT_SCHEDULE, at)
    for _ in range(chaos.cut_minutes()):
        rt.pump()
        rt.clock.advance(60_000)
        rt.sweep()
    rt.pump()
    return CUT_SCHEDULE, at, result


def check_outcome_lines(rt: Any, chaos: Chaos, outcomes: Callable[[str], list[dict]]) -> list[str]:
    """Spec §13.18: one logged schedule.outcome per terminal slot, across re-rolls. The one exception
    is a crash AFTER the line was written and BEFORE the slot was closed: a log write can never be
    atomic with a ledger write, and the engine chooses to repeat the line (identical, keyed by
    slot_id) rather than lose it. Only that window may produce another, identical line: one per
    crash in it (a second crash there, on the recovering close, repeats it once more)."""
    problems = []
    for slot_id in rt.wiring.ledger.slot_ids():
        lines = outcomes(slot_id)
        # Each crash in that window repeats the line once more (make sim found a seed with two). The
        # window holds the close alone (services.rollup.finish/close: finish_slot, or
        # leave_active_index). The slot's notification rows are written before the record, out of it
        # (seeds 3901, 4552, 4543: deaths at a row's put or its queue send, uncounted here, once
        # repeated the line); a job's event rows come after the close.
        closing_crashes = sum(f"before ledger.{op}({slot_id}" in t for t in chaos.trace
                              for op in ("finish_slot", "leave_active_index"))
        identical = len({json.dumps({k: v for k, v in line.items() if k not in LOG_ENVELOPE}, sort_keys=True)
                         for line in lines}) == 1
        if len(lines) > 1:
            closing_crashes += _closed_late(rt, slot_id)
        if not (len(lines) == 1 or (identical and 1 < len(lines) <= 1 + closing_crashes)):
            problems.append(f"[5] slot {slot_id} logged schedule.outcome {len(lines)} times "
                            f"({closing_crashes} crash(es) between logging and closing)")
        slot = rt.wiring.ledger.get_slot(slot_id)
        wrong = sorted({str(line.get("status")) for line in lines} - {slot.status}) if slot else []
        if wrong:  # 5b. an operator reading the log sees the slot's final status (issue 20)
            problems.append(f"[5b] slot {slot_id} is {slot.status} but its schedule.outcome line says {wrong}")
    return problems


def _closed_late(rt: Any, slot_id: str) -> int:
    """1 when the writer closed the slot ORPHAN_RECORD_MS or more after its outcome record: alive
    but late (a container paused at its close while the clock runs on), so the sweep took it for
    dead and logged the stored record.
    The rollup's chosen trade-off (services.rollup.record_outcome), like a crash in the window."""
    from pixivflow.services.rollup import ORPHAN_RECORD_MS

    state = rt.wiring.ledger.load(slot_id)
    record = state.events.get(SUMMARY) or {}
    closed = state.slot.completed_at
    return int(record.get("ts") is not None and closed is not None and closed - int(record["ts"]) >= ORPHAN_RECORD_MS)


@dataclass
class SeedResult:
    seed: int
    problems: list[str]
    fired: int
    slots: int
    line: str
    faults: Counter = field(default_factory=Counter)
    trace: list[str] = field(default_factory=list)


@contextmanager
def still_ledger(rt: Any) -> Iterator[None]:
    """The checks' reads of a converged ledger that nothing writes to meanwhile: one scan for the
    slot ids and one query per slot, however often the checks ask (they asked about eight full
    scans and three loads per slot). Only around checks that write nothing: the jobs oracle reads
    through the API, whose reads reconcile."""
    ledger = rt.wiring.ledger
    real_load, ids = ledger.load, ledger.slot_ids()
    states: dict[str, Any] = {}

    def load(slot_id: str) -> Any:
        if slot_id not in states:
            states[slot_id] = real_load(slot_id)
        return states[slot_id]

    ledger.slot_ids, ledger.load = (lambda: list(ids)), load
    try:
        yield
    finally:
        del ledger.slot_ids, ledger.load  # the instance's stand-ins go; the class's methods answer again


def check_missed_fires(rt: Any, scheduled: list[tuple[str, int]]) -> list[str]:
    """[missed] Every fire of the window either ran or was reported missed, never both, never neither
    (issue 16; spec §1.1): a fire Scheduler never delivered, or whose every delivery was refused or
    failed, has no slot, and the sweep's missed-fire check must count it once, past its grace
    window. Only a fire after the sweep first saw its schedule (the watch's ``firstSeenAt``) is
    checked: history before a watch never alerts, by design, so such a fire must not be reported.

    The clock is taken past the last fire's grace window and the sweep ticks twice (a tick checks up
    to MISSED_FIRES_PER_SCHEDULE fires of a schedule; the window has one or two). It runs last,
    after every other check: its ticks write the missed-fire items and move the watches."""
    from pixivflow.adapters.sweep_state import missed_pk
    from pixivflow.domain.occurrence import occurrence_for_fire

    if not scheduled:
        return []
    config = rt.wiring.config
    grace_ms = config.schedulerRuntime.trigger.graceMinutes * 60_000
    past = max(at for _, at in scheduled) + grace_ms + 60_000
    if rt.clock.now_ms() < past:
        rt.clock.set(past)
    for _ in range(2):  # the window holds far fewer fires a schedule than a tick checks
        rt.clock.advance(60_000)  # a tick a minute on: the lease of a tick that died has lapsed
        rt.sweep()
    schedules = {s.id: s for s in config.schedules}
    watches = rt.wiring.sweep_state.watches(sorted({sid for sid, _ in scheduled}))
    table = rt.env["LEDGER_TABLE"]
    client = rt.wiring.ledger._client  # noqa: SLF001 - the oracle reads the table as an outside check would
    problems = [f"[missed] schedule {sid} has no missed-fire watch after the sweep's ticks"
                for sid in sorted({sid for sid, _ in scheduled}) if sid not in watches]
    for schedule_id, at in scheduled:
        schedule = schedules[schedule_id]
        slot_id = occurrence_for_fire(schedule_id, schedule.cron, schedule.timezone, at).slot_id
        ran = rt.wiring.ledger.get_slot(slot_id) is not None
        reported = "Item" in client.get_item(TableName=table, Key={"pk": {"S": missed_pk(slot_id)}, "sk": {"S": "META"}},
                                             ConsistentRead=True)
        watch = watches.get(schedule_id)
        watched = watch is not None and at > watch.first_seen_ms
        if ran and reported:
            problems.append(f"[missed] fire {slot_id} ran and was also reported missed")
        elif watched and not ran and not reported:
            problems.append(f"[missed] fire {slot_id} never ran and was never reported missed "
                            f"(watch first seen {watch.first_seen_ms if watch else None})")
        elif reported and not watched:
            problems.append(f"[missed] fire {slot_id} was reported missed though its schedule's watch began after it")
    return problems


def index_lag(seed: int) -> Callable[[], int]:
    """Eventually consistent indexes (DESIGN §4): half the seeds see every index write up to 3 s late."""
    rng = random.Random(f"{seed}:index-lag")
    if rng.random() < 0.5:
        return lambda: 0
    return lambda: rng.choice((0, 0, rng.randint(1, 3_000)))


def run_seed(rt: Any, downstream: Any, seed: int, *, start_ms: int, days: int, outcomes: Callable[[str], list[dict]],
             rates: Rates | None = None) -> SeedResult:
    """One seeded chaos run on a started runtime; returns what the oracle found."""
    chaos = Chaos(rt, downstream, seed, rates).install()
    until = start_ms + days * 86_400_000
    fired = rt.run_schedules(until, on_fire=chaos.on_fire)
    fired.append(_cut_mid_flight(rt, chaos, until))
    chaos.stop()
    settled_ms = rt.settle(max_ms=CONVERGE_MS)
    problems, by_status, budget_rows = check_invariants(rt, downstream, chaos)
    problems += check_outcome_lines(rt, chaos, outcomes)
    if sum(by_status.values()) != len(fired):
        problems.append(f"[0] {len(fired)} occurrences made {sum(by_status.values())} slots")
    all_cells = [c for s in rt.wiring.ledger.slot_ids() for c in rt.wiring.ledger.load(s).snapshot_cells()]
    cells = Counter(str(c.status) for c in all_cells)
    reasons = Counter(c.terminal_reason_code for c in all_cells if c.terminal_reason_code)
    slots = {str(k): v for k, v in sorted(by_status.items())}
    line = (f"seed={seed:>2} fires={len(fired)} slots={slots} cells={dict(sorted(cells.items()))} "
            f"reasons={dict(sorted(reasons.items()))} "
            f"deliveries={len(downstream.records)} posts={len(downstream.requests)} converge={settled_ms // 60_000}min "
            f"budget_rows={len(budget_rows)} "
            f"dlq={dlq_depths(rt)} | {chaos.summary()}")
    involved = {s for s in rt.wiring.ledger.slot_ids() if any(s in p for p in problems)}
    trace = [t for t in chaos.trace if any(s in t for s in involved)]
    faults = Counter({k: v for k, v in chaos.counts.items() if not k.startswith("crash@")})
    return SeedResult(seed, problems, len(fired), sum(by_status.values()), line, faults, trace)
