"""The whole document: every area's block, the cross-references between them, and the lookups."""

from __future__ import annotations

from typing import Any

from pydantic import Field, PrivateAttr, model_validator

from .base import MAX_ROUTES_PER_TARGET, MAX_TARGETS_PER_SCHEDULE, _Model
from .pixiv import DownloadConfig, NetworkConfig, PixivConfig, SourceConfig
from .plans import ScheduleConfig
from .routes import PREVIEW_MAX_TIMEOUT_MS, DeliveryConfig, RouteModel
from .runtime import JobsConfig, SchedulerRuntimeConfig, StorageConfig
from .targets import TargetConfig
from ..ports import ScheduleSettings

class PixivFlowConfig(_Model):
    _warnings: tuple[str, ...] = PrivateAttr(default=())
    schedules: list[ScheduleConfig] = Field(default_factory=list)
    targets: list[TargetConfig] = Field(default_factory=list)
    delivery: DeliveryConfig = Field(default_factory=DeliveryConfig)
    # Absent source + a `pixiv` block = the Pixiv source (a PixivFlow config moves over unchanged).
    source: SourceConfig
    pixiv: PixivConfig | None = None
    network: NetworkConfig = Field(default_factory=NetworkConfig)
    schedulerRuntime: SchedulerRuntimeConfig = Field(default_factory=SchedulerRuntimeConfig)
    download: DownloadConfig = Field(default_factory=DownloadConfig)
    jobs: JobsConfig = Field(default_factory=JobsConfig)
    storage: StorageConfig = Field(default_factory=StorageConfig)

    @model_validator(mode="before")
    @classmethod
    def _pixiv_source(cls, data: Any) -> Any:
        """A PixivFlow config has a ``pixiv`` block and no ``source``: that IS the Pixiv source."""
        if isinstance(data, dict) and data.get("source") is None and isinstance(data.get("pixiv"), dict):
            return {**data, "source": {"kind": "pixiv"}}
        return data

    @model_validator(mode="after")
    def _references(self) -> "PixivFlowConfig":
        """Every cross-reference rule, ALL findings at once: ``config check`` lists each unknown
        target, route and duplicate id with its field, not only the first."""
        found = _unique("schedules", [s.id for s in self.schedules]) + _unique_targets(self.targets)
        target_ids = {t.id for t in self.targets}
        for i, schedule in enumerate(self.schedules):
            found += [f"schedules[{i}].targetIds: unknown target {ref!r}" for ref in schedule.targetIds or []
                      if ref not in target_ids]
            count = len(schedule.targetIds) if schedule.targetIds else len(self.targets)
            if count > MAX_TARGETS_PER_SCHEDULE:
                found.append(f"schedules[{i}].targetIds: {count} targets; at most {MAX_TARGETS_PER_SCHEDULE} per schedule")
        for i, target in enumerate(self.targets):
            routes = target.delivery.routes() if target.delivery else []
            if len(routes) > MAX_ROUTES_PER_TARGET:
                found.append(f"targets[{i}].delivery: at most {MAX_ROUTES_PER_TARGET} routes per target")
            found += [f"targets[{i}].delivery: unknown route {name!r}" for name in routes if name not in self.delivery.targets]
        if found:
            raise ReferenceErrors(found)
        return self

    @property
    def warnings(self) -> tuple[str, ...]:
        """What loading warned about (``<field path>: <what was used instead>``), in document order."""
        return self._warnings

    # -- lookups ---------------------------------------------------------------
    def schedule(self, schedule_id: str) -> ScheduleConfig | None:
        return next((s for s in self.schedules if s.id == schedule_id), None)

    def target(self, target_id: str) -> TargetConfig | None:
        return next((t for t in self.targets if t.id == target_id), None)

    def targets_for(self, schedule: ScheduleSettings) -> list[TargetConfig]:
        if schedule.targetIds:
            return [t for t in (self.target(i) for i in schedule.targetIds) if t is not None]
        return list(self.targets)

    def route(self, name: str) -> RouteModel | None:
        return self.delivery.targets.get(name)

    def _ignored_keys(self) -> list[str]:
        """What the load accepted but will not act on as written: deprecated PixivFlow route keys
        (the outbox's own budget applies instead), dry-run targets, preview limits."""
        out = []
        base, top = self.delivery.outboxRetryBaseMs, self.delivery.outboxRetryMaxMs
        for name, route in self.delivery.targets.items():
            for key in route.deprecated_keys():
                out.append(f"delivery.targets.{name}.{key}: deprecated by PixivFlow; accepted and ignored "
                           f"(the outbox's own budget applies: {route.attempt_budget} attempts, backoff from "
                           f"outboxRetryBaseMs {base} ms up to outboxRetryMaxMs {top} ms)")
        for i, target in enumerate(self.targets):
            if target.dry_run:
                # PixivFlow's pixivflow.shadow.json: its control-plane runner executes it in
                # shadow mode; here a route-less cache target is that dry run.
                out.append(f"targets[{i}].delivery: storageMode cache with no delivery route: DRY RUN "
                           "(selects and stores each work and records what it would deliver; posts nothing, "
                           "sends no notification)")
            preview = target.delivery.richNovelPreview if target.delivery is not None else None
            if preview is not None and target.type != "novel":
                out.append(f"targets[{i}].delivery.richNovelPreview: only novels get a TelePress preview; ignored")
            elif preview is not None and "timeoutMs" in preview.model_fields_set and preview.timeoutMs > PREVIEW_MAX_TIMEOUT_MS:
                out.append(f"targets[{i}].delivery.richNovelPreview.timeoutMs: {preview.timeoutMs} is above "
                           f"{PREVIEW_MAX_TIMEOUT_MS}; {PREVIEW_MAX_TIMEOUT_MS} is used (the preview shares the "
                           "delivery attempt's time)")
        return out


def _unique_targets(targets: list[TargetConfig]) -> list[str]:
    first: dict[str, int] = {}
    found = []
    for i, target in enumerate(targets):
        if target.id in first and target.id_derived:
            found.append(f"targets[{i}]: selects what targets[{first[target.id]}] selects (an id-less target's id "
                         "is derived from type, mode, topic, tag, filterTag, rankingMode and the pinned ids); "
                         "give one of them an id")
        elif target.id in first:
            found.append(f"targets[{i}].id: duplicate id {target.id!r}")
        else:
            first[target.id] = i
    return found


def _unique(block: str, ids: list[str]) -> list[str]:
    seen: set[str] = set()
    found = []
    for i, value in enumerate(ids):
        if value in seen:
            found.append(f"{block}[{i}].id: duplicate id {value!r}")
        seen.add(value)
    return found


class ReferenceErrors(ValueError):
    """Every cross-reference finding of one config (``<field path>: <what is wrong>`` each): raised
    once by the model's after-validator, split back into one error line each by the loader."""

    def __init__(self, findings: list[str]) -> None:
        super().__init__("; ".join(findings))
        self.findings = list(findings)
