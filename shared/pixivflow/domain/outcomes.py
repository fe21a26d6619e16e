"""What a target handler returns, and the candidate scan report it carries."""

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
class CandidateSupply:
    """CandidateSupplyReport: the funnel from what the source returned to the candidates.

    ``fetched`` counts the distinct works the source returned to this selection, ``selected``
    those that passed every selection rule (the pool the scan walks); each other work is
    counted once under the code of the first rule that rejected it (``reasons``). Counts only,
    by design: per-work rejection reasons are never persisted.
    """

    fetched: int = 0
    selected: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    # Queries the source failed to answer while others did (a topic's tag searches): the selection
    # went on with what answered, and the report names what it could not see.
    failed_queries: list[str] = field(default_factory=list)

    @property
    def rejected(self) -> int:
        return max(0, self.fetched - self.selected)

    def reject(self, code: str, count: int = 1) -> None:
        if count > 0:
            self.reasons[code] = self.reasons.get(code, 0) + count

    def merged(self, other: "CandidateSupply") -> "CandidateSupply":
        """Two passes summed."""
        reasons = dict(self.reasons)
        for code, count in other.reasons.items():
            reasons[code] = reasons.get(code, 0) + count
        failed = list(self.failed_queries) + [q for q in other.failed_queries if q not in self.failed_queries]
        return CandidateSupply(self.fetched + other.fetched, self.selected + other.selected, reasons, failed)

    def sorted_reasons(self) -> list[dict[str, Any]]:
        """``[{code, count}]`` largest first (ties by code, so the order is stable), zero counts dropped."""
        rows = sorted(((c, n) for c, n in self.reasons.items() if n > 0), key=lambda r: (-r[1], r[0]))
        return [{"code": code, "count": count} for code, count in rows]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "fetched": self.fetched,
            "selected": self.selected,
            "rejected": self.rejected,
            "reasons": self.sorted_reasons(),
        }
        if self.failed_queries:
            out["failedQueries"] = list(self.failed_queries)
        return out


@dataclass
class CandidateScan:
    """CandidateScanSummary: how far one selection went and why candidates were passed over."""

    bound: int = 0
    attempted: int = 0
    skipped: list[CandidateSkip] = field(default_factory=list)
    outages: list[str] = field(default_factory=list)
    supply: CandidateSupply | None = None  # absent when no search ran (a resumed locked work)

    @property
    def fetched(self) -> int | None:
        """How many works the source returned (``supply.fetched``), or None when nothing was searched."""
        return None if self.supply is None else self.supply.fetched

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "bound": self.bound,
            "attempted": self.attempted,
            "skipped": [s.to_dict() for s in self.skipped],
            "outages": list(self.outages),
        }
        if self.supply is not None:
            out["supply"] = self.supply.to_dict()
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
    # failed: the terminal reason the failure stands for, given where it was raised; None only when
    # the failure is known by text from outside (a source's or a route's message), then classified
    reason_code: str | None = None
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
    def failed(error: str, retryable: bool, scan: CandidateScan | None = None, *,
               reason_code: str | None = None) -> "TargetOutcome":
        return TargetOutcome("failed", error=error, retryable=retryable, scan=scan, reason_code=reason_code)

    @property
    def is_terminal(self) -> bool:
        if self.kind == "failed":
            return not self.retryable
        return self.kind != "delivery_pending"
