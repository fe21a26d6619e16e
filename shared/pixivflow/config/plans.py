"""Plans: the ``schedules`` block, one slot per occurrence of each schedule's cron
(``docs/explanation/scheduling.md``)."""

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


# -- the legacy ``scheduler`` block (PixivFlow's resolveSchedules) -----------------------------------

LEGACY_PLAN_ID = "default"
_LEGACY_DEFAULTS = {"enabled": False, "cron": "0 3 * * *", "timezone": "Asia/Shanghai"}


def legacy_plan(data: dict) -> str | None:
    """Fold PixivFlow's single-cron ``scheduler`` block into ``data`` (in place) as it does:
    without a ``schedules`` key it becomes plan ``default`` (named ``Default``, PixivFlow's
    defaults for what it leaves out, so ``enabled: false`` is a plan that never fires); beside
    ``schedules`` (even an empty list) it is ignored. Returns the warning to give, if any."""
    legacy = data.pop("scheduler", None)
    if legacy is None:
        return None
    if not isinstance(legacy, dict):
        return "scheduler: not a mapping; ignored"
    if "schedules" in data:
        return "scheduler: the legacy block is ignored because schedules is present"
    plan = {**_LEGACY_DEFAULTS, **legacy, "id": LEGACY_PLAN_ID, "name": "Default"}
    data["schedules"] = [plan]
    state = "enabled" if plan["enabled"] is True else "disabled: it never fires unless PIXIV_SCHEDULER_ENABLED=true"
    return f"scheduler: the legacy block is plan {LEGACY_PLAN_ID!r} ({state}); write it under schedules instead"
