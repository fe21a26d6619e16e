"""What every config area shares: the base model (PixivFlow's camelCase keys, unknown keys kept for
the warnings), the id grammar, the per-slot caps and the liveness defaults, and the URL rules."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"
_ID_RE = re.compile(ID_PATTERN)
MAX_TARGETS_PER_SCHEDULE = 90  # keeps every per-slot transaction under DynamoDB's 100 items
MAX_ROUTES_PER_TARGET = 3
DEFAULT_SCHEDULE_TIMEOUT_MS = 1_800_000
DEFAULT_QUEUED_TIMEOUT_MS = 1_800_000
DEFAULT_STALL_TIMEOUT_MS = 900_000
STALL_MIN_TIMEOUT_MS = 60_000


class _Model(BaseModel):
    # defer_build, for cold start: a config model's validator is built when it first validates,
    # not when its class is made. Loading a config validates PixivFlowConfig once, which builds one
    # validator for the whole tree instead of one per nested model at import (33 of them).
    model_config = ConfigDict(extra="allow", populate_by_name=True, frozen=True, defer_build=True)



_SECRET_REF = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")


def _http_url(value: str, *, allow_refs: bool) -> str:
    if allow_refs and _SECRET_REF.search(value or ""):
        return value  # validated once expanded, at send time
    if not re.match(r"^https?://[^\s]+$", value or ""):
        raise ValueError("must be an http(s) URL" + (" or contain a ${VAR} reference" if allow_refs else ""))
    return value


def _base_url(value: str | None) -> str | None:
    if value is None:
        return None
    if not re.match(r"^https?://[^/?#\s]+(/[^?#\s]*)?$", value):
        raise ValueError("must be an http(s) base URL without query or fragment")
    return value.rstrip("/")
