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

Works of any size (issue 24): ``put_stream`` stores one file as it arrives from the source, in
one PUT when it fits ``PART_BYTES``, else as a multipart upload of ``PART_BYTES`` parts, so memory
holds at most about one part whatever the file's size; a multipart object's ``sha256``, known only
at its end, is set by copying it onto itself. A work is stored file by file and committed with
``commit`` (the manifest); ``partial(prefix)`` lists what a run that stopped midway had stored
(one LIST, one HEAD per file: only when a bound work is resumed), so the next run starts at the
first missing file.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from typing import Any, Sequence

from ..ports import ArtifactFile, StoredFile

MANIFEST = "_manifest.json"
PART_BYTES = 8 * 1024 * 1024  # one S3 part; a file up to this size is ONE PutObject
HEAD_BYTES = 64 * 1024  # what is read before a file is named (its type and size in pixels)
_META_LIMIT = 1500  # S3 user metadata is capped at 2 KB in all
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


def _metadata(s: StoredFile, *, with_meta: bool = True) -> dict[str, str]:
    metadata = {"sha256": s.sha256, "role": s.role}
    if s.width is not None:
        metadata["width"] = str(s.width)
    if s.height is not None:
        metadata["height"] = str(s.height)
    extra = json.dumps(dict(s.meta), separators=(",", ":"), ensure_ascii=True)
    if with_meta and len(extra) <= _META_LIMIT:  # what a resumed run needs of a file (its page, its URL)
        metadata["meta"] = extra
    return metadata


def _from_head(key: str, head: dict[str, Any]) -> StoredFile | None:
    metadata = head.get("Metadata") or {}
    if not metadata.get("sha256"):
        return None  # not written by put_stream (or its checksum copy never happened): fetch it again
    try:
        meta = json.loads(metadata.get("meta") or "{}")
    except ValueError:
        meta = {}
    return StoredFile(key=key, name=key.rsplit("/", 1)[1], content_type=head.get("ContentType") or "application/octet-stream",
                      size=int(head.get("ContentLength") or 0), sha256=metadata["sha256"], role=metadata.get("role") or "original",
                      width=int(metadata["width"]) if metadata.get("width") else None,
                      height=int(metadata["height"]) if metadata.get("height") else None, meta=meta)


def stem_of(name: str) -> str:
    return name.rsplit(".", 1)[0]


class _Buffer:
    """The bytes of one file not yet sent, and the most it ever held (issue 24's memory bound)."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.peak = 0

    def add(self, chunk: bytes) -> None:
        self.data += chunk
        self.peak = max(self.peak, len(self.data))

    def take(self, n: int) -> bytes:
        out = bytes(self.data[:n])
        del self.data[:n]
        return out


def _describe_once(buffer: _Buffer, described: Any, describe: Any, header_type: str) -> Any:
    return described if described is not None else describe(bytes(buffer.data[:HEAD_BYTES]), header_type)


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
        self.peak_buffer = 0  # the most bytes one put_stream held at once (issue 24)

    @property
    def bucket(self) -> str:
        return self._bucket

    def put(self, key: str, files: Sequence[ArtifactFile]) -> list[str]:
        stored = [_stored(key, f) for f in files]
        for f, s in zip(files, stored):
            self._client.put_object(Bucket=self._bucket, Key=s.key, Body=f.content, ContentType=f.content_type,
                                    Metadata=_metadata(s, with_meta=False))
        self._client.put_object(Bucket=self._bucket, Key=f"{key}/{MANIFEST}", Body=_manifest(stored),
                                ContentType="application/json")
        self._remember(key, stored)
        return [f"s3://{self._bucket}/{s.key}" for s in stored]

    def put_stream(self, key: str, chunks: Any, describe: Any, *, header_type: str = "", role: str = "original",
                   meta: Any = None) -> StoredFile:
        """Store one file from ``chunks``; ``describe(head, header_type)`` names it from its first
        bytes: ``(name, content_type, width, height)``. Returns what was stored."""
        digest, buffer, size = hashlib.sha256(), _Buffer(), 0
        described, upload = None, None
        parts: list[dict[str, Any]] = []
        bucket = self._bucket
        try:
            for chunk in chunks:
                digest.update(chunk)
                size += len(chunk)
                buffer.add(chunk)
                while len(buffer.data) > PART_BYTES:  # more than one part: this file is a multipart upload
                    described = _describe_once(buffer, described, describe, header_type)
                    if upload is None:
                        upload = self._client.create_multipart_upload(
                            Bucket=bucket, Key=f"{key}/{described[0]}", ContentType=described[1])["UploadId"]
                    number = len(parts) + 1
                    answer = self._client.upload_part(Bucket=bucket, Key=f"{key}/{described[0]}", UploadId=upload,
                                                      PartNumber=number, Body=buffer.take(PART_BYTES))
                    parts.append({"PartNumber": number, "ETag": answer["ETag"]})
            described = _describe_once(buffer, described, describe, header_type)
            name, content_type, width, height = described
            stored = StoredFile(key=f"{key}/{name}", name=name, content_type=content_type, size=size,
                                sha256=digest.hexdigest(), role=role, width=width, height=height, meta=dict(meta or {}))
            if upload is None:
                self._client.put_object(Bucket=bucket, Key=stored.key, Body=buffer.take(len(buffer.data)),
                                        ContentType=content_type, Metadata=_metadata(stored))
            else:
                if buffer.data:
                    answer = self._client.upload_part(Bucket=bucket, Key=stored.key, UploadId=upload,
                                                      PartNumber=len(parts) + 1, Body=buffer.take(len(buffer.data)))
                    parts.append({"PartNumber": len(parts) + 1, "ETag": answer["ETag"]})
                self._client.complete_multipart_upload(Bucket=bucket, Key=stored.key, UploadId=upload,
                                                       MultipartUpload={"Parts": parts})
                upload = None
                # The checksum is known only now: set it (with the rest) by copying the object onto itself.
                self._client.copy_object(Bucket=bucket, Key=stored.key, CopySource={"Bucket": bucket, "Key": stored.key},
                                         MetadataDirective="REPLACE", ContentType=content_type, Metadata=_metadata(stored))
        except BaseException:
            if upload is not None and described is not None:
                try:
                    self._client.abort_multipart_upload(Bucket=bucket, Key=f"{key}/{described[0]}", UploadId=upload)
                except Exception:  # noqa: BLE001 - the bucket's lifecycle rule aborts what is left
                    pass
            raise
        finally:
            self.peak_buffer = max(self.peak_buffer, buffer.peak)
        return stored

    def partial(self, key: str) -> dict[str, StoredFile]:
        """The files a run stored under ``key`` before it stopped, by name without extension."""
        found: dict[str, StoredFile] = {}
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Bucket": self._bucket, "Prefix": f"{key}/"}
            if token:
                kwargs["ContinuationToken"] = token
            page = self._client.list_objects_v2(**kwargs)
            for o in page.get("Contents", []):
                if o["Key"].endswith(f"/{MANIFEST}"):
                    continue
                stored = _from_head(o["Key"], self._client.head_object(Bucket=self._bucket, Key=o["Key"]))
                if stored is not None:
                    found[stem_of(stored.name)] = stored
            if not page.get("IsTruncated"):
                return found
            token = page.get("NextContinuationToken")

    def commit(self, key: str, files: Sequence[StoredFile]) -> None:
        """The work is complete: its manifest, written last."""
        self._client.put_object(Bucket=self._bucket, Key=f"{key}/{MANIFEST}", Body=_manifest(files),
                                ContentType="application/json")
        self._remember(key, list(files))

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

    def put_stream(self, key: str, chunks: Any, describe: Any, *, header_type: str = "", role: str = "original",
                   meta: Any = None) -> StoredFile:
        content = b"".join(chunks)  # a test store: the S3 one is the bounded one
        name, content_type, width, height = describe(content[:HEAD_BYTES], header_type)
        stored = _stored(key, ArtifactFile(name=name, content=content, content_type=content_type, role=role,
                                           width=width, height=height, meta=dict(meta or {})))
        with self._lock:
            self.puts += 1
            self._objects[stored.key] = (content, stored)
        return stored

    def partial(self, key: str) -> dict[str, StoredFile]:
        with self._lock:
            return {stem_of(s.name): s for k, (_, s) in self._objects.items() if k.startswith(f"{key}/")}

    def commit(self, key: str, files: Sequence[StoredFile]) -> None:
        with self._lock:
            self._manifests[key] = list(files)

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
