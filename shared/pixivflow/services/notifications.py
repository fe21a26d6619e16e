"""Outcome notifications, as PixivFlow sends them: durable ``notification``
outbox rows, each sent at most once per key by the outbox worker.

When a slot turns terminal, the rollup calls :func:`enqueue_terminal_notifications` BEFORE it
writes the slot's outcome record and closes the slot (``services.rollup._notify``: not between the
outcome's log line and the close, where a death repeats the line). A crash at these rows therefore
leaves the slot open, and the next rollup or sweep pass over it (notifications -> record -> close)
writes them; rows are insert-if-absent, so any number of rollups or sweeps enqueue each key once.

What is sent, always to a target's PRIMARY route (its first route) when that route is an
``httpMultipart`` route declaring the URL:

* a scheduled (non-manual) slot: the schedule summary ``{schedule_id, slot_id, status, targets}``
  to ``scheduleOutcomeUrl``, key ``notification:<slotId>:summary`` (``...:summary:<route>`` for
  a second and later route);
* a manual refetch slot whose cell ended without a replacement (no_candidate / duplicate ->
  ``no_alternative``, failed -> ``failed``): the verdict to ``refetchOutcomeUrl``, key
  ``refetch-outcome:<slotId>:<targetId>``; a refetch that delivered sends nothing (the
  submission itself carries ``refetch_request_id``);
* plain-text notices ``{text, idempotency_key}`` to ``notificationUrl``: no-match (when the
  target's ``noMatchPolicy.notify`` is true) and hard failures of scheduled slots.

The URL is chosen by the row's payload type when it is SENT (refetch verdict, else schedule
summary, else text), so a row never dead-letters for lack of an unrelated URL.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from ..domain.cells import CellStatus
from ..domain.errors import NotReady, OutboxAttemptError
from ..domain.model import Cell, Slot
from ..domain.outcome_record import ordered_cells
from ..domain.reasons import reason_policy
from ..domain.outbox import OutboxRow
from ..ports import DeliveryChannel, RouteSettings, Settings
from .outbox import Outbox, RowKind, enqueue_row

KIND = "notification"
MANUAL_SOURCE = "manual"
_SUBMITTED_ICON = {"submitted": "✅", "no_candidate": "⚠️", "duplicate": "♻️", "failed": "❌"}


def summary_key(slot_id: str, route: str | None = None) -> str:
    return f"notification:{slot_id}:summary" + (f":{route}" if route else "")


def refetch_key(slot_id: str, target_id: str) -> str:
    return f"refetch-outcome:{slot_id}:{target_id}"


def _primary_route(config: Settings, target_id: str) -> tuple[str | None, RouteSettings | None]:
    target = config.target(target_id)
    routes = target.routes() if target else []
    if not routes:
        return None, None
    return routes[0], config.route(routes[0])


def _url(route: RouteSettings | None, field: str) -> bool:
    return route is not None and bool(route.notice_url(field))


def is_manual(slot: Slot) -> bool:
    return slot.trigger_source == MANUAL_SOURCE or bool(slot.manual_request_id)


def summary_status(cells: list[Cell]) -> str:
    submitted = sum(1 for c in cells if c.status == CellStatus.SUBMITTED)
    if cells and submitted == len(cells):
        return "success"
    return "partial" if submitted else "failed"


def _target_entry(config: Settings, cell: Cell) -> dict[str, Any]:
    policy = reason_policy(cell.terminal_reason_code)
    target = config.target(cell.target_id)
    return {
        "target_id": cell.target_id,
        "work_type": cell.work_type or (target.type if target else None),
        "status": str(cell.status),
        "work_id": cell.work_id,
        "error": cell.last_error,
        "terminal_reason_code": cell.terminal_reason_code,
        "reason": cell.terminal_reason_message or (policy.message if policy else None),
        "stage": policy.stage if policy else None,
        "retryable": policy.retryable if policy else None,
        "operator_hint": None,
        "candidate_report": cell.candidate_report,
    }


def schedule_outcome(config: Settings, slot: Slot, cells: list[Cell]) -> dict[str, Any]:
    """The schedule summary body TelePost takes."""
    return {
        "schedule_id": slot.schedule_id,
        "slot_id": slot.slot_id,
        "status": summary_status(cells),
        "targets": [_target_entry(config, c) for c in cells],
    }


def _summary_text(slot: Slot, cells: list[Cell], status: str) -> str:
    lines = [f"{slot.schedule_id} · {slot.occurrence_label or slot.slot_id}"]
    for c in cells:
        kind = "小说" if c.work_type == "novel" else "插画"
        line = f"{_SUBMITTED_ICON.get(str(c.status), '❌')} {c.target_id}（{kind}）" + (f" #{c.work_id}" if c.work_id else "")
        lines.append(line)
    submitted = sum(1 for c in cells if c.status == CellStatus.SUBMITTED)
    lines.append(f"结果：{status}（{submitted}/{len(cells)} 已确认投递）")
    return "\n".join(lines)


def refetch_outcome(slot: Slot, cell: Cell) -> dict[str, Any] | None:
    """The refetch verdict body TelePost takes, or None when the refetch delivered."""
    if cell.status in (CellStatus.NO_CANDIDATE, CellStatus.DUPLICATE):
        disposition = "no_alternative"
    elif cell.status == CellStatus.FAILED:
        disposition = "failed"
    else:
        return None
    report = cell.candidate_report or {}
    skips = report.get("skipped") or []
    duplicate = sum(1 for s in skips if s.get("code") == "duplicate")
    unavailable = sum(1 for s in skips if s.get("code") == "unavailable")
    body: dict[str, Any] = {
        "request_id": slot.manual_request_id,
        "disposition": disposition,
        # PixivFlow's newest body: the closed-vocabulary code beside the human reason
        "reason_code": cell.terminal_reason_code,
        "reason": cell.terminal_reason_message or cell.last_error or cell.terminal_reason_code,
        "skipped": {"total": len(skips), "duplicate": duplicate, "invalid": len(skips) - duplicate - unavailable,
                    "unavailable": unavailable},
    }
    if cell.work_id:
        body["work_id"] = cell.work_id
    if isinstance(report.get("attempted"), int):
        body["scanned"] = report["attempted"]
    return body


def planned_notifications(config: Settings, slot: Slot, cells: list[Cell], now: int) -> list[OutboxRow]:
    """Every notification row a terminal slot owes, by its config right now (pure of I/O)."""
    cells = ordered_cells(slot, cells)
    rows: list[OutboxRow] = []

    def row(key: str, route: str, payload: dict[str, Any]) -> None:
        rows.append(OutboxRow(kind=KIND, key=key, target=route, payload=payload, next_attempt_at=now,
                              created_at=now, updated_at=now))

    if is_manual(slot):
        for cell in cells:
            name, route = _primary_route(config, cell.target_id)
            verdict = refetch_outcome(slot, cell)
            if verdict is not None and name and _url(route, "refetchOutcomeUrl"):
                text = f"重抓结果：{cell.target_id} {verdict['disposition']}"
                row(refetch_key(slot.slot_id, cell.target_id), name, {"text": text, "refetchOutcome": verdict})
        return rows
    primaries: list[str] = []
    for cell in cells:
        name, route = _primary_route(config, cell.target_id)
        if name and name not in primaries and _url(route, "scheduleOutcomeUrl"):
            primaries.append(name)
    if primaries:
        outcome = schedule_outcome(config, slot, cells)
        text = _summary_text(slot, cells, outcome["status"])
        for i, name in enumerate(primaries):
            row(summary_key(slot.slot_id, name if i else None), name, {"text": text, "scheduleOutcome": outcome})
    for cell in cells:
        name, route = _primary_route(config, cell.target_id)
        if not (name and _url(route, "notificationUrl")):
            continue
        target = config.target(cell.target_id)
        label = f"{slot.schedule_id} · {slot.occurrence_label or slot.slot_id}"
        kind = "小说" if cell.work_type == "novel" else "插画"
        notify = target is not None and target.noMatchPolicy.notify
        if cell.status == CellStatus.NO_CANDIDATE and notify:
            reason = (cell.terminal_reason_message or cell.last_error or "")[:160]
            text = "\n".join(["⚠️ PixivFlow 本次没有可投稿内容", f"计划：{label}", f"目标：{cell.target_id}（{kind}）",
                              f"原因：{reason}", "处理结果：未创建空投稿；下次定时任务继续执行。"])
            row(f"notification:{slot.slot_id}:{cell.target_id}:no-candidate", name, {"text": text})
        elif cell.status == CellStatus.FAILED:
            suffix = "delivery-dead" if cell.terminal_reason_code == "delivery_abandoned" else "failed"
            text = "\n".join(["❌ PixivFlow 本次处理失败", f"计划：{label}", f"目标：{cell.target_id}（{kind}）",
                              f"原因：{cell.terminal_reason_message or cell.terminal_reason_code or ''}"[:200]])
            row(f"notification:{slot.slot_id}:{cell.target_id}:{suffix}", name, {"text": text})
    return rows


def enqueue_terminal_notifications(outbox: Outbox, config: Settings, slot: Slot, cells: list[Cell]) -> int:
    """Insert (if absent) and wake every notification row of a terminal slot. Returns how many
    were created by this call. Safe to repeat; a ledger outage raises (the slot then stays
    open and the sweep repeats this)."""
    created = 0
    for row in planned_notifications(config, slot, cells, outbox.now()):
        created += enqueue_row(outbox, row)
    return created


def send_notification(channel: DeliveryChannel, row: OutboxRow, timeout_s: float) -> None:
    """One attempt of a notification row (PixivFlow's ``notifyOnce``): 2xx is done, any other answer
    raises with its status (4xx dead-letters, 429/5xx retries). The route's own ``timeoutMs``
    bounds the request; ``timeout_s`` only decided that the attempt could start."""
    payload = row.payload or {}
    if payload.get("refetchOutcome") is not None:
        field, body = "refetchOutcomeUrl", payload["refetchOutcome"]
    elif payload.get("scheduleOutcome") is not None:
        field, body = "scheduleOutcomeUrl", payload["scheduleOutcome"]
    else:
        field, body = "notificationUrl", {"text": payload.get("text") or "", "idempotency_key": row.key}
    if not channel.ready(row.target):
        raise NotReady(f"route {row.target} readiness probe failed")
    answer = channel.post_json(row.target, field, body, row.key)
    if not 200 <= answer.status <= 299:
        raise OutboxAttemptError(f"notification endpoint returned HTTP {answer.status}", status=answer.status)


def notification_row_kind(channel: DeliveryChannel) -> RowKind:
    """The ``notification`` rows, sent through the route channel. 30 s: the routes' default
    ``timeoutMs``; a record with less time left than that plus the settle margin goes back to its
    queue unclaimed."""
    return RowKind(partial(send_notification, channel), 30.0)
