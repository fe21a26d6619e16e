"""Plans: the ``schedules`` block (spec §1; one slot per occurrence of each schedule's cron)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from ..domain.cron import to_eventbridge_cron
from ..domain.occurrence import validate_cron, validate_timezone
from .base import DEFAULT_SCHEDULE_TIMEOUT_MS, ID_PATTERN, _Model

class ScheduleConfig(_Model):
    id: str = Field(pattern=ID_PATTERN)
    name: str | None = None
    enabled: bool = True
    cron: str | None = None
    timezone: str = "UTC"
    targetIds: list[str] | None = None
    timeout: int | None = Field(default=None, ge=1000)
    minInterval: int | None = None
    maxExecutions: int | None = None
    maxConsecutiveFailures: int | None = None
    failureRetryDelay: int | None = None

    @field_validator("timezone", mode="before")
    @classmethod
    def _tz(cls, value: Any) -> str:
        tz = (value or "").strip() if isinstance(value, str) or value is None else value
        tz = tz or "UTC"
        try:
            validate_timezone(tz)
        except ValueError as exc:
            raise ValueError(f"unknown IANA time zone {tz!r}") from exc
        return tz

    @model_validator(mode="after")
    def _cron(self) -> "ScheduleConfig":
        if self.cron is not None and self.cron.strip():
            try:
                validate_cron(self.cron)
                to_eventbridge_cron(self.cron)  # the clock must be able to express it
            except ValueError as exc:
                raise ValueError(f"cron: {exc}") from exc
        elif self.enabled:
            raise ValueError("cron: required when the schedule is enabled")
        return self

    @property
    def timeout_ms(self) -> int:
        return self.timeout or DEFAULT_SCHEDULE_TIMEOUT_MS
