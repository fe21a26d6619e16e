"""The consumers of one seed (issue 20 "everything the product does is in the scenarios"; spec
§11.3, §12): Workflow Protocol v1 jobs with callbacks, cancel and ack, and manual refetches, as
concurrent invocations of the real job_events and trigger functions under ``baton.Baton``.

During the window a seeded set of consumers (``JobsActor``):

* POST Tasks (API Gateway v2 events into the job_events handler). Each Task selects one of the
  targets only one simulated plan selects (``JOB_TARGETS``: an unambiguous ``params.target_id``),
  so the job's cell competes with the scheduled cells for the same works on the same route.
  Some declare a ``callback_url`` on the loopback host the config allows; some are POSTed twice
  at the same instant and again later with the same idempotency key (a duplicate may not make a
  second job); a POST whose invocation died is retried by its consumer 1-3 minutes later, as a
  client that got API Gateway's 5xx would.
* cancel some jobs at a random moment, racing the executor and the deliverer (spec §12.7: one
  commit, always 200 with the job);
* read the event stream with ``after`` (the last event id they saw) or ``unacked=1`` and ack
  through the last event they read (the ack cursor, spec §12.5);
* refetch through the trigger function's ``POST /internal/targets/{id}/refetch``; some refetches
  reuse a job's key (a UUID), which names the same job (spec §13.21: one identity space).

The callback receiver (``CallbackReceiver``) is an ``httpx.MockTransport`` handed to the callback
sender (runtime override ``callback_transport``): no socket is opened. Like the downstream it
fails (5xx, 429, a refused connection), loses answers (it processed the event, the answer never
arrived), answers slowly (virtual seconds; past the attempt's total deadline the attempt times
out, as the consumer transport's deadline would cut a drip-feeding receiver) and, rarely, refuses
for good (4xx: the row is dead at once). One path always answers 503: its rows spend their eight
attempts and end dead, the job unchanged.

Every answer is checked as it arrives (no 5xx, one job per key, the cursor never backwards and
never past the last event); ``oracle_jobs.check_jobs`` holds the converged world to the rest.
"""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx

if TYPE_CHECKING:
    from world import World

JOBS_TOKEN = "sim-jobs"
# Targets exactly one simulated plan selects (world.SIM_SCHEDULES): a Task naming one is never ambiguous.
JOB_TARGETS = ("landscape", "dogs", "sky-topic", "fantasy-novels", "flaky")
CALLBACK_HOST = "127.0.0.1"
CALLBACK_BASE = f"http://{CALLBACK_HOST}:8089"
DOWN_PATH = "/down"  # this receiver answers 503 to everything: its rows end dead after 8 attempts
MINUTE_MS = 60_000
HANDLERS = {"job_events": "job_events", "trigger": "trigger"}


@dataclass(frozen=True)
class ReceiverRates:
    conflict: float = 0.04  # 409: "already have it" (ends the row like a 2xx)
    retryable: float = 0.10  # 500 / 503 / 429
    refused: float = 0.04  # the connection is refused: nothing received
    lost: float = 0.06  # processed, but the answer never reaches the sender
    slow: float = 0.10  # takes 1-60 virtual seconds; past the attempt's deadline it times out
    permanent: float = 0.01  # 400: dead at once


@dataclass
class CallbackPost:
    at: int
    key: str  # webhook-id: the row key (job-event:<job>:<event id>)
    job_id: str
    event_type: str
    outcome: str  # ok | conflict | retryable | refused | lost | timeout | permanent | down
    path: str


class CallbackReceiver:
    """The consumers' callback endpoints, in process (see the module docstring)."""

    def __init__(self, world: "World", rates: ReceiverRates | None = None) -> None:
        self.world = world
        self.rates = rates or ReceiverRates()
        self.rng = world.rng["callbacks"]
        self.posts: list[CallbackPost] = []
        self.problems: list[str] = []
        self.active = True
        self.deadline_computed: dict[int, int] = {}  # invocation thread -> when its last attempt's deadline was cut

    def transport(self) -> httpx.BaseTransport:
        """The ``callback_transport`` factory: one transport per request, as the sender asks."""
        return httpx.MockTransport(self._handle)

    def _check_deadline(self, key: str, limit_s: float) -> None:
        """Issue 21 "callbacks end": an attempt's total deadline is the smaller of the callback's own
        timeout and the invocation's remaining time minus the settle margin, and an attempt that
        would get less than the minimum is never started (its record goes back to the queue
        unclaimed). The receiver sees the deadline the sender set (httpx's timeout extension)."""
        import threading

        from pixivflow.services.callbacks import CALLBACK_TIMEOUT_S
        from pixivflow.services.outbox import MIN_ATTEMPT_MS, SETTLE_MARGIN_MS

        world = self.world
        limit_ms = limit_s * 1000
        started = world.started.get(threading.get_ident())
        if limit_ms < MIN_ATTEMPT_MS:
            self.problems.append(f"[callback] {key}: an attempt was started with a {limit_ms:.0f} ms deadline "
                                 f"(less than {MIN_ATTEMPT_MS} ms: it should have gone back to its queue unclaimed)")
        if limit_s > CALLBACK_TIMEOUT_S:
            self.problems.append(f"[callback] {key}: an attempt's deadline {limit_s:.1f} s exceeds the callback timeout")
        computed = self.deadline_computed.get(threading.get_ident())
        if started is not None and computed is not None:
            from world import FUNCTION_TIMEOUT_MS

            left = started + FUNCTION_TIMEOUT_MS["deliver"] - computed  # when the worker cut the deadline
            if limit_ms > left - SETTLE_MARGIN_MS + 1:
                self.problems.append(f"[callback] {key}: an attempt's deadline {limit_ms:.0f} ms runs past the invocation's "
                                     f"{left} ms left minus the {SETTLE_MARGIN_MS} ms settle margin")

    def _handle(self, request: httpx.Request) -> httpx.Response:
        clock = self.world.clock
        raw = request.read()
        try:
            event = json.loads(raw)
        except ValueError:
            event = {}
        key = request.headers.get("webhook-id", "")
        path = request.url.path
        limit_s = float((request.extensions.get("timeout") or {}).get("read") or 0.0)
        self._check_deadline(key, limit_s)

        def record(outcome: str) -> None:
            self.posts.append(CallbackPost(clock.now_ms(), key, str(event.get("job_id")), str(event.get("type")), outcome, path))
            self.world.counts[f"callback.{outcome}"] += 1

        if path.startswith(DOWN_PATH):
            record("down")
            return httpx.Response(503, json={"error": "down"})
        if not self.active:
            record("ok")
            return httpx.Response(200, json={"ok": True})
        rng, r = self.rng, self.rates
        roll = rng.random()
        for outcome, rate in (("conflict", r.conflict), ("retryable", r.retryable), ("refused", r.refused),
                              ("lost", r.lost), ("slow", r.slow), ("permanent", r.permanent)):
            if roll < rate:
                break
            roll -= rate
        else:
            outcome = "ok"
        if outcome == "refused":
            record("refused")
            raise httpx.ConnectError("connection refused", request=request)
        if outcome == "retryable":
            record("retryable")
            return httpx.Response(rng.choice((500, 503, 429)), json={"error": "injected"})
        if outcome == "permanent":
            record("permanent")
            return httpx.Response(400, json={"error": "we do not want this"})
        if outcome == "lost":
            record("lost")
            raise httpx.ReadError("connection reset after the body was read", request=request)
        if outcome == "conflict":
            record("conflict")
            return httpx.Response(409, json={"ok": True, "duplicate": True})
        if outcome == "slow":
            # The attempt's TOTAL deadline (adapters.callback_http) is the client's timeout: a
            # receiver slower than it is cut there (the consumer transport's deadline), on the
            # virtual clock; one within it answers late but answers.
            takes_s = rng.randint(1, 60)
            if takes_s >= limit_s:
                clock.advance(int(limit_s * 1000))
                record("timeout")
                raise httpx.ReadTimeout("the request's total deadline has passed", request=request)
            clock.advance(takes_s * 1000)
        record("ok")
        return httpx.Response(200, json={"ok": True})


@dataclass
class JobPlan:
    """One consumer's job: its Task and what the consumer will do with it."""

    key: str
    target: str
    body: dict[str, Any]
    post_at: int
    job_id: str | None = None  # known once a POST answered
    cancel_at: int | None = None
    reads: list[int] = field(default_factory=list)
    last_event: str | None = None  # the newest event id this consumer read


@dataclass
class Answer:
    at: int
    what: str
    status: int
    body: Any


class JobsActor:
    """Schedules and runs the consumers of one seed; records what they were answered."""

    def __init__(self, world: "World") -> None:
        self.world = world
        self.rng = world.rng["jobs"]
        self.receiver = CallbackReceiver(world)
        self.plans: dict[str, JobPlan] = {}
        self.refetch_ids: dict[str, str] = {}  # request id -> target
        self.answers: list[Answer] = []
        self.job_ids_by_key: dict[str, set[str]] = defaultdict(set)
        self.problems: list[str] = []
        self.cursors: dict[str, tuple[int, int]] = {}  # job id -> newest durable cursor seen
        self.cancel_commits: dict[str, int] = {}  # job id -> virtual ms of its cancel's commit
        self.cancelled_rows: dict[str, set[str]] = {}  # job id -> rows actionable in the state its cancel committed on
        self.claims: dict[str, list[int]] = defaultdict(list)  # intent key -> virtual ms of each claim
        self.downstream_posts: list[tuple[int, str]] = []  # (virtual ms, idempotency key)

    # -- set-up -----------------------------------------------------------------------------------
    def overrides(self) -> dict[str, Any]:
        """Runtime overrides: the callback receiver as the sender's transport, and a resolver
        that answers the loopback address (no DNS lookup ever happens)."""
        return {"callback_transport": self.receiver.transport, "resolver": lambda host, port: [CALLBACK_HOST]}

    def spy(self, wiring: Any) -> None:
        """Watch the ledger's cancel commits and intent claims (the oracle's clock for "no post
        after a committed cancel"). The real methods run unchanged; only their times are noted.
        A commit or claim whose invocation died right after it is not noted: a dead claimer
        never posts, and a missed commit only weakens the check."""
        ledger, clock = wiring.ledger, self.world.clock
        real_cancel, real_claim = ledger.cancel_cells, ledger.claim_intent

        def cancel_cells(state: Any, **kwargs: Any) -> Any:
            ok = real_cancel(state, **kwargs)
            if ok and kwargs.get("cells"):
                slot_id = state.slot.slot_id
                self.cancel_commits.setdefault(slot_id, clock.now_ms())
                cells = set(kwargs["cells"])
                # (a Telegram review row that began posting is the route's to settle, not the
                # cancel's: README "Cancel", [R2] checks it is recorded)
                self.cancelled_rows.setdefault(slot_id, set()).update(
                    i.idempotency_key for i in state.intents
                    if i.target_id in cells and i.actionable and not i.began_posting)
            return ok

        def claim_intent(intent: Any, *args: Any, **kwargs: Any) -> Any:
            claimed = real_claim(intent, *args, **kwargs)
            if claimed is not None:
                self.claims[intent.idempotency_key].append(clock.now_ms())
            return claimed

        ledger.cancel_cells = cancel_cells
        ledger.claim_intent = claim_intent

        import threading

        from pixivflow.services import outbox

        real_timeout, computed = outbox.attempt_timeout_s, self.receiver.deadline_computed

        def attempt_timeout_s(own_timeout_s: float, time_left: Any) -> float:
            computed[threading.get_ident()] = clock.now_ms()
            try:
                return real_timeout(own_timeout_s, time_left)
            except Exception:
                self.world.counts["outbox.no_time_left"] += 1  # the record goes back unclaimed
                raise

        outbox.attempt_timeout_s = attempt_timeout_s
        self._unspy = lambda: setattr(outbox, "attempt_timeout_s", real_timeout)

    def unspy(self) -> None:
        getattr(self, "_unspy", lambda: None)()

    def on_downstream(self, req: Any) -> None:
        """Every route post that reaches the downstream, with the virtual time it arrived (the
        posting invocation is blocked in its request: no AWS call, so no time passes)."""
        body = req.body if isinstance(req.body, dict) else {}
        self.downstream_posts.append((self.world.clock.now_ms(), req.headers.get("idempotency-key") or str(body.get("idempotency_key"))))

    # -- the consumers' plans ------------------------------------------------------------------------
    def schedule(self, start: int, until: int) -> None:
        from pixivflow.services.manual import manual_slot_id

        rng, world = self.rng, self.world
        plans_by_target = {t.id: s.id for s in world.rt.wiring.config.schedules for t in world.rt.wiring.config.targets_for(s)
                           if t.id in JOB_TARGETS}
        jobs = rng.randint(2, 4)
        # One seed in four has a job whose receiver is down for good: its rows spend their eight
        # attempts (the budget's end, issue 21) -- an hour of backoff the settle walks through.
        down = rng.randrange(jobs) if rng.random() < 0.25 else None
        for n in range(jobs):
            target = rng.choice(JOB_TARGETS)
            as_uuid = rng.random() < 0.4  # a UUID key may also come through the refetch route
            key = str(uuid.UUID(int=rng.getrandbits(128), version=4)) if as_uuid else f"sim-{world.seed}-{n}"
            body: dict[str, Any] = {"protocol_version": "1", "job_type": "candidate_search", "idempotency_key": key,
                                    "correlation_id": f"sim:{n}", "params": {"target_id": target}}
            if n == down:
                body["callback_url"] = f"{CALLBACK_BASE}{DOWN_PATH}/{n}"
            elif rng.random() < 0.65:
                body["callback_url"] = f"{CALLBACK_BASE}/hooks/{n}?token=s3cret-{n}"
            post_at = start + rng.randrange(until - start)
            plan = JobPlan(key, target, body, post_at, job_id=manual_slot_id(plans_by_target[target], key))
            self.plans[key] = plan
            world.at(post_at, "job.post", key)
            if rng.random() < 0.35:
                world.counts["job.duplicate_now"] += 1
                world.at(post_at, "job.post", key)
            if rng.random() < 0.25:
                world.counts["job.duplicate_late"] += 1
                world.at(post_at + rng.randint(1, 20) * MINUTE_MS, "job.post", key)
            if rng.random() < 0.4:
                plan.cancel_at = post_at + rng.randint(0, 12 * 60) * 1000
                world.at(plan.cancel_at, "job.cancel", key)
            for _ in range(rng.randint(1, 2)):
                world.at(post_at + rng.randint(5, 30 * 60) * 1000, "job.read", key)
            if as_uuid and rng.random() < 0.5:
                # the same UUID through the refetch route: the same job (one identity space)
                world.at(post_at + rng.randint(0, 120) * 1000, "job.refetch", (target, key))
        for _ in range(rng.randint(0, 2)):
            request_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            target = rng.choice(JOB_TARGETS)
            at = start + rng.randrange(until - start)
            world.at(at, "job.refetch", (target, request_id))
            if rng.random() < 0.4:
                world.at(at, "job.refetch", (target, request_id))

    # -- the consumers' calls --------------------------------------------------------------------------
    def dispatch(self, kind: str, payload: Any) -> None:
        if kind == "job.post":
            self._post(payload)
        elif kind == "job.cancel":
            self._cancel(payload)
        elif kind == "job.read":
            self._read(payload)
        elif kind == "job.refetch":
            self._refetch(*payload)

    def _call(self, function: str, method: str, path: str, body: Any, on_answer: Any, *, query: dict[str, str] | None = None,
              retry: tuple[str, Any] | None = None) -> None:
        """One consumer request as one invocation of ``function``; a death (API Gateway's 5xx to
        the consumer) is retried 1-3 minutes later when ``retry`` names the event to re-run."""
        from pixivflow.local.harness import http_event
        from pixivflow.local.lambda_context import context_for

        world = self.world
        handler = world.rt.handlers[function]
        event = http_event(method, path, body, {"authorization": f"Bearer {JOBS_TOKEN}"}, query)
        what = f"{method} {path}" + (f"?{event['rawQueryString']}" if query else "")

        def ended(inv: Any) -> None:
            if inv.state == "dead" or inv.error is not None or not isinstance(inv.result, dict):
                world.counts[f"job.{'died' if inv.state == 'dead' else 'raised'}"] += 1
                if inv.error is not None:
                    self.problems.append(f"[jobs] {what} raised {inv.error!r}")
                if retry is not None and world.faulty:
                    world.at(world.clock.now_ms() + self.rng.randint(1, 3) * MINUTE_MS, *retry)
                return
            status = int(inv.result["statusCode"])
            raw = inv.result.get("body")
            try:
                parsed = json.loads(raw) if raw else None
            except ValueError:
                parsed = raw
            self.answers.append(Answer(world.clock.now_ms(), what, status, parsed))
            world.counts[f"job.http.{method.lower()}.{status}"] += 1
            if status >= 500:
                self.problems.append(f"[jobs] {what} answered {status}: {str(parsed)[:300]}")
                return
            on_answer(status, parsed)

        world.baton.spawn(function, lambda: handler(event, context_for(function)), on_end=ended)

    def _expect(self, plan: JobPlan, what: str, ok: bool, status: int, body: Any) -> None:
        if not ok:
            self.problems.append(f"[jobs] {what} of {plan.key!r}: unexpected {status} {str(body)[:300]}")

    def _post(self, key: str) -> None:
        plan = self.plans[key]

        def answered(status: int, body: Any) -> None:
            job = body.get("job") if isinstance(body, dict) else None
            self._expect(plan, "POST /jobs", status in (200, 202) and isinstance(job, dict), status, body)
            if isinstance(job, dict):
                self.job_ids_by_key[key].add(str(job.get("job_id")))

        self._call("job_events", "POST", "/jobs", plan.body, answered, retry=("job.post", key))

    def _path(self, plan: JobPlan, suffix: str = "") -> str:
        assert plan.job_id is not None
        return f"/jobs/{quote(plan.job_id, safe='')}{suffix}"

    def _cancel(self, key: str) -> None:
        plan = self.plans[key]

        def answered(status: int, body: Any) -> None:
            # 404: the POST has not landed yet (it died and waits for its retry, which may come after the
            # faults stopped: seed 1764); the consumer tries again.
            if status == 404 and (self.world.faulty or not self.job_ids_by_key[key]):
                self.world.at(self.world.clock.now_ms() + MINUTE_MS, "job.cancel", key)
                return
            self._expect(plan, "cancel", status == 200 and isinstance(body, dict) and body.get("job_id") == plan.job_id,
                         status, body)
            if status == 200 and isinstance(body, dict) and body.get("status") not in ("cancelled", "succeeded", "failed", "expired"):
                self.problems.append(f"[jobs] cancel of {plan.job_id} answered status {body.get('status')!r}")

        self._call("job_events", "POST", self._path(plan, "/cancel"), None, answered, retry=("job.cancel", key))

    def _read(self, key: str) -> None:
        plan = self.plans[key]
        unacked = self.rng.random() < 0.3
        query = {"unacked": "1"} if unacked else ({"after": plan.last_event} if plan.last_event else None)
        after = None if unacked else plan.last_event

        def answered(status: int, body: Any) -> None:
            if status == 404:
                return  # not admitted yet
            self._expect(plan, "events", status == 200 and isinstance(body, dict), status, body)
            if status != 200 or not isinstance(body, dict):
                return
            self._check_page(plan, after, body)
            events = body.get("events") or []
            if events:
                plan.last_event = events[-1]["event_id"]
                if self.rng.random() < 0.8:
                    self._ack(plan, plan.last_event)

        if self.rng.random() < 0.2:
            self._call("job_events", "GET", self._path(plan), None, lambda s, b: self._check_job(plan, s, b))
        self._call("job_events", "GET", self._path(plan, "/events"), None, answered, query=query)

    def _check_job(self, plan: JobPlan, status: int, body: Any) -> None:
        if status == 404:
            return
        self._expect(plan, "GET job", status == 200 and isinstance(body, dict) and body.get("job_id") == plan.job_id,
                     status, body)

    def _check_page(self, plan: JobPlan, after: str | None, body: dict[str, Any]) -> None:
        from pixivflow.domain.protocol import parse_event_id

        positions = [parse_event_id(e.get("event_id")) for e in body.get("events") or []]
        if any(p is None for p in positions) or positions != sorted(positions):  # type: ignore[type-var]
            self.problems.append(f"[jobs] events page of {plan.job_id} is not in stream order: {positions}")
        start = parse_event_id(after) if after else None
        if start is not None and any(p is not None and p <= start for p in positions):
            self.problems.append(f"[jobs] events page of {plan.job_id} after {after} holds {positions}")
        if any(e.get("job_id") != plan.job_id for e in body.get("events") or []):
            self.problems.append(f"[jobs] events page of {plan.job_id} holds another job's event")

    def _ack(self, plan: JobPlan, through: str) -> None:
        def answered(status: int, body: Any) -> None:
            self._expect(plan, "ack", status == 200 and isinstance(body, dict), status, body)
            if status == 200:
                self.check_cursor(plan.job_id or "")

        self._call("job_events", "POST", self._path(plan, "/events/ack"), {"ack_through": through}, answered)

    def check_cursor(self, job_id: str) -> None:
        """The durable cursor (read by the harness, not a step): never backwards, never past the
        newest projected event, always one of the job's own event ids."""
        from pixivflow.domain.protocol import is_projected

        stream = self.world.rt.wiring.jobs.stream(job_id)
        cursor = stream.cursor
        if cursor is None:
            return
        seen = self.cursors.get(job_id)
        if seen is not None and cursor < seen:
            self.problems.append(f"[ack] cursor of {job_id} moved backwards: {seen} -> {cursor}")
        self.cursors[job_id] = max(cursor, seen or cursor)
        projected = [(e.ts, e.seq) for e in stream.events if is_projected(e.kind.split("#", 1)[0])]
        if cursor not in projected:
            self.problems.append(f"[ack] cursor of {job_id} is {cursor}, not one of its events {projected}")

    def _refetch(self, target: str, request_id: str) -> None:
        def answered(status: int, body: Any) -> None:
            ok = status in (200, 202) and isinstance(body, dict)
            if not ok:
                self.problems.append(f"[jobs] refetch {request_id} of {target}: unexpected {status} {str(body)[:300]}")
                return
            slot_id = (body.get("slot") or {}).get("slotId") if isinstance(body.get("slot"), dict) else body.get("slotId")
            if slot_id:
                self.job_ids_by_key[request_id].add(str(slot_id))

        self.refetch_ids[request_id] = target
        self._call("trigger", "POST", f"/internal/targets/{target}/refetch", {"requestId": request_id}, answered,
                   retry=("job.refetch", (target, request_id)))


__all__ = ["CallbackReceiver", "JobsActor", "JOB_TARGETS", "ReceiverRates"]
