"""The job rules of the oracle (spec §12, §13.21-§13.23; issues 20 and 21), on the converged world
of ``jobs_world.JobsActor``. Each rule as a user of the Protocol would notice it:

* [jobs] every consumer request was answered without a 5xx, as documented (checked as answers
  arrive, in ``JobsActor``); a job's idempotency key gives one job: every answer for the key named
  the same job, the ledger holds exactly one slot for it (spec §13.21: the refetch route shares
  the identity space).
* [events] exactly one terminal event per job, and it says what the ledger says: the Job
  projection's status and outcome equal the terminal event's (a callback never changes a job,
  whatever its rows' fates).
* [callback] a job that declared a ``callback_url`` has one ``event_callback`` row per projected
  event and none for a job that declared none; every row ended (``done`` or ``dead``); a ``done``
  row's event reached the receiver and was accepted at least once; a ``dead`` row spent at most
  its eight attempts; the receiver never got more posts of one event than the row counted
  attempts (one post per attempt, the attempt counted at its claim).
* [ack] the durable cursor never moved backwards, never past the newest event, and is always one
  of the job's own events (also checked after every ack, in ``JobsActor.check_cursor``).
* [cancel] no route post after a committed cancel: a post of a cancelled job's intent that reached
  the downstream after the commit belongs to a claim made before it (a post in flight settles by
  README "Cancel": it is not recorded, the job stays cancelled); every row that was actionable in
  the state the cancel committed on ends ``cancelled``, the one in flight too (but a Telegram review
  row marked ``sending``, which the route settles ``uncertain``: [R2]); the job ends cancelled.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

CALLBACK_KIND = "event_callback"
ACCEPTED = ("ok", "conflict")  # the receiver's answers that end a row (2xx / 409)
STATUS_FOR_TERMINAL = {"job.succeeded": "succeeded", "job.failed": "failed", "job.expired": "expired",
                       "job.cancelled": "cancelled"}


def check_jobs(rt: Any, actor: Any) -> list[str]:
    from pixivflow.domain.protocol import EVENT_TYPE_FOR_KIND, TERMINAL_EVENT_KINDS, build_event, event_id, project_job
    from pixivflow.services.job_events import callback_key

    wiring = rt.wiring
    ledger, store, rows = wiring.ledger, wiring.jobs, wiring.outbox_rows
    problems = list(actor.problems) + list(actor.receiver.problems)
    posts_by_key: dict[str, list[Any]] = defaultdict(list)
    for post in actor.receiver.posts:
        posts_by_key[post.key].append(post)
    manual = [s for s in ledger.slot_ids() if "@manual-" in s]
    # One load per job: a job's final read below reconciles that job's own items only, so the
    # states read here stay true for every job read after it.
    states = {slot_id: ledger.load(slot_id) for slot_id in manual}
    slots_by_key: dict[str, list[str]] = defaultdict(list)
    for slot_id in manual:
        slots_by_key[str(states[slot_id].slot.manual_request_id)].append(slot_id)

    # one key, one job
    for key, job_ids in actor.job_ids_by_key.items():
        if len(job_ids) != 1:
            problems.append(f"[jobs] idempotency key {key!r} named {len(job_ids)} jobs: {sorted(job_ids)}")
        if job_ids and sorted(job_ids) != sorted(slots_by_key.get(key, [])):
            problems.append(f"[jobs] key {key!r} answered {sorted(job_ids)}, the ledger holds {slots_by_key.get(key)}")
    for key, slot_ids in slots_by_key.items():
        if len(slot_ids) > 1:
            problems.append(f"[jobs] idempotency key {key!r} has {len(slot_ids)} slots: {slot_ids}")

    for slot_id in manual:
        state = states[slot_id]
        job = project_job(state.slot, state.first_cell(), state.intents, wiring.now())
        stream = store.stream(slot_id)
        requested = stream.find("job.requested")
        url = requested.callback_url if requested else None
        if url and not any(e.kind in TERMINAL_EVENT_KINDS for e in stream.events):
            # A job with a callback gets its terminal event (and its callback) without anyone
            # reading: the rollup writes it, the sweep's repair pass completes what that missed.
            problems.append(f"[events] job {slot_id} ({job['status']}) declared a callback and its stream holds no "
                            f"terminal event after convergence: {[e.kind for e in stream.events]}")
        if not any(e.kind in TERMINAL_EVENT_KINDS for e in stream.events) or slot_id in actor.cancel_commits:
            # The consumer's last read (the stream is a projection: a read materialises what the job
            # implies; one whose rollup died before writing it gets it here). Only where it can
            # change something: a page read costs a seed a sixtieth of its time.
            status, page = _final_read(rt, slot_id)
            stream = store.stream(slot_id)
            if status != 200:
                problems.append(f"[jobs] the final events read of {slot_id} answered {status}: {str(page)[:300]}")
            elif [e["type"] for e in page["events"]] != _types(stream):
                problems.append(f"[events] job {slot_id}: the page shows {[e['type'] for e in page['events']]}, "
                                f"the stream {_types(stream)}")
        projected = [e for e in stream.events if e.kind.split("#", 1)[0] in EVENT_TYPE_FOR_KIND]
        types = _types(stream)
        # the stream's order: seq dense from 1 and ts never backwards (the head condition of each append)
        seqs, stamps = [e.seq for e in stream.events], [e.ts for e in stream.events]
        if seqs != list(range(1, len(seqs) + 1)) or stamps != sorted(stamps) or stream.head_seq != len(seqs):
            problems.append(f"[events] job {slot_id}'s stream is out of order: seq {seqs}, ts {stamps}, head {stream.head_seq}")
        terminal = [t for t in types if t in STATUS_FOR_TERMINAL]
        # exactly one terminal event, and it agrees with the ledger
        if len(terminal) != 1:
            problems.append(f"[events] job {slot_id} ({job['status']}, callback={bool(url)}) has terminal events "
                            f"{terminal} (stream {types})")
        elif STATUS_FOR_TERMINAL[terminal[0]] != job["status"]:
            problems.append(f"[events] job {slot_id} is {job['status']} in the ledger but its stream ended {terminal[0]}")
        if types and types[0] != "job.accepted":
            problems.append(f"[events] job {slot_id}'s stream does not start with job.accepted: {types}")
        if slot_id in actor.cancel_commits and job["status"] != "cancelled":
            problems.append(f"[cancel] job {slot_id}: the cancel committed at {actor.cancel_commits[slot_id]}, "
                            f"the job ended {job['status']}")
        # callbacks: one row per event, every row ended within its budget
        for e in projected:
            key = callback_key(slot_id, event_id(e.ts, e.seq))
            row = rows.get(CALLBACK_KIND, key)
            posts = posts_by_key.get(key, [])
            if not url:
                if row is not None or posts:
                    problems.append(f"[callback] job {slot_id} declared no callback_url, yet {key} has a row/posts")
                continue
            if row is None:
                problems.append(f"[callback] {key}: no callback row for a projected event")
                continue
            if len(posts) > row.attempts:
                problems.append(f"[callback] {key}: {len(posts)} posts for {row.attempts} counted attempts "
                                f"({[p.outcome for p in posts]})")
            if row.status == "done":
                if not any(p.outcome in ACCEPTED for p in posts):
                    problems.append(f"[callback] {key} is done but the receiver never accepted it ({[p.outcome for p in posts]})")
            elif row.status == "dead":
                if row.attempts > row.max_attempts:
                    problems.append(f"[callback] {key} is dead after {row.attempts}/{row.max_attempts} attempts")
                if row.attempts < row.max_attempts and not any(p.outcome == "permanent" for p in posts):
                    problems.append(f"[callback] {key} is dead after {row.attempts}/{row.max_attempts} attempts with no "
                                    f"permanent refusal: {row.last_error!r}")
            else:
                problems.append(f"[callback] {key} never ended: {row.status} (attempts {row.attempts}/{row.max_attempts}, "
                                f"due {row.next_attempt_at})")
            if row.payload.get("event", {}).get("type") != build_event(job, e.kind, e.ts, e.seq)["type"]:
                problems.append(f"[callback] {key} carries another event than the stream's")
        # the ack cursor
        if stream.cursor is not None and stream.cursor not in [(e.ts, e.seq) for e in projected]:
            problems.append(f"[ack] cursor of {slot_id} is {stream.cursor}, not one of its events")
        if slot_id in actor.cursors and stream.cursor is not None and stream.cursor < actor.cursors[slot_id]:
            problems.append(f"[ack] cursor of {slot_id} ended at {stream.cursor}, behind {actor.cursors[slot_id]}")
        # no route post after a committed cancel (unless claimed before it: a post in flight)
        committed = actor.cancel_commits.get(slot_id)
        if committed is not None:
            # every row that was actionable when the cancel committed stays cancelled, also one being
            # posted at that moment: its answer is not recorded (README "Cancel")
            for i in state.intents:
                if i.idempotency_key in actor.cancelled_rows.get(slot_id, ()) and i.outbox_status != "cancelled":
                    problems.append(f"[cancel] {i.idempotency_key} was actionable when the cancel of {slot_id} committed "
                                    f"and ended {i.status}/{i.outbox_status}")
            keys = {i.idempotency_key for i in state.intents}
            for at, key in actor.downstream_posts:
                if key in keys and at > committed and not any(c < committed for c in actor.claims.get(key, [])):
                    problems.append(f"[cancel] {key} was posted at {at}, after the cancel of {slot_id} committed at "
                                    f"{committed}, by a claim made after it ({actor.claims.get(key)})")
    # callbacks to a job the ledger does not know, or posts of rows that do not exist
    for key, posts in posts_by_key.items():
        if rows.get(CALLBACK_KIND, key) is None:
            problems.append(f"[callback] the receiver got {len(posts)} posts for {key}, which has no row")
    return problems


def _types(stream: Any) -> list[str]:
    from pixivflow.domain.protocol import EVENT_TYPE_FOR_KIND

    return [EVENT_TYPE_FOR_KIND[k] for k in (e.kind.split("#", 1)[0] for e in stream.events) if k in EVENT_TYPE_FOR_KIND]


def _final_read(rt: Any, job_id: str) -> tuple[int, Any]:
    import json
    from urllib.parse import quote

    from jobs_world import JOBS_TOKEN
    from pixivflow.local.harness import http_event
    from pixivflow.local.lambda_context import context_for

    event = http_event("GET", f"/jobs/{quote(job_id, safe='')}/events", None, {"authorization": f"Bearer {JOBS_TOKEN}"})
    answer = rt.handlers["job_events"](event, context_for("job_events"))
    return int(answer["statusCode"]), json.loads(answer["body"]) if answer.get("body") else None


def job_counts(actor: Any) -> Counter[str]:
    """Figures for the seed's line."""
    return Counter({"jobs": len(actor.plans), "callback_posts": len(actor.receiver.posts),
                    "cancels": len(actor.cancel_commits)})


__all__ = ["check_jobs", "job_counts"]
