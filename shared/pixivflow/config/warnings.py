"""Warnings: the values repaired with a default instead of refusing the config, the keys accepted
but not acted on, and valid values that can never select anything."""

from __future__ import annotations

import copy
import math
from typing import TYPE_CHECKING, Any

from ..domain.scan import DEFAULT_SCAN_LIMIT, MAX_SCAN_LIMIT, MIN_SCAN_LIMIT
from .base import DEFAULT_QUEUED_TIMEOUT_MS, DEFAULT_STALL_TIMEOUT_MS, STALL_MIN_TIMEOUT_MS

if TYPE_CHECKING:
    from .model import PixivFlowConfig

# -- warn and default -----------------------------------------------------------------------------
#
# Exactly these values are repaired with a warning instead of failing the whole config (spec §1.1,
# §6.1, §7.2): the two liveness budgets (a non-integer or sub-minute budget falls back to its
# default) and the candidate scan limits (clamped to 1..100; a non-integer one is ignored). Any
# other bad value is a fatal ConfigError naming its field (DESIGN §7).

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
    """Valid values that can never select anything: worth a warning, not a refusal."""
    warnings: list[str] = []
    for account, governance in config.schedulerRuntime.resourceGovernance.pixivAccounts.items():
        if governance.queueLimit is not None:
            # PixivFlow bounds the executions waiting for a permit; here they wait in the
            # execution queue, re-queued for the holder's lease end (issue 24).
            warnings.append(f"schedulerRuntime.resourceGovernance.pixivAccounts.{account}.queueLimit: not supported by "
                            "this deployment (waiting cells stay in the execution queue); ignored")
    for i, target in enumerate(config.targets):
        if target.startDate and target.endDate and target.startDate > target.endDate:
            warnings.append(f"targets[{i}].startDate: {target.startDate} is after endDate {target.endDate}; "
                            "the target can never select a work")
    return warnings

