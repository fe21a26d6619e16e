"""The outbox worker for deliveries (``docs/explanation/delivery.md``).

One message names one outbox row by ``{kind, key}``. ``delivery`` rows are the intent items
themselves: an intent is claimed with a conditional write and a 120 s lease, so at most one
worker talks to the route for it; the same idempotency key travels on every attempt. Every
other kind (``notification``, later ``event_callback``) is a generic row of ``services.outbox``.
The attempt budget lives on the row, never in SQS's receive count. Delays up to 900 s ride on
SQS; longer ones wait for the sweep.

Per delivery attempt: consumer-cancel guard, the route's readiness probe (a failing
probe releases the row without consuming an attempt), one call on the route's wire format, its
answer parsed into an ACK by the route family's rules, the ACK settled. Once every route of a
cell has delivered a work, its stored originals are deleted unless ``deleteAfterDelivery`` is false
(the preview stays for the retention: the operator page's thumbnail).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable

from ..domain.outbox import MAX_SQS_DELAY_S, after_failed_attempt
from ..domain.ack import (
    AckKind,
    DeliveryAck,
    classify_outbox_error,
    parse_delivery_ack,
    parse_idempotency_key,
    settlement_for,
)
from ..domain.cells import CellStatus
from ..domain.errors import ConfigError, LedgerUnavailable
from ..domain.model import Intent, LedgerStatus, OutboxStatus, cell_key, row_overdue
from ..domain.review import IN_CHAT, UNCERTAIN
from ..domain.route_io import DeliveryRequest, DeliveryResponse, SendGuard
from ..clock import Entropy
from ..ports import RouteSettings, Settings
from ..ports import (ArtifactStore, Clock, DeliveryChannel, DeliveryRows, Log, Metrics, Occurrences, Queues, SweepIndexes,
                     TimeLeft, WorkReservations)
from .context import Measured
from .timing import OUTBOX_LEASE_MS
from ..domain.assets import artifact_prefix
from .assets import recorded_files, with_assets
from .messages import wake_outbox
from .outbox import READINESS_DEFER_MS, Outbox, deliver_row_message, drain_rows, due_row_keys
from .rollup import SlotRollup, cell_delivery_state, routes_of, rollup, settle_delivery_terminal

CANCELLED_BY_CONSUMER = "cancelled_by_consumer"


@dataclass(frozen=True)
class Deliveries(Measured):
    """What delivering a work takes: its delivery rows and the slot and cells they belong to, the
    cross-slot work reservations a failed delivery frees, the open slots (the drain finds their
    rows through them), the outbox queue, the routes (the delivery channel), the stored files,
    the config (a target's routes, asset URL lifetime, deleteAfterDelivery, the retry backoff),
    entropy (claim owners, jitter), the slot rollup, the generic rows' worker, the clock, log and
    metrics."""

    rows: DeliveryRows
    occurrences: Occurrences
    reservations: WorkReservations
    indexes: SweepIndexes
    queues: Queues
    channel: DeliveryChannel
    artifacts: ArtifactStore
    config: Settings
    entropy: Entropy
    rollup: SlotRollup
    outbox: Outbox
    clock: Clock
    log: Log
    metrics: Metrics | None


@dataclass
class DeliveryResult:
    key: str
    action: str  # done | retried | dead | skipped
    ack: str | None = None
    detail: str | None = None


@dataclass
class DrainResult:
    processed: int = 0
    done: int = 0
    retried: int = 0
    dead: int = 0

    def add(self, result: DeliveryResult) -> None:
        if result.action == "skipped":
            return
        self.processed += 1
        if result.action == "done":
            self.done += 1
        elif result.action == "retried":
            self.retried += 1
        elif result.action == "dead":
            self.dead += 1
        # a "deferred" row was processed without consuming an attempt: counted, nothing else

    def as_dict(self) -> dict[str, int]:
        return {"processed": self.processed, "done": self.done, "retried": self.retried, "dead": self.dead}


def deliver_message(ctx: Deliveries, kind: str, key: str, *, time_left: TimeLeft | None = None) -> DeliveryResult:
    """Dispatch one outbox message by its kind: delivery intents here, every other kind (job
    event callbacks, notifications) to the generic rows' worker (``services.outbox``), whose
    attempts end before the invocation does (``time_left``)."""
    if kind != "delivery":
        row = deliver_row_message(ctx.outbox, kind, key, time_left=time_left)
        return DeliveryResult(key, row.action, detail=row.detail)
    try:
        route, work_type, work_id, slot_id, target_id = parse_idempotency_key(key)
    except ValueError:
        ctx.log("warning", "outbox message with a malformed key ignored", event="outbox.bad_key", key=key)
        return DeliveryResult(key, "skipped", detail="malformed key")
    if slot_id is None or target_id is None:
        return DeliveryResult(key, "skipped", detail="ad-hoc keys have no ledger row")
    intent = ctx.rows.get_intent(slot_id, target_id, route, work_type, work_id)
    if intent is None:
        return DeliveryResult(key, "skipped", detail="no such intent")
    return deliver_intent(ctx, intent)


def deliver_intent(ctx: Deliveries, intent: Intent, *, ignore_due: bool = False) -> DeliveryResult:
    key = intent.idempotency_key
    if not intent.actionable:
        return DeliveryResult(key, "skipped", detail=f"row is {intent.outbox_status}")
    owner = ctx.entropy.token("dlv")
    now = ctx.now()
    claimed = ctx.rows.claim_intent(intent, owner, now, OUTBOX_LEASE_MS, ignore_due=ignore_due)
    if claimed is None:
        return DeliveryResult(key, "skipped", detail="not due or claimed by another worker")
    cell = ctx.occurrences.get_cell(claimed.slot_id, claimed.target_id)
    if cell is not None and cell.terminal and cell.status != CellStatus.SUBMITTED and not _resend_on_purpose(claimed):
        # (A fan-out cell another route's failure ended: this row still delivers, _sibling_failed;
        # never after a consumer's cancel.)
        if cell.terminal_reason_code == CANCELLED_BY_CONSUMER or not _sibling_failed(ctx, claimed):
            # The cell has already told its slot that it did not deliver: cancelled by a consumer, or
            # failed by the sweep (timeout, stall) while this row waited (a crash right after
            # put_intent leaves the cell `selected` until its timeout, and the sweep's re-drive may
            # find the row hours later). Posting now would leave a downstream record for a cell the
            # outcome record calls failed. Dead-letter the row and leave the cell as it ended.
            if cell.terminal_reason_code == CANCELLED_BY_CONSUMER:
                reason = "work cancelled by consumer"
            else:
                reason = f"cell already ended {cell.status} ({cell.terminal_reason_code or 'no reason'}); not delivered"
            if claimed.began_posting:
                return _settle_ended_post(ctx, claimed, owner, reason)
            ack = DeliveryAck(AckKind.PERMANENT_FAILURE, None, error=reason)
            return _handle(ctx, claimed, owner, ack, cancelled=True)
    attempt = _attempt(ctx, claimed, owner)
    return attempt if isinstance(attempt, DeliveryResult) else _handle(ctx, claimed, owner, attempt)


def _settle_ended_post(ctx: Deliveries, intent: Intent, owner: str, reason: str) -> DeliveryResult:
    """A Telegram review row that began posting (``Intent.began_posting``) whose cell ended first,
    by a consumer's cancel (README "Cancel") or by the sweep, after an attempt died after a post or
    saved its posts while the control plane refused the record: part of the review may be in the
    chat with no record of it. The
    cancel left the row to this path: the route posts nothing more (``SendGuard.record_only``); it
    records the review ``uncertain`` at the control plane with what was posted (or finds the
    record an earlier attempt wrote), and the row is then dead-lettered like every row of an ended
    cell (the cell and the job stay as they ended). A control plane that does not answer is
    retried: only the record may remain to be written.

    The work stays reserved on the route whatever the attempt found: the review is in the chat
    (``review_exists``: the earlier attempt posted and recorded it, then died before its settle)
    or may be (``uncertain``). Freeing it would let a later job select the same work and
    "deliver" it by finding this review."""
    attempt = _attempt(ctx, intent, owner, record_only=True)
    if isinstance(attempt, DeliveryResult):
        return attempt
    ack = attempt
    if attempt.kind != AckKind.RETRYABLE_FAILURE:
        error = f"{reason}; {attempt.error}" if attempt.error else reason
        ack = DeliveryAck(AckKind.PERMANENT_FAILURE, None, remote_id=attempt.remote_id,
                          remote_status=attempt.remote_status if attempt.remote_status in IN_CHAT else None, error=error)
    # (A retry whose budget runs out is dead-lettered by _handle: the record was never written,
    # and what was posted may be in the chat all the same.)
    return _handle(ctx, intent, owner, ack, cancelled=True, hold_work=True)


def _attempt(ctx: Deliveries, claimed: Intent, owner: str, *, record_only: bool = False) -> DeliveryAck | DeliveryResult:
    """One call of the row's route as its lease holder: the route's ACK, or the deferral's result
    when the route is not ready."""
    key = claimed.idempotency_key
    route = ctx.config.route(claimed.route)
    try:
        if not ctx.channel.ready(claimed.route):
            return _defer(ctx, claimed, owner)
        request = _request(ctx, claimed)
        if route is not None and route.guarded_send:
            request = replace(request, guard=_send_guard(ctx, claimed, owner, record_only=record_only))
        response = ctx.channel.deliver(request)
        ack = parse_route_ack(route, response)
        if response.note:
            ack = replace(ack, note=response.note)
            ctx.log("warning", response.note, event="delivery.route_note", key=key, route=claimed.route,
                    slot_id=claimed.slot_id, target_id=claimed.target_id)
    except LedgerUnavailable:
        raise
    except Exception as exc:  # transport and configuration failures are classified, never raised
        error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        # An unresolvable ${VAR} (or any ConfigError) is a configuration error: dead at once.
        name = "ConfigError" if isinstance(exc, ConfigError) else type(exc).__name__
        verdict = classify_outbox_error(error, None, name)
        kind = AckKind.RETRYABLE_FAILURE if verdict.retryable else AckKind.PERMANENT_FAILURE
        ack = DeliveryAck(kind, None, error=f"{verdict.code}: {error}"[:1000])
    return ack


def _resend_on_purpose(intent: Intent) -> bool:
    """An operator's redrive of a review recorded ``uncertain``: it may be in the chat
    already, so only a person decides to post it again; the cell's outcome stays as it ended."""
    return intent.redrive_count > 0 and intent.remote_status == UNCERTAIN


def parse_route_ack(route: RouteSettings | None, response: DeliveryResponse) -> DeliveryAck:
    """The ACK of one answer, by the rules of the route's kind; a route the config no longer
    declares is read as the TelePost ACK envelope."""
    return route.parse_ack(response) if route is not None else parse_delivery_ack(response.status, response.body)


def _send_guard(ctx: Deliveries, intent: Intent, owner: str, *, record_only: bool = False) -> SendGuard:
    """The ledger side of "never post twice silently" for the Telegram review route."""
    return SendGuard(started=intent.sending_at is not None, progress=intent.send_progress,
                     redriven=intent.redrive_count > 0, record_only=record_only,
                     mark_sending=lambda: ctx.rows.mark_intent_sending(intent, owner, ctx.now()) is not None)


def _request(ctx: Deliveries, intent: Intent) -> DeliveryRequest:
    # The JSON body carries the stored files as protocol Assets, signed for this attempt.
    target = ctx.config.target(intent.target_id) if intent.work_type == "novel" else None
    preview = target.delivery.richNovelPreview if target is not None and target.delivery is not None else None
    body = with_assets(ctx.artifacts, intent, _payload(intent), url_ttl_s=ctx.config.download.assetUrlTtlSeconds,
                       origin="pixiv" if ctx.config.source.kind == "pixiv" else "generated")
    return DeliveryRequest(route=intent.route, idempotency_key=intent.idempotency_key, body=body, payload=intent.payload or {},
                           artifact_key=artifact_key(intent.slot_id, intent.target_id, intent.work_id),
                           files=recorded_files(intent), preview=preview)


def artifact_key(slot_id: str, target_id: str, work_id: str) -> str:
    """Where the execution service stored a bound work's files (one place: domain.assets)."""
    return artifact_prefix(slot_id, target_id, work_id)


def _payload(intent: Intent) -> dict[str, Any]:
    """The ``kind: webhook`` JSON body: the intent's ids, then its frozen payload."""
    body: dict[str, Any] = {
        "idempotency_key": intent.idempotency_key,
        "slot_id": intent.slot_id,
        "target_id": intent.target_id,
        "route": intent.route,
        "work_type": intent.work_type,
        "work_id": intent.work_id,
    }
    body.update(intent.payload or {})
    return body


def _defer(ctx: Deliveries, intent: Intent, owner: str) -> DeliveryResult:
    """Readiness deferral: the row goes back to pending, due in a minute,
    and no attempt is consumed; at most one ``outbox.deferred`` line per row per minute."""
    now = ctx.now()
    if ctx.rows.release_intent(intent, owner, now, now + READINESS_DEFER_MS) is None:
        return DeliveryResult(intent.idempotency_key, "skipped", detail="lease lost before the deferral")
    wake_outbox(ctx.queues, ctx.log, [("delivery", intent.idempotency_key)], delay_s=READINESS_DEFER_MS // 1000,
                event="outbox.send_failed", key=intent.idempotency_key)
    ctx.log("info", "route not ready; delivery deferred without consuming an attempt", event="outbox.deferred",
            key=intent.idempotency_key, route=intent.route, slot_id=intent.slot_id, target_id=intent.target_id)
    return DeliveryResult(intent.idempotency_key, "deferred", detail="route not ready")


def _handle(ctx: Deliveries, intent: Intent, owner: str, ack: DeliveryAck, *, cancelled: bool = False,
            hold_work: bool = False) -> DeliveryResult:
    plan = settlement_for(ack)
    now = ctx.now()
    key = intent.idempotency_key
    if plan.outbox_status == OutboxStatus.RETRY_WAIT:
        attempt = intent.attempts + 1  # a delivery row counts the attempt when it settles it
        then = after_failed_attempt(attempt, intent.max_attempts, retryable=True, error=str(ack.error or ack.kind),
                                    uniform=ctx.entropy.uniform, base_ms=ctx.config.delivery.outboxRetryBaseMs,
                                    max_ms=ctx.config.delivery.outboxRetryMaxMs, retry_after_ms=ack.retry_after_ms)
        if then.dead:
            return _dead(ctx, intent, owner, then.error, ack, cancelled=cancelled, hold_work=hold_work)
        delay_ms = then.delay_ms
        extra = {"send_progress": ack.progress, "clear_sending": True} if ack.clear_sending else {}
        settled = ctx.rows.settle_intent(intent, owner, now, ledger_status=None, outbox_status=OutboxStatus.RETRY_WAIT,
                                         error=ack.error, next_attempt_at=now + delay_ms, ack_kind=str(ack.kind), **extra)
        if settled is None:
            return DeliveryResult(key, "skipped", ack.kind, "lease lost before recording the retry")
        delay_s = math.ceil(delay_ms / 1000)
        if delay_s <= MAX_SQS_DELAY_S:
            wake_outbox(ctx.queues, ctx.log, [("delivery", key)], delay_s=delay_s, event="outbox.send_failed", key=key,
                        slot_id=intent.slot_id, target_id=intent.target_id)
        ctx.log("warning", "delivery attempt failed; retry scheduled", event="outbox.retry_scheduled", key=key,
                attempt=attempt, delay_ms=delay_ms, error=ack.error, counts_as_attempt=1)
        ctx.metric("DeliveryAcks", kind=str(ack.kind))
        return DeliveryResult(key, "retried", ack.kind, ack.error)
    if plan.outbox_status == OutboxStatus.DEAD:
        return _dead(ctx, intent, owner, plan.ledger_error or ack.error or "permanent failure", ack, cancelled=cancelled,
                     hold_work=hold_work)
    settled = ctx.rows.settle_intent(
        intent, owner, now, ledger_status=plan.ledger_status, outbox_status=OutboxStatus.DONE,
        remote_id=plan.remote_id, remote_status=plan.remote_status, reuse_reason=plan.reuse_reason,
        error=plan.ledger_error or ack.note,
        ack_kind=str(ack.kind),
    )
    if settled is None:
        return DeliveryResult(key, "skipped", ack.kind, "lease lost before recording the ACK")
    ctx.log("info", "delivery acknowledged", event="outbox.delivered", key=key, ack=str(ack.kind),
            remote_id=plan.remote_id, slot_id=intent.slot_id, target_id=intent.target_id, work_id=intent.work_id)
    ctx.metric("DeliveryAcks", kind=str(ack.kind))
    if plan.ledger_status == LedgerStatus.FAILED:
        _free_work(ctx, intent)
    routes = routes_of(ctx.rollup, intent.target_id)
    fan_out = len(routes) > 1 or (bool(routes) and intent.route not in routes)
    # One read of the slot serves both checks; a single-route cell needs none (this ACK is it).
    state = ctx.occurrences.load(intent.slot_id) if fan_out else None
    if plan.delete_cached_files and ctx.config.delivery.deleteAfterDelivery and _routes_carry_files(ctx, routes):
        _delete_delivered_files(ctx, intent, state)
    outcome = plan.cell_outcome
    if outcome in ("submitted", "duplicate") and fan_out and state is not None:
        # Fan-out: a cell is confirmed only when EVERY route confirmed; until then
        # the other routes' rows own it. Then it is submitted if any route delivered.
        verdict = cell_delivery_state(ctx.rollup, state, intent.target_id)
        if verdict.state != "confirmed":
            return DeliveryResult(key, "done", ack.kind)
        delivered = any(i.status == LedgerStatus.DELIVERED for i in state.intents_for(intent.target_id))
        outcome = "submitted" if delivered else "duplicate"
    if outcome:
        settle_delivery_terminal(ctx.rollup, intent, outcome, plan.cell_error, reason_code=plan.cell_reason)
        rollup(ctx.rollup, intent.slot_id)
    return DeliveryResult(key, "done", ack.kind)


def _routes_carry_files(ctx: Deliveries, routes: list[str]) -> bool:
    """Only PixivFlow's routes upload or link the stored files; a cell delivered through this
    project's ``kind: webhook`` route keeps them in the bucket."""
    return any(route.carries_files for route in map(ctx.config.route, routes) if route is not None)


def _delete_delivered_files(ctx: Deliveries, intent: Intent, state: Any) -> None:
    """Delete a work's stored files once EVERY route of its cell has delivered it:
    a route still open may need them for its next attempt, and a failed or duplicate delivery
    keeps them for the operator. ``state`` is None for a single-route cell, whose only route
    just delivered. Idempotent; a failure only leaves the files to the bucket's retention."""
    if state is not None:
        mine = [i for i in state.intents_for(intent.target_id) if i.work_id == intent.work_id]
        routes = routes_of(ctx.rollup, intent.target_id) or sorted({i.route for i in mine})
        delivered = {i.route for i in mine if i.status == LedgerStatus.DELIVERED}
        if not routes or any(r not in delivered for r in routes):
            return
    key = artifact_key(intent.slot_id, intent.target_id, intent.work_id)
    # The originals go; the small preview stays for the retention (the operator page's thumbnail).
    originals = [f for f in recorded_files(intent) if f.role != "preview"]
    if not originals:
        return
    try:
        count = ctx.artifacts.delete(key, originals)
    except (AttributeError, NotImplementedError):
        return
    except Exception as exc:
        ctx.log("warning", "stored files could not be deleted after delivery", event="artifacts.delete_failed",
                key=key, error=repr(exc)[:300])
        return
    ctx.log("info", "stored files deleted after delivery", event="artifacts.deleted", key=key, count=count,
            slot_id=intent.slot_id, target_id=intent.target_id, work_id=intent.work_id)


def _sibling_failed(ctx: Deliveries, intent: Intent) -> bool:
    """Whether the cell ended failed because ANOTHER route's row of its work failed (fan-out).
    This row is then still the outbox's: it delivers the work on its own route (the outcome
    already says the cell failed). Dead-lettering it "not delivered" would lose an earlier attempt
    that may have landed, and a later slot could deliver the work on this route again."""
    target = ctx.config.target(intent.target_id)
    for route in (target.routes() if target is not None else []):
        if route != intent.route:
            sibling = ctx.rows.get_intent(intent.slot_id, intent.target_id, route, intent.work_type, intent.work_id)
            if sibling is not None and sibling.status == LedgerStatus.FAILED:
                return True
    return False


def _dead(ctx: Deliveries, intent: Intent, owner: str, error: str, ack: DeliveryAck, *, cancelled: bool = False,
          hold_work: bool = False) -> DeliveryResult:
    """Dead-letter the row: ledger failed, the cell failed (delivery_abandoned), and the work freed
    on the route — unless the route holds it or may (``hold_work``; a review in the chat, IN_CHAT):
    one delivery per work and route, so no later cell may select it again."""
    now = ctx.now()
    settled = ctx.rows.settle_intent(intent, owner, now, ledger_status=LedgerStatus.FAILED, outbox_status=OutboxStatus.DEAD,
                                     error=error, ack_kind=str(ack.kind),
                                     **_in_chat(ack))
    if settled is None:
        return DeliveryResult(intent.idempotency_key, "skipped", ack.kind, "lease lost before dead-lettering")
    ctx.log("error", "delivery dead-lettered", event="outbox.dead", key=intent.idempotency_key, error=error,
            slot_id=intent.slot_id, target_id=intent.target_id, attempts=settled.attempts)
    ctx.metric("DeadLetters", route=intent.route)
    if not (hold_work or ack.remote_status in IN_CHAT):
        _free_work(ctx, intent)
    if not cancelled:
        settle_delivery_terminal(ctx.rollup, intent, "failed", error, reason_code="delivery_abandoned")
        rollup(ctx.rollup, intent.slot_id)
    return DeliveryResult(intent.idempotency_key, "dead", ack.kind, error)


def _in_chat(ack: DeliveryAck) -> dict[str, Any]:
    """A review that is, or may be, in the chat keeps saying so on its dead row: the
    operator finds it by its id."""
    return {"remote_id": ack.remote_id, "remote_status": ack.remote_status} if ack.remote_status in IN_CHAT else {}


def _free_work(ctx: Deliveries, intent: Intent) -> None:
    """A work whose delivery failed may be picked again by another slot later."""
    ctx.reservations.release_work_reservation(intent.route, intent.work_type, intent.work_id, cell_key(intent.slot_id, intent.target_id))


def drain(ctx: Deliveries, max_rounds: int = 50, batch: int = 25) -> DrainResult:
    """Process due rows now, in this process, bounded to ``max_rounds`` rounds: the embedded
    runtime's and the tests' way to drive every row in one process (the deployed drain route only queues the
    rows for the deliver function: :func:`queue_due`).
    A round stops early after a readiness deferral. The due delivery
    rows of open slots are found through their slot (they carry no index entry of their own);
    every other row through DueOutbox."""
    result = DrainResult()
    for _ in range(max(1, max_rounds)):
        now = ctx.now()
        rows: list[Intent | tuple[str, str]] = list(_open_rows(ctx, now))
        seen = {(r.slot_id, r.idempotency_key) for r in rows if isinstance(r, Intent)}
        rows += ctx.rows.due_intents(now, limit_per_shard=batch)
        progressed = deferred = False
        for row in rows:
            if isinstance(row, Intent):
                intent: Intent | None = row
            else:
                pk, sk = row
                intent = ctx.rows.get_intent_by_key(pk, sk)
                if intent is not None and (intent.slot_id, intent.idempotency_key) in seen:
                    continue  # found through its slot already
            if intent is None or not intent.actionable:
                continue
            outcome = deliver_intent(ctx, intent)
            result.add(outcome)
            if outcome.action == "deferred":
                deferred = True
                break
            progressed = progressed or outcome.action != "skipped"
        if not deferred:
            for generic in drain_rows(ctx.outbox, limit_per_shard=batch):
                result.add(DeliveryResult(generic.key, generic.action, detail=generic.detail))
                progressed = progressed or generic.action not in ("skipped", "deferred")
        if not progressed or deferred:
            break
    return result


def _open_rows(ctx: Deliveries, now: int) -> list[Intent]:
    """The due delivery rows of every open slot."""
    found: list[Intent] = []
    for slot_id, _created in ctx.indexes.active_slots():
        state = ctx.occurrences.load(slot_id)
        if state is not None:
            found += [i for i in state.intents if row_overdue(i, now)]
    return found

def due_delivery_keys(ctx: Deliveries, now: int, grace_ms: int, known: Iterable[str] = (), *,
                      limit_per_shard: int = 100, on_error: Callable[[str, Exception], None] | None = None,
                      indexed: bool = True) -> list[str]:
    """The delivery rows to (re-)send now, one rule for the sweep (grace 120 s) and the
    drain route (grace 0): ``known`` (the overdue rows of open slots, found through their slot:
    they carry no index entry), then every DueOutbox hit that is still overdue once re-read (the
    index may lag). A row under a live claim is not overdue (``row_overdue``): its worker owns it.
    ``on_error`` takes a row whose re-read failed; without it the error propagates. ``indexed``
    False: DueOutbox was just found empty (the sweep's probe), so only ``known`` is sent."""
    send: list[str] = list(dict.fromkeys(known))
    hits = ctx.rows.due_intents(now - grace_ms, limit_per_shard=limit_per_shard) if indexed else []
    for pk, sk in hits:
        try:
            intent = ctx.rows.get_intent_by_key(pk, sk)
        except Exception as exc:
            if on_error is None:
                raise
            on_error(sk, exc)
            continue
        if intent is None or not row_overdue(intent, now, grace_ms) or intent.idempotency_key in send:
            continue
        send.append(intent.idempotency_key)
    return send


@dataclass
class Queued:
    """What ``POST /internal/outbox/drain`` handed to the deliver function: messages by row kind,
    and the ones SQS did not take (their rows stay due; the sweep re-drives them)."""

    kinds: dict[str, int]
    unsent: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"queued": sum(self.kinds.values()), "kinds": dict(self.kinds), "unsent": self.unsent}


def queue_due(ctx: Deliveries, *, limit_per_shard: int = 100) -> Queued:
    """The drain route (least privilege): every due row (deliveries, notifications, job
    event callbacks) gets a message on the outbox queue NOW, and the deliver function sends it. The
    trigger function itself never talks to a route or a consumer, so it holds no route secret and
    no signing secret. Idempotent: a row under a live claim is not queued, and a duplicate message
    is absorbed by the row's own claim (a row no longer due is skipped by ``claim_intent`` /
    ``OutboxRows.claim``), so no row is sent twice."""
    now = ctx.now()
    deliveries = due_delivery_keys(ctx, now, 0, [i.idempotency_key for i in _open_rows(ctx, now)],
                                   limit_per_shard=limit_per_shard)
    rows = due_row_keys(ctx.outbox, now, 0, limit_per_shard=limit_per_shard)
    named = [("delivery", key) for key in deliveries] + rows
    kinds = dict.fromkeys(["delivery", *sorted(ctx.outbox.kinds)], 0)
    if not named:
        return Queued(kinds)
    failed = set(wake_outbox(ctx.queues, ctx.log, named, event="outbox.send_failed"))
    for index, (kind, _key) in enumerate(named):
        if index not in failed:
            kinds[kind] = kinds.get(kind, 0) + 1
    return Queued(kinds, unsent=len(failed))
