"""What a target handler returns, and the candidate scan report it carries (spec §6.2, §6.3)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal


class SkipCode(StrEnum):
    DUPLICATE = "duplicate"
    DELETED = "deleted"
    ACCESS_DENIED = "access_denied"
    UNSUPPORTED_MEDIA = "unsupported_media"
    INVALID_METADATA = "invalid_metadata"
    UNAVAILABLE = "unavailable"
    FILTERED = "filtered"


class JobLevelOutage(StrEnum):
    DATABASE_UNAVAILABLE = "database_unavailable"
    PIXIV_AUTH_FAILURE = "pixiv_auth_failure"
    DELIVERY_UNAVAILABLE = "delivery_unavailable"
    NETWORK_OUTAGE = "network_outage"


@dataclass(frozen=True)
class CandidateSkip:
    code: str
    work_id: str
    reason: str
    retryable: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "workId": self.work_id, "reason": self.reason}
        if self.retryable:
            out["retryable"] = True
        return out


@dataclass
class CandidateScan:
    """CandidateScanSummary: how far one selection went and why candidates were passed over."""

    bound: int = 0
    attempted: int = 0
    skipped: list[CandidateSkip] = field(default_factory=list)
    outages: list[str] = field(default_factory=list)
    fetched: int | None = None  # supply: how many candidates the source returned

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "bound": self.bound,
            "attempted": self.attempted,
            "skipped": [s.to_dict() for s in self.skipped],
            "outages": list(self.outages),
        }
        if self.fetched is not None:
            out["supply"] = {"fetched": self.fetched}
        return out


OutcomeKind = Literal["submitted", "stored", "delivery_pending", "no_candidate", "duplicate", "failed"]


@dataclass(frozen=True)
class TargetOutcome:
    """The one typed result of running a cell. ``apply_outcome`` is the only place it becomes a cell state."""

    kind: OutcomeKind
    work_id: str | None = None
    work_type: str | None = None
    reason: str | None = None  # no_candidate / duplicate
    error: str | None = None  # failed
    retryable: bool = False  # failed only
    scan: CandidateScan | None = None
    work_ids: tuple[str, ...] = ()  # every work a multi-work cell handed to delivery

    @staticmethod
    def submitted(work_id: str, work_type: str, scan: CandidateScan | None = None) -> "TargetOutcome":
        return TargetOutcome("submitted", work_id=work_id, work_type=work_type, scan=scan)

    @staticmethod
    def stored(work_id: str, work_type: str, scan: CandidateScan | None = None) -> "TargetOutcome":
        return TargetOutcome("stored", work_id=work_id, work_type=work_type, scan=scan)

    @staticmethod
    def delivery_pending(
        work_id: str, work_type: str, scan: CandidateScan | None = None, work_ids: tuple[str, ...] = ()
    ) -> "TargetOutcome":
        return TargetOutcome(
            "delivery_pending", work_id=work_id, work_type=work_type, scan=scan, work_ids=work_ids or (work_id,)
        )

    @staticmethod
    def no_candidate(reason: str, scan: CandidateScan | None = None) -> "TargetOutcome":
        return TargetOutcome("no_candidate", reason=reason, scan=scan)

    @staticmethod
    def duplicate(work_id: str, reason: str, scan: CandidateScan | None = None) -> "TargetOutcome":
        return TargetOutcome("duplicate", work_id=work_id, reason=reason, scan=scan)

    @staticmethod
    def failed(error: str, retryable: bool, scan: CandidateScan | None = None) -> "TargetOutcome":
        return TargetOutcome("failed", error=error, retryable=retryable, scan=scan)

    @property
    def is_terminal(self) -> bool:
        if self.kind == "failed":
            return not self.retryable
        return self.kind != "delivery_pending"
