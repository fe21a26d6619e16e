"""Artifact store on S3 (used when ARTIFACT_BUCKET is set), and in memory when no bucket is.

One object per file under ``<slotId>/<targetId>/<workId>/<name>`` (the key prefix the execution
service chooses). Each object carries what a route needs to upload or link it without reading
it first: its content type, and in user metadata its role and SHA-256. ``stored`` lists the
prefix and heads each object; files come back in page order (names compared with their numbers
as numbers, so ``p10`` follows ``p9``).
"""

from __future__ import annotations

import hashlib
import re
import threading
from typing import Any, Iterator, Sequence

from ..ports import ArtifactFile, StoredFile

CHUNK_BYTES = 1 << 20


def _natural(name: str) -> list[Any]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _prefix(key: str) -> str:
    return key.rstrip("/") + "/"


class S3Artifacts:
    def __init__(self, client: Any, bucket: str) -> None:
        self._client = client
        self._bucket = bucket

    def put(self, key: str, files: Sequence[ArtifactFile]) -> list[str]:
        locations = []
        for f in files:
            object_key = f"{_prefix(key)}{f.name}"
            meta = {"role": f.role, "sha256": hashlib.sha256(f.content).hexdigest()}
            if f.width is not None:
                meta["width"] = str(f.width)
            if f.height is not None:
                meta["height"] = str(f.height)
            self._client.put_object(Bucket=self._bucket, Key=object_key, Body=f.content, ContentType=f.content_type,
                                    Metadata=meta)
            locations.append(f"s3://{self._bucket}/{object_key}")
        return locations

    def _keys(self, key: str) -> list[tuple[str, int]]:
        found: list[tuple[str, int]] = []
        kwargs: dict[str, Any] = {"Bucket": self._bucket, "Prefix": _prefix(key)}
        while True:
            resp = self._client.list_objects_v2(**kwargs)
            found.extend((o["Key"], int(o.get("Size", 0))) for o in resp.get("Contents", []))
            if not resp.get("IsTruncated"):
                return found
            kwargs["ContinuationToken"] = resp["NextContinuationToken"]

    def stored(self, key: str) -> list[StoredFile]:
        files = []
        for object_key, size in self._keys(key):
            head = self._client.head_object(Bucket=self._bucket, Key=object_key)
            meta = {k.lower(): v for k, v in (head.get("Metadata") or {}).items()}
            files.append(StoredFile(
                key=object_key,
                name=object_key.rsplit("/", 1)[-1],
                content_type=head.get("ContentType") or "application/octet-stream",
                size=int(head.get("ContentLength", size)),
                sha256=meta.get("sha256", ""),
                role=meta.get("role", "original"),
                width=int(meta["width"]) if meta.get("width", "").isdigit() else None,
                height=int(meta["height"]) if meta.get("height", "").isdigit() else None,
            ))
        return sorted(files, key=lambda f: _natural(f.name))

    def read(self, file: StoredFile) -> bytes:
        return self._client.get_object(Bucket=self._bucket, Key=file.key)["Body"].read()

    def chunks(self, file: StoredFile, size: int = CHUNK_BYTES) -> Iterator[bytes]:
        """Stream one object (a multipart upload never holds more than a chunk of it)."""
        body = self._client.get_object(Bucket=self._bucket, Key=file.key)["Body"]
        try:
            yield from body.iter_chunks(size)
        finally:
            body.close()

    def url(self, file: StoredFile, ttl_s: int) -> str:
        return self._client.generate_presigned_url("get_object", Params={"Bucket": self._bucket, "Key": file.key},
                                                   ExpiresIn=int(ttl_s))

    def delete(self, key: str) -> int:
        keys = [k for k, _ in self._keys(key)]
        deleted = 0
        for start in range(0, len(keys), 1000):
            batch = keys[start : start + 1000]
            resp = self._client.delete_objects(Bucket=self._bucket,
                                               Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True})
            errors = resp.get("Errors") or []
            if errors:
                raise RuntimeError(f"S3 delete_objects failed for {len(errors)} object(s) under {key!r}: {errors[0].get('Code')}")
            deleted += len(batch)
        return deleted


class MemoryArtifacts:
    """No bucket configured: files live in this process only (local tooling, unit tests)."""

    def __init__(self) -> None:
        self._files: dict[str, dict[str, tuple[StoredFile, bytes]]] = {}
        self._lock = threading.Lock()

    def put(self, key: str, files: Sequence[ArtifactFile]) -> list[str]:
        with self._lock:
            slot = self._files.setdefault(_prefix(key), {})
            for f in files:
                object_key = f"{_prefix(key)}{f.name}"
                slot[f.name] = (StoredFile(key=object_key, name=f.name, content_type=f.content_type, size=len(f.content),
                                           sha256=hashlib.sha256(f.content).hexdigest(), role=f.role, width=f.width,
                                           height=f.height, meta=dict(f.meta)), bytes(f.content))
        return [f"memory://{_prefix(key)}{f.name}" for f in files]

    def stored(self, key: str) -> list[StoredFile]:
        with self._lock:
            files = [stored for stored, _ in self._files.get(_prefix(key), {}).values()]
        return sorted(files, key=lambda f: _natural(f.name))

    def read(self, file: StoredFile) -> bytes:
        prefix, _, name = file.key.rpartition("/")
        with self._lock:
            entry = self._files.get(prefix + "/", {}).get(name)
        if entry is None:
            raise FileNotFoundError(file.key)
        return entry[1]

    def url(self, file: StoredFile, ttl_s: int) -> str:
        return f"memory://{file.key}"

    def delete(self, key: str) -> int:
        with self._lock:
            return len(self._files.pop(_prefix(key), {}))


# The name the runtime used before the in-memory store could read its files back.
NoArtifacts = MemoryArtifacts
