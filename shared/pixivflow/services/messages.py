"""Queue messages: their bodies (validated by pydantic when received) and the one way every use
case sends them, which logs what SQS did not take."""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from ..domain.outbox import OutgoingMessage
from ..ports import Log, Queues


class ExecutionMessage(BaseModel):
    # built on the first message validated: the trigger and the sweep only send them
    model_config = ConfigDict(extra="ignore", defer_build=True)
    slotId: str = Field(min_length=1, max_length=300)
    targetId: str = Field(min_length=1, max_length=64)


class OutboxMessage(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)
    kind: str = Field(min_length=1, max_length=32)
    key: str = Field(min_length=1, max_length=1000)


def execution_body(slot_id: str, target_id: str) -> dict[str, str]:
    return {"slotId": slot_id, "targetId": target_id}


def outbox_body(kind: str, key: str) -> dict[str, str]:
    return {"kind": kind, "key": key}


def send_logged(queues: Queues, log: Log, queue: str, messages: Sequence[OutgoingMessage], *, event: str,
                **fields: Any) -> list[int]:
    """Send on ``queue`` ("execution" or "outbox"); a message SQS did not take is logged, never silent.

    What a lost send leaves behind is durable in the ledger (a cell with ``dispatchedAt``, a due outbox
    row), so the sweep re-drives it; the warning tells an operator why it came late."""
    send = queues.send_execution if queue == "execution" else queues.send_outbox
    failed: list[int] = send(list(messages))
    if failed:
        log("warning", f"{queue} message(s) not sent; the sweep will re-drive them", event=event,
            failed=len(failed), **fields)
    return failed


def wake_outbox(queues: Queues, log: Log, rows: Iterable[tuple[str, str]], *, event: str, delay_s: int = 0,
                **fields: Any) -> list[int]:
    """Wake the deliver function for each outbox row ``(kind, key)``, after ``delay_s``. A message is
    only a wake-up: the row is durable, and one that was not sent is re-driven by the sweep."""
    messages = [OutgoingMessage(outbox_body(kind, key), delay_s=delay_s) for kind, key in rows]
    return send_logged(queues, log, "outbox", messages, event=event, **fields) if messages else []


def wake_cells(queues: Queues, log: Log, cells: Iterable[tuple[str, str]], *, event: str, delay_s: int = 0,
               **fields: Any) -> list[int]:
    """Wake the execute function for each cell ``(slot id, target id)``, after ``delay_s``; a cell
    whose message was not sent keeps its ``dispatchedAt``, and the sweep dispatches it again."""
    messages = [OutgoingMessage(execution_body(slot_id, target_id), delay_s=delay_s) for slot_id, target_id in cells]
    return send_logged(queues, log, "execution", messages, event=event, **fields) if messages else []
