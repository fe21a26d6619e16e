"""Artifact stores: S3 (when ARTIFACT_BUCKET is set), an in-memory one for tests, and none.

Layout on S3 (issue 10): one prefix per bound work, ``<slotId>/<targetId>/<workId>``, given by
the execution service, so a key is stable per (slot, target, work, page):

    <prefix>/<file name>        one object per file: its bytes, ``Content-Type``, and the metadata
                                ``sha256`` / ``role`` / ``width`` / ``height`` (x-amz-meta-*)
    <prefix>/_manifest.json     written LAST: every file's name, size, SHA-256, role, size in
                                pixels and ``meta`` (e.g. ugoira frame delays, too big for S3
                                object metadata's 2 KB)

The manifest is the commit marker: ``stored(prefix)`` reads only it, so a crash halfway through
``put`` leaves nothing that looks complete and the re-run downloads again, while a crash after
it (before the delivery intent) re-uses the files without a second download.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from typing import Any, Sequence

from ..ports import ArtifactFile, StoredFile

MANIFEST = "_manifest.json"
_MANIFEST_VERSION = 1
_RECENT_KEYS = 64


def _stored(prefix: str, f: ArtifactFile) -> StoredFile:
    return StoredFile(
        key=f"{prefix}/{f.name}", name=f.name, content_type=f.content_type, size=len(f.content),
        sha256=hashlib.sha256(f.content).hexdigest(), role=f.role, width=f.width, height=f.height,
        meta=dict(f.meta or {}),
    )


def _manifest(files: Sequence[StoredFile]) -> bytes:
    return json.dumps({
        "version": _MANIFEST_VERSION,
        "files": [
            {"key": s.key, "name": s.name, "contentType": s.content_type, "size": s.size, "sha256": s.sha256,
             "role": s.role, "width": s.width, "height": s.height, "meta": dict(s.meta)}
            for s in files
        ],
    }, ensure_ascii=False, sort_keys=True).encode("utf-8")


def _from_manifest(raw: bytes) -> list[StoredFile]:
    data = json.loads(raw.decode("utf-8"))
    return [
        StoredFile(key=f["key"], name=f["name"], content_type=f["contentType"], size=int(f["size"]),
                   sha256=f["sha256"], role=f.get("role") or "original", width=f.get("width"),
                   height=f.get("height"), meta=f.get("meta") or {})
        for f in data.get("files", [])
    ]


def _error_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", ""))
    return ""


class S3Artifacts:
    """``ArtifactStore`` on one bucket (encrypted and expired by its own lifecycle rule, template.yaml)."""

    def __init__(self, client: Any, bucket: str) -> None:
        self._client = client
        self._bucket = bucket
        # What this container just wrote: a stored() right after put() costs no request.
        self._recent: OrderedDict[str, list[StoredFile]] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def bucket(self) -> str:
        return self._bucket

    def put(self, key: str, files: Sequence[ArtifactFile]) -> list[str]:
        stored = [_stored(key, f) for f in files]
        for f, s in zip(files, stored):
            metadata = {"sha256": s.sha256, "role": s.role}
            if s.width is not None:
                metadata["width"] = str(s.width)
            if s.height is not None:
                metadata["height"] = str(s.height)
            self._client.put_object(Bucket=self._bucket, Key=s.key, Body=f.content, ContentType=f.content_type,
                                    Metadata=metadata)
        self._client.put_object(Bucket=self._bucket, Key=f"{key}/{MANIFEST}", Body=_manifest(stored),
                                ContentType="application/json")
        self._remember(key, stored)
        return [f"s3://{self._bucket}/{s.key}" for s in stored]

    def stored(self, key: str) -> list[StoredFile]:
        with self._lock:
            if key in self._recent:
                return list(self._recent[key])
        try:
            answer = self._client.get_object(Bucket=self._bucket, Key=f"{key}/{MANIFEST}")
        except Exception as exc:  # noqa: BLE001 - only "absent" is an answer; anything else is an outage
            if _error_code(exc) in ("NoSuchKey", "404", "NotFound"):
                return []
            raise
        files = _from_manifest(answer["Body"].read())
        self._remember(key, files)
        return files

    def read(self, file: StoredFile) -> bytes:
        return self._client.get_object(Bucket=self._bucket, Key=file.key)["Body"].read()

    def url(self, file: StoredFile, ttl_s: int) -> str:
        return self._client.generate_presigned_url(
            "get_object", Params={"Bucket": self._bucket, "Key": file.key}, ExpiresIn=int(ttl_s))

    def delete(self, key: str) -> int:
        with self._lock:
            self._recent.pop(key, None)
        # The manifest goes first: from then on nobody reads the prefix as complete.
        self._client.delete_object(Bucket=self._bucket, Key=f"{key}/{MANIFEST}")
        deleted = 0
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Bucket": self._bucket, "Prefix": f"{key}/"}
            if token:
                kwargs["ContinuationToken"] = token
            page = self._client.list_objects_v2(**kwargs)
            keys = [o["Key"] for o in page.get("Contents", [])]
            if keys:
                self._client.delete_objects(Bucket=self._bucket, Delete={"Objects": [{"Key": k} for k in keys], "Quiet": True})
                deleted += sum(1 for k in keys if not k.endswith(f"/{MANIFEST}"))
            if not page.get("IsTruncated"):
                return deleted
            token = page.get("NextContinuationToken")

    def _remember(self, key: str, files: list[StoredFile]) -> None:
        with self._lock:
            self._recent[key] = list(files)
            self._recent.move_to_end(key)
            while len(self._recent) > _RECENT_KEYS:
                self._recent.popitem(last=False)


class MemoryArtifacts:
    """``ArtifactStore`` in process memory (tests; the same contract as S3Artifacts)."""

    def __init__(self) -> None:
        self._objects: dict[str, tuple[bytes, StoredFile]] = {}
        self._manifests: dict[str, list[StoredFile]] = {}
        self._lock = threading.Lock()
        self.puts = 0

    def put(self, key: str, files: Sequence[ArtifactFile]) -> list[str]:
        stored = [_stored(key, f) for f in files]
        with self._lock:
            self.puts += 1
            for f, s in zip(files, stored):
                self._objects[s.key] = (bytes(f.content), s)
            self._manifests[key] = stored
        return [f"memory://{s.key}" for s in stored]

    def stored(self, key: str) -> list[StoredFile]:
        with self._lock:
            return list(self._manifests.get(key, []))

    def read(self, file: StoredFile) -> bytes:
        with self._lock:
            return self._objects[file.key][0]

    def url(self, file: StoredFile, ttl_s: int) -> str:
        return f"memory://{file.key}?ttl={int(ttl_s)}"

    def delete(self, key: str) -> int:
        with self._lock:
            self._manifests.pop(key, None)
            doomed = [k for k in self._objects if k.startswith(f"{key}/")]
            for k in doomed:
                del self._objects[k]
            return len(doomed)


class NoArtifacts:
    """No bucket configured: artifacts live only for the duration of the invocation.

    Nothing is kept, so nothing is ever found again (``stored`` is empty) and no file can be
    linked from a delivery."""

    def put(self, key: str, files: Sequence[ArtifactFile]) -> list[str]:
        return [f"memory://{key}/{f.name}" for f in files]

    def stored(self, key: str) -> list[StoredFile]:
        return []

    def read(self, file: StoredFile) -> bytes:
        raise KeyError(f"no artifact store is configured; {file.key} was not kept")

    def url(self, file: StoredFile, ttl_s: int) -> str:
        raise KeyError(f"no artifact store is configured; {file.key} has no URL")

    def delete(self, key: str) -> int:
        return 0
