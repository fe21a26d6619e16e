"""The scheduler runtime (``schedulerRuntime``: liveness budgets, the trigger's grace) and ``jobs``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from .base import DEFAULT_QUEUED_TIMEOUT_MS, DEFAULT_STALL_TIMEOUT_MS, STALL_MIN_TIMEOUT_MS, _Model

class TriggerConfig(_Model):
    graceMinutes: int = Field(default=90, ge=1)


MAX_ACCOUNT_CONCURRENCY = 16


class PixivAccountGovernance(_Model):
    """``schedulerRuntime.resourceGovernance.pixivAccounts.<accountId>``.

    ``maxConcurrency`` (1..16, default 1) is how many cells may hold a permit on the account at once
    across every container (the ledger's permit semaphore); a holder makes its Pixiv
    requests one at a time, so it is also the account's bound on requests in flight.
    ``queueLimit`` is PixivFlow's bound on executions waiting in line; here the waiting line is the
    execution queue itself, so it is accepted and ignored with a warning (config/warnings.py)."""

    maxConcurrency: int = Field(default=1, ge=1, le=MAX_ACCOUNT_CONCURRENCY, strict=True)
    queueLimit: int | None = None

    @field_validator("maxConcurrency", mode="before")
    @classmethod
    def _integer(cls, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"Must be an integer between 1 and {MAX_ACCOUNT_CONCURRENCY}")
        return value


class ResourceGovernanceConfig(_Model):
    pixivAccounts: dict[str, PixivAccountGovernance] = Field(default_factory=dict)

    def account(self, account_id: str) -> PixivAccountGovernance:
        """The account's settings; an account not listed gets PixivFlow's default (maxConcurrency 1)."""
        return self.pixivAccounts.get(account_id) or PixivAccountGovernance()


class SchedulerRuntimeConfig(_Model):
    mode: Literal["internal", "external"] = "external"
    resourceGovernance: ResourceGovernanceConfig = Field(default_factory=ResourceGovernanceConfig)
    # Malformed budgets never reach here: ``_soften`` warns and drops them.
    queuedTimeoutMs: float | int | None = None
    stallTimeoutMs: float | int | None = None
    trigger: TriggerConfig = Field(default_factory=TriggerConfig)

    @property
    def queued_timeout_ms(self) -> int:
        return _budget(self.queuedTimeoutMs, DEFAULT_QUEUED_TIMEOUT_MS)

    @property
    def stall_timeout_ms(self) -> int:
        return _budget(self.stallTimeoutMs, DEFAULT_STALL_TIMEOUT_MS)


def _budget(value: Any, default: int) -> int:
    """A liveness budget is used only when finite and >= 60 s (truncated); otherwise the default."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    if value != value or value in (float("inf"), float("-inf")) or value < STALL_MIN_TIMEOUT_MS:
        return default
    return int(value)


class JobsConfig(_Model):
    """``jobs``: Workflow Protocol v1 settings. ``callbackAllowHosts`` lists callback hosts exempt from the
    HTTPS-only and public-address rules (local development only: a loopback receiver)."""

    callbackAllowHosts: list[str] = Field(default_factory=list)

    @field_validator("callbackAllowHosts")
    @classmethod
    def _hosts(cls, value: list[str]) -> list[str]:
        hosts = []
        for host in value:
            if not isinstance(host, str) or not host.strip() or "/" in host:
                raise ValueError(f"{host!r} is not a host name")
            hosts.append(host.strip().lower().rstrip("."))
        return hosts


# -- storage: how long stored files stay ---------------------------------------------------------
#
# S3 lifecycle rules cannot follow a per-config day count (the bucket is the stack's, the config
# is read at run time), so every stored object is tagged with one of these fixed classes and
# template.yaml has one expiration rule per class. PixivFlow's ``storage.cacheRetentionDays``
# (default 14; the published configs set 7) picks the smallest
# class that keeps a file at least that long: a file is never deleted EARLIER than configured.
RETENTION_CLASSES = (1, 7, 14, 30)  # days; template.yaml ArtifactBucket has a rule for each
DEFAULT_CACHE_RETENTION_DAYS = 14
DEFAULT_RETENTION_CLASS = f"{DEFAULT_CACHE_RETENTION_DAYS}d"


def retention_days(days: int) -> int:
    """The retention class (in days) for ``days``: the smallest class >= days, else the largest."""
    return next((c for c in RETENTION_CLASSES if c >= days), RETENTION_CLASSES[-1])


class StorageConfig(_Model):
    """``storage``: only ``cacheRetentionDays`` means something here; PixivFlow's paths and its
    cache size are named in the "no meaning on Lambda" warning (config/warnings.py)."""

    cacheRetentionDays: int = Field(default=DEFAULT_CACHE_RETENTION_DAYS, ge=1, strict=True)

    @property
    def retention_class(self) -> str:
        """The value of every stored object's ``retention`` tag (s3_artifacts)."""
        return f"{retention_days(self.cacheRetentionDays)}d"

    def retention_warning(self) -> str | None:
        days, kept = self.cacheRetentionDays, retention_days(self.cacheRetentionDays)
        if kept == days:
            return None
        if kept < days:
            return (f"storage.cacheRetentionDays: {days} days is longer than the longest retention class; stored files "
                    f"are kept {kept} days (the classes are {', '.join(map(str, RETENTION_CLASSES))} days)")
        return (f"storage.cacheRetentionDays: {days} days is not a retention class; stored files are kept {kept} days, "
                f"the smallest class that is at least {days} (the classes are {', '.join(map(str, RETENTION_CLASSES))} days)")
