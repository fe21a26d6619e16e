"""The outbox worker for deliveries (spec §10.4–§10.7; DESIGN §5).

One message names one intent. The intent item is the outbox row: it is claimed with a
conditional write and a 120 s lease, so at most one worker talks to the route for it; the
same idempotency key travels on every attempt. The attempt budget lives on the row, never in
SQS's receive count. Delays up to 900 s ride on SQS; longer ones wait for the sweep.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..ports import MAX_SQS_DELAY_S, OutgoingMessage
from ..domain.ack import AckKind, DeliveryAck, classify_outbox_error, parse_delivery_ack, parse_idempotency_key, retry_delay_ms, settlement_for
from ..domain.cells import CellStatus
from ..domain.errors import LedgerUnavailable
from ..domain.model import Intent, LedgerStatus, OutboxStatus, cell_key
from .assets import with_assets
from .engine import OUTBOX_LEASE_MS, Engine
from .messages import outbox_body, send_logged
from .rollup import rollup, settle_delivery_terminal

CANCELLED_BY_CONSUMER = "cancelled_by_consumer"


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

    def as_dict(self) -> dict[str, int]:
        return {"processed": self.processed, "done": self.done, "retried": self.retried, "dead": self.dead}


def deliver_message(engine: Engine, kind: str, key: str) -> DeliveryResult:
    if kind == "event_callback":
        from .callbacks import deliver_callback

        return deliver_callback(engine, key)
    if kind != "delivery":
        engine.log("warning", "outbox message of an unknown kind ignored", event="outbox.unknown_kind", kind=kind, key=key)
        return DeliveryResult(key, "skipped", detail=f"unknown kind {kind}")
    try:
        route, work_type, work_id, slot_id, target_id = parse_idempotency_key(key)
    except ValueError:
        engine.log("warning", "outbox message with a malformed key ignored", event="outbox.bad_key", key=key)
        return DeliveryResult(key, "skipped", detail="malformed key")
    if slot_id is None or target_id is None:
        return DeliveryResult(key, "skipped", detail="ad-hoc keys have no ledger row")
    intent = engine.ledger.get_intent(slot_id, target_id, route, work_type, work_id)
    if intent is None:
        return DeliveryResult(key, "skipped", detail="no such intent")
    return deliver_intent(engine, intent)


def deliver_intent(engine: Engine, intent: Intent, *, ignore_due: bool = False) -> DeliveryResult:
    key = intent.idempotency_key
    if not intent.actionable:
        return DeliveryResult(key, "skipped", detail=f"row is {intent.outbox_status}")
    owner = engine.entropy.token("dlv")
    now = engine.now()
    claimed = engine.ledger.claim_intent(intent, owner, now, OUTBOX_LEASE_MS, ignore_due=ignore_due)
    if claimed is None:
        return DeliveryResult(key, "skipped", detail="not due or claimed by another worker")
    cell = engine.ledger.get_cell(claimed.slot_id, claimed.target_id)
    if cell is not None and cell.terminal and cell.status != CellStatus.SUBMITTED:
        # The cell has already told its slot that it did not deliver: cancelled by a consumer, or
        # failed by the sweep (timeout, stall) while this row waited. Posting now would leave a
        # downstream record for a cell the outcome record calls failed (spec §13.3; found by the
        # seeded simulation: a crash right after put_intent left the cell `selected` until its
        # timeout, and the sweep's re-drive posted the row hours later). Dead-letter the row and
        # leave the cell as it ended.
        if cell.terminal_reason_code == CANCELLED_BY_CONSUMER:
            reason = "work cancelled by consumer"
        else:
            reason = f"cell already ended {cell.status} ({cell.terminal_reason_code or 'no reason'}); not delivered"
        ack = DeliveryAck(AckKind.PERMANENT_FAILURE, None, error=reason)
        return _handle(engine, claimed, owner, ack, cancelled=True)
    route = engine.config.route(claimed.route)
    try:
        response = engine.channel.send(claimed.route, with_assets(engine, claimed, _payload(claimed)), key)
        ack = parse_delivery_ack(response.status, response.body, route.ack if route else None)
    except LedgerUnavailable:
        raise
    except Exception as exc:  # transport and configuration failures are classified, never raised
        error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        verdict = classify_outbox_error(error, None, type(exc).__name__)
        kind = AckKind.RETRYABLE_FAILURE if verdict.retryable else AckKind.PERMANENT_FAILURE
        ack = DeliveryAck(kind, None, error=f"{verdict.code}: {error}"[:1000])
    return _handle(engine, claimed, owner, ack)


def _payload(intent: Intent) -> dict[str, Any]:
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


def _handle(engine: Engine, intent: Intent, owner: str, ack: DeliveryAck, *, cancelled: bool = False) -> DeliveryResult:
    plan = settlement_for(ack)
    now = engine.now()
    key = intent.idempotency_key
    if plan.outbox_status == OutboxStatus.RETRY_WAIT:
        attempt = intent.attempts + 1
        if attempt >= intent.max_attempts:
            error = f"attempt budget exhausted after {attempt} attempts: {ack.error or ack.kind}"
            return _dead(engine, intent, owner, error, ack)
        delay_ms = retry_delay_ms(attempt, engine.entropy.uniform(), engine.config.delivery.outboxRetryBaseMs, engine.config.delivery.outboxRetryMaxMs)
        settled = engine.ledger.settle_intent(intent, owner, now, ledger_status=None, outbox_status=OutboxStatus.RETRY_WAIT,
                                              error=ack.error, next_attempt_at=now + delay_ms, ack_kind=str(ack.kind))
        if settled is None:
            return DeliveryResult(key, "skipped", ack.kind, "lease lost before recording the retry")
        delay_s = math.ceil(delay_ms / 1000)
        if delay_s <= MAX_SQS_DELAY_S:
            send_logged(engine, "outbox", [OutgoingMessage(outbox_body("delivery", key), delay_s=delay_s)],
                        event="outbox.send_failed", key=key, slot_id=intent.slot_id, target_id=intent.target_id)
        engine.log("warning", "delivery attempt failed; retry scheduled", event="outbox.retry_scheduled", key=key,
                   attempt=attempt, delay_ms=delay_ms, error=ack.error, counts_as_attempt=1)
        engine.metric("DeliveryAcks", kind=str(ack.kind))
        return DeliveryResult(key, "retried", ack.kind, ack.error)
    if plan.outbox_status == OutboxStatus.DEAD:
        return _dead(engine, intent, owner, plan.ledger_error or ack.error or "permanent failure", ack, cancelled=cancelled)
    settled = engine.ledger.settle_intent(
        intent, owner, now, ledger_status=plan.ledger_status, outbox_status=OutboxStatus.DONE,
        remote_id=plan.remote_id, remote_status=plan.remote_status, reuse_reason=plan.reuse_reason, error=plan.ledger_error,
        ack_kind=str(ack.kind),
    )
    if settled is None:
        return DeliveryResult(key, "skipped", ack.kind, "lease lost before recording the ACK")
    engine.log("info", "delivery acknowledged", event="outbox.delivered", key=key, ack=str(ack.kind),
               remote_id=plan.remote_id, slot_id=intent.slot_id, target_id=intent.target_id, work_id=intent.work_id)
    engine.metric("DeliveryAcks", kind=str(ack.kind))
    if plan.ledger_status == LedgerStatus.FAILED:
        _free_work(engine, intent)
    if plan.cell_outcome:
        settle_delivery_terminal(engine, intent, plan.cell_outcome, plan.cell_error)
        rollup(engine, intent.slot_id)
    return DeliveryResult(key, "done", ack.kind)


def _dead(engine: Engine, intent: Intent, owner: str, error: str, ack: DeliveryAck, *, cancelled: bool = False) -> DeliveryResult:
    """Dead-letter the row: ledger failed, the work freed on the route, the cell failed (delivery_abandoned)."""
    now = engine.now()
    settled = engine.ledger.settle_intent(intent, owner, now, ledger_status=LedgerStatus.FAILED, outbox_status=OutboxStatus.DEAD,
                                          error=error, ack_kind=str(ack.kind))
    if settled is None:
        return DeliveryResult(intent.idempotency_key, "skipped", ack.kind, "lease lost before dead-lettering")
    engine.log("error", "delivery dead-lettered", event="outbox.dead", key=intent.idempotency_key, error=error,
               slot_id=intent.slot_id, target_id=intent.target_id, attempts=settled.attempts)
    engine.metric("DeadLetters", route=intent.route)
    _free_work(engine, intent)
    if not cancelled:
        settle_delivery_terminal(engine, intent, "failed", error, reason_code="delivery_abandoned")
        rollup(engine, intent.slot_id)
    return DeliveryResult(intent.idempotency_key, "dead", ack.kind, error)


def _free_work(engine: Engine, intent: Intent) -> None:
    """A work whose delivery failed may be picked again by another slot later."""
    engine.ledger.release_work_reservation(intent.route, intent.work_type, intent.work_id, cell_key(intent.slot_id, intent.target_id))


def drain(engine: Engine, max_rounds: int = 50, batch: int = 25) -> DrainResult:
    """Process due rows now (POST /internal/outbox/drain), bounded to ``max_rounds`` rounds."""
    result = DrainResult()
    for _ in range(max(1, max_rounds)):
        keys = engine.ledger.due_intents(engine.now(), limit_per_shard=batch)
        progressed = False
        for pk, sk in keys:
            callback = engine.jobs.callback_key_of(pk, sk) if engine.jobs is not None else None
            if callback is not None:
                from .callbacks import deliver_callback

                outcome = deliver_callback(engine, callback)
                result.add(outcome)
                progressed = progressed or outcome.action != "skipped"
                continue
            intent = engine.ledger.get_intent_by_key(pk, sk)
            if intent is None or not intent.actionable:
                continue
            outcome = deliver_intent(engine, intent)
            result.add(outcome)
            progressed = progressed or outcome.action != "skipped"
        if not progressed:
            break
    return result
