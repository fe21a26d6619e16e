"""Warnings: the values repaired with a default instead of refusing the config, the keys accepted
but not acted on, and valid values that can never select anything."""

from __future__ import annotations

import copy
import math
import re
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ..domain.scan import DEFAULT_SCAN_LIMIT, MAX_SCAN_LIMIT, MIN_SCAN_LIMIT
from .base import DEFAULT_QUEUED_TIMEOUT_MS, DEFAULT_STALL_TIMEOUT_MS, STALL_MIN_TIMEOUT_MS
from .plans import legacy_plan

if TYPE_CHECKING:
    from .model import PixivFlowConfig

# -- warn and default -----------------------------------------------------------------------------
#
# Exactly these values are repaired with a warning instead of failing the whole config: the two
# liveness budgets (a non-integer or sub-minute budget falls back to its default) and the candidate
# scan limits (clamped to 1..100; a non-integer one is ignored). Any other bad value is a fatal
# ConfigError naming its field.

_BUDGETS = (("queuedTimeoutMs", DEFAULT_QUEUED_TIMEOUT_MS), ("stallTimeoutMs", DEFAULT_STALL_TIMEOUT_MS))
LIMIT_WARN_ABOVE = 1000
# PixivFlow target keys this deployment does not act on; they change no selection, so they are
# accepted with a warning (seriesId does change what is selected: fatal).
IGNORED_TARGET_KEYS = ("restrict",)


def _integral(value: Any) -> int | None:
    """The value as an int when it is a finite whole number (``3`` or ``3.0``), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and (not math.isfinite(value) or not value.is_integer()):
        return None
    return int(value)


def _soften_scan_limit(block: dict, path: str, fallback: str, warnings: list[str]) -> None:
    if block.get("candidateScanLimit") is None:
        return
    raw = block["candidateScanLimit"]
    value = _integral(raw)
    if value is None:
        warnings.append(f"{path}.candidateScanLimit: {raw!r} is not an integer; ignored ({fallback} is used)")
        block.pop("candidateScanLimit")
    elif value < MIN_SCAN_LIMIT:
        warnings.append(f"{path}.candidateScanLimit: {raw!r} is below {MIN_SCAN_LIMIT}; {MIN_SCAN_LIMIT} is used")
        block["candidateScanLimit"] = MIN_SCAN_LIMIT
    elif value > MAX_SCAN_LIMIT:
        warnings.append(f"{path}.candidateScanLimit: {raw!r} is above {MAX_SCAN_LIMIT}; {MAX_SCAN_LIMIT} is used")
        block["candidateScanLimit"] = MAX_SCAN_LIMIT
    else:
        block["candidateScanLimit"] = value


def _soften(data: dict) -> tuple[dict, list[str]]:
    """A copy of ``data`` with the warn-and-default values repaired, and the warnings."""
    data = copy.deepcopy(data)
    warnings: list[str] = []
    legacy = legacy_plan(data)
    if legacy:
        warnings.append(legacy)
    runtime = data.get("schedulerRuntime")
    if isinstance(runtime, dict):
        for name, default in _BUDGETS:
            raw = runtime.get(name)
            if raw is None:
                continue
            value = _integral(raw)
            if value is None or value < STALL_MIN_TIMEOUT_MS:
                why = "is below the 60000 ms floor" if value is not None else "is not an integer number of milliseconds"
                warnings.append(f"schedulerRuntime.{name}: {raw!r} {why}; the default {default} is used")
                runtime.pop(name)
            else:
                runtime[name] = value
    download = data.get("download")
    if isinstance(download, dict):
        _soften_scan_limit(download, "download", f"the default {DEFAULT_SCAN_LIMIT}", warnings)
    targets = data.get("targets")
    if isinstance(targets, list):
        for i, target in enumerate(targets):
            if not isinstance(target, dict):
                continue
            _soften_scan_limit(target, f"targets[{i}]", "download.candidateScanLimit or the default", warnings)
            limit = _integral(target.get("limit"))
            if limit is not None and limit > LIMIT_WARN_ABOVE:
                warnings.append(f"targets[{i}].limit: {limit} is above {LIMIT_WARN_ABOVE}; one run may page and scan for a long time")
            for key in IGNORED_TARGET_KEYS:
                if key in target:
                    warnings.append(f"targets[{i}].{key}: not supported by this deployment; ignored")
    return data, warnings



def _semantic_warnings(config: PixivFlowConfig) -> list[str]:
    """Valid values that can never select anything, or never reach anyone: worth a warning, not a refusal."""
    warnings: list[str] = []
    retention = config.storage.retention_warning()  # a day count that is not a retention class
    if retention:
        warnings.append(retention)
    for account, governance in config.schedulerRuntime.resourceGovernance.pixivAccounts.items():
        if governance.queueLimit is not None:
            # PixivFlow bounds the executions waiting for a permit; here they wait in the
            # execution queue, re-queued for the holder's lease end.
            warnings.append(f"schedulerRuntime.resourceGovernance.pixivAccounts.{account}.queueLimit: not supported by "
                            "this deployment (waiting cells stay in the execution queue); ignored")
    for i, target in enumerate(config.targets):
        if target.startDate and target.endDate and target.startDate > target.endDate:
            warnings.append(f"targets[{i}].startDate: {target.startDate} is after endDate {target.endDate}; "
                            "the target can never select a work")
        routes = target.delivery.routes() if target.delivery else []
        # (A cache target without a route is the DRY RUN warning of model._ignored_keys.)
        if target.noMatchPolicy.notify and not (routes and getattr(config.route(routes[0]), "notificationUrl", None)):
            warnings.append(f"targets[{i}].noMatchPolicy.notify: the target's primary route has no notificationUrl; "
                            "no no-match notice is sent")
    return warnings


# -- keys that mean nothing here, and keys nobody knows ----------------------------------------------
#
# PixivFlow has no strict schema, so a config carries keys of its process model. Those
# that cannot mean anything on Lambda are named in ONE warning; any other key the model does not
# know is a warning of its own with a did-you-mean hint. Neither refuses the config: a typo must
# be visible, a moved-over config must load.

LAMBDA_MEANINGLESS_KEYS = (
    "logLevel", "initialDelay",
    "storage.databasePath", "storage.downloadDirectory", "storage.illustrationDirectory", "storage.novelDirectory",
    "storage.cacheMaxSizeMB",
    "schedulerRuntime.catchUpMissedRuns", "schedulerRuntime.watchConfig", "schedulerRuntime.reloadDebounceMs",
    "schedulerRuntime.queueLimit", "schedulerRuntime.exitWhenIdle", "schedulerRuntime.idleGraceMs",
    "schedulerRuntime.maxLifetimeMs",
    "schedulerRuntime.trigger.enabled", "schedulerRuntime.trigger.port", "schedulerRuntime.trigger.host",
    "download.concurrency", "download.dynamicConcurrency", "download.minConcurrency", "download.maxRetries",
    "download.retryDelay", "download.timeout", "download.maxFallbackStages",
)
_MEANINGLESS_BLOCKS = frozenset(k.split(".")[0] for k in LAMBDA_MEANINGLESS_KEYS if k.count(".") == 1
                                and k.split(".")[0] == "storage")
# Extra keys another warning already speaks for.
_SPOKEN_FOR = frozenset({"targets[].delivery.richNovelPreview"} | {f"targets[].{k}" for k in IGNORED_TARGET_KEYS})
MEANINGLESS_WHY = ("files are S3 objects kept storage.cacheRetentionDays by the bucket's lifecycle rules, the process and its trigger server "
                   "are Lambda invocations behind EventBridge Scheduler and API Gateway, concurrency is the execute "
                   "queue's, a cell's retries are the ledger's, the log level is the stack's LogLevel parameter")


def _generic(path: str) -> str:
    path = re.sub(r"\[\d+\]", "[]", path)
    return re.sub(r"^delivery\.targets\.[^.]+", "delivery.targets.*", path)


def _hint(key: str, candidates: list[str]) -> str:
    folded = {c.lower(): c for c in candidates}
    import difflib  # only a config with an unknown key needs a suggestion: not imported on every cold start

    match = folded.get(key.lower()) or next(iter(difflib.get_close_matches(key, candidates, n=1, cutoff=0.7)), None)
    return f" (did you mean {match!r}?)" if match else ""


def _siblings(generic_parent: str) -> list[str]:
    prefix = generic_parent + "." if generic_parent else ""
    return [k[len(prefix):] for k in LAMBDA_MEANINGLESS_KEYS if k.startswith(prefix) and "." not in k[len(prefix):]]


def _walk(node: BaseModel, path: str, meaningless: list[str], unknown: list[str]) -> None:
    generic_here = _generic(path)
    for key, value in (node.model_extra or {}).items():
        child = f"{path}.{key}" if path else key
        generic = _generic(child)
        if generic in _SPOKEN_FOR:
            continue
        if generic in LAMBDA_MEANINGLESS_KEYS:
            meaningless.append(generic)
        elif generic in _MEANINGLESS_BLOCKS and isinstance(value, dict):
            for sub in value:
                if f"{generic}.{sub}" in LAMBDA_MEANINGLESS_KEYS:
                    meaningless.append(f"{generic}.{sub}")
                else:
                    unknown.append(f"{child}.{sub}: unknown key; ignored{_hint(sub, _siblings(generic))}")
        else:
            known = list(type(node).model_fields) + _siblings(generic_here) + (
                sorted(_MEANINGLESS_BLOCKS) if not path else [])
            unknown.append(f"{child}: unknown key; ignored{_hint(key, known)}")
    for name in type(node).model_fields:
        value = getattr(node, name)
        child = f"{path}.{name}" if path else name
        if isinstance(value, BaseModel):
            _walk(value, child, meaningless, unknown)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, BaseModel):
                    _walk(item, f"{child}[{i}]", meaningless, unknown)
        elif isinstance(value, dict):
            for k, item in value.items():
                if isinstance(item, BaseModel):
                    _walk(item, f"{child}.{k}", meaningless, unknown)


def _key_warnings(config: PixivFlowConfig) -> list[str]:
    meaningless: list[str] = []
    unknown: list[str] = []
    _walk(config, "", meaningless, unknown)
    out = []
    if meaningless:
        names = ", ".join(dict.fromkeys(meaningless))
        out.append(f"{names}: PixivFlow keys with no meaning on Lambda; accepted and ignored ({MEANINGLESS_WHY})")
    return out + unknown

