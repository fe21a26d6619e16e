"""The stored files a delivery carries, as protocol Assets, signed at send time.

The intent row holds each stored file's record (``file_records``: key, size, SHA-256, type, role,
pixel size, meta; ~200 bytes), written once when the row is created after every file is stored
(one S3 PUT per file, no manifest object). It never holds a URL: a
presigned URL is ~1-2 KB and one signed at enqueue could expire before a late retry, so each
attempt signs fresh URLs valid for ``download.assetUrlTtlSeconds`` from the records.
"""

from __future__ import annotations

from typing import Any

import base64
from collections.abc import Sequence

from ..domain.assets import artifact_prefix, assets_for, file_key
from ..domain.errors import SourceError
from ..domain.model import Intent
from ..domain.work import ArtifactFile, StoredFile, Work
from ..ports import ArtifactStore, Log, WorkSource

# The route families that upload previews beside the originals: httpMultipart sends them under
# previewFileField, the Telegram review route sends a page over sendPhoto's limits as its preview.


# A record's attributes are one letter each (n name, t type, z size, h SHA-256 in base64, r role
# when not "original", w/y width/height, m meta): every write of the intent row pays for its bytes
# (one write unit per KB; tests/perf/test_cost.py).


def file_records(files: Sequence[StoredFile]) -> list[dict[str, Any]]:
    """What the intent records of each stored file (the ledger's copy of the store's answer):
    name, type, size, SHA-256 (base64), role, size in pixels, meta; the key is rebuilt from the name."""
    out: list[dict[str, Any]] = []
    for f in files:
        record: dict[str, Any] = {"n": f.name, "t": f.content_type, "z": f.size,
                                  "h": base64.b64encode(bytes.fromhex(f.sha256)).decode("ascii")}
        if f.role != "original":
            record["r"] = f.role
        if f.width is not None:
            record["w"] = f.width
        if f.height is not None:
            record["y"] = f.height
        if f.meta:
            record["m"] = dict(f.meta)
        out.append(record)
    return out


def recorded_files(intent: Intent) -> list[StoredFile]:
    """The bound work's stored files, in page order, as its intent recorded them."""
    prefix = artifact_prefix(intent.slot_id, intent.target_id, intent.work_id)
    return [StoredFile(key=file_key(prefix, str(r["n"])), name=str(r["n"]), content_type=str(r["t"]), size=int(r["z"]),
                       sha256=base64.b64decode(str(r["h"])).hex(), role=str(r.get("r") or "original"),
                       width=r.get("w"), height=r.get("y"), meta=dict(r.get("m") or {}))
            for r in intent.files or []]


def with_assets(artifacts: ArtifactStore, intent: Intent, body: dict[str, Any], *, url_ttl_s: int,
                origin: str) -> dict[str, Any]:
    """``body`` plus ``assets`` when the intent's work has stored files (else unchanged): each
    file's URL signed now, valid ``url_ttl_s`` seconds; ``origin`` names where the files came
    from (``pixiv``, or ``generated`` by the catalogue)."""
    files = recorded_files(intent)
    if not files:
        return body
    return {**body, "assets": assets_for(files, lambda f: artifacts.url(f, url_ttl_s), source=origin)}


def previews_for(source: WorkSource, log: Log, work: Work, files: list[ArtifactFile], *,
                 target_id: str) -> list[ArtifactFile]:
    """Pixiv's ``large`` image of every page, stored with the originals (PixivFlow's
    ``previewFileField``), when the work is an illustration; the caller asks only when one of the
    target's routes takes previews (``RouteSettings.takes_previews``). All or none: a receiver refuses previews
    that do not pair one-to-one with the files, so a failed preview leaves the work without
    previews (logged)."""
    if work.work_type != "illustration" or not files:
        return []
    try:
        previews = list(source.download_previews(work, files))
    except SourceError as exc:
        log("warning", "previews could not be fetched; the work is delivered without them", event="artifacts.no_previews",
            work_id=work.work_id, target_id=target_id, error=str(exc)[:300])
        return []
    return previews if len(previews) == len(files) else []
