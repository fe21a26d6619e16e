"""The stored files a delivery carries, as protocol Assets, signed at send time (issue 10).

The intent row never holds them: a presigned URL is ~1-2 KB, so a few pages would multiply the
write units of every outbox write of the row, and a URL signed at enqueue could expire before a
late retry. Each attempt instead reads the work's manifest (one S3 GET; the store keeps what it
just wrote or read) and signs fresh URLs valid for ``download.assetUrlTtlSeconds``.
"""

from __future__ import annotations

from typing import Any

from ..domain.assets import artifact_prefix, assets_for
from ..domain.errors import SourceError
from ..domain.model import Intent
from ..ports import ArtifactFile, Work
from .engine import Engine

# The route families that upload previews beside the originals: httpMultipart sends them under
# previewFileField, the Telegram review route sends a page over sendPhoto's limits as its preview.
PREVIEW_ROUTES = ("httpMultipart", "telegram")


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


def previews_for(engine: Engine, target: Any, work: Work, files: list[ArtifactFile]) -> list[ArtifactFile]:
    """Pixiv's ``large`` image of every page, stored with the originals (pixivflow-real-configs
    note §8 ``previewFileField``; issue 23), when the work is an illustration and one of its
    target's routes sends previews. All or none: a receiver refuses previews that do not pair
    one-to-one with the files, so a failed preview leaves the work without previews (logged)."""
    if work.work_type != "illustration" or not files:
        return []
    routes = [engine.config.route(name) for name in target.routes()]
    if not any(getattr(r, "route_type", None) in PREVIEW_ROUTES for r in routes):
        return []
    fetch = getattr(engine.source, "download_previews", None)
    if fetch is None:
        return []
    try:
        previews = list(fetch(work, files))
    except SourceError as exc:
        engine.log("warning", "previews could not be fetched; the work is delivered without them", event="artifacts.no_previews",
                   work_id=work.work_id, target_id=getattr(target, "id", None), error=str(exc)[:300])
        return []
    return previews if len(previews) == len(files) else []
