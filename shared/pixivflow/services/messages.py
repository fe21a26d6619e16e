"""Queue message bodies (DESIGN §5), validated by pydantic."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ExecutionMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")
    slotId: str = Field(min_length=1, max_length=300)
    targetId: str = Field(min_length=1, max_length=64)


class OutboxMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")
    kind: str = Field(min_length=1, max_length=32)
    key: str = Field(min_length=1, max_length=1000)


def execution_body(slot_id: str, target_id: str) -> dict[str, str]:
    return {"slotId": slot_id, "targetId": target_id}


def outbox_body(kind: str, key: str) -> dict[str, str]:
    return {"kind": kind, "key": key}
