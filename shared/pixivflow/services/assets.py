"""The stored files a delivery carries, as protocol Assets, signed at send time (issue 10).

The intent row never holds them: a presigned URL is ~1-2 KB, so a few pages would multiply the
write units of every outbox write of the row, and a URL signed at enqueue could expire before a
late retry. Each attempt instead reads the work's manifest (one S3 GET; the store keeps what it
just wrote or read) and signs fresh URLs valid for ``download.assetUrlTtlSeconds``.
"""

from __future__ import annotations

from typing import Any

from ..domain.assets import artifact_prefix, assets_for
from ..domain.model import Intent
from .engine import Engine


def with_assets(engine: Engine, intent: Intent, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` plus ``assets`` when the intent's work has stored files (else unchanged)."""
    try:
        files = engine.artifacts.stored(artifact_prefix(intent.slot_id, intent.target_id, intent.work_id))
    except NotImplementedError:
        return body
    if not files:
        return body
    ttl = engine.config.download.assetUrlTtlSeconds
    origin = "pixiv" if engine.config.source.kind == "pixiv" else "generated"
    return {**body, "assets": assets_for(files, lambda f: engine.artifacts.url(f, ttl), source=origin)}
