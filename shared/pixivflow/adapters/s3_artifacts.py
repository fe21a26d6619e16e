"""Artifact stores: S3 (when ARTIFACT_BUCKET is set), an in-memory one for tests, and none.

Layout on S3: one prefix per bound work, ``<slotId>/<targetId>/<workId>``, given by
the execution service, so a key is stable per (slot, target, work, page):

    <prefix>/<file name>        one object per file: its bytes, ``Content-Type``, the metadata
                                ``sha256`` / ``size`` / ``role`` / ``width`` / ``height`` / ``meta``
                                (x-amz-meta-*), S3's own ``x-amz-checksum-sha256`` of the bytes, and
                                the tag ``retention=<class>`` its lifecycle rule expires it by

One S3 PUT per stored file: there is no manifest object. The stored files' keys,
sizes and checksums are recorded in the ledger, in the delivery intent the execution service
writes once the work is complete (files first, then the intent), and every reader
(delivery, the route uploads, deleteAfterDelivery) takes them from there. A run that died after
storing some files and before its intent finds them by listing the work's prefix
(``partial``: one LIST, one HEAD per file, only when a bound work is resumed) and re-uses each
object whose checksum holds (``_verified``), so the retry PUTs only what is missing.

Works of any size: ``put_stream`` stores one file as it arrives from the source, in
one PUT when it fits ``PART_BYTES``, else as a multipart upload of ``PART_BYTES`` parts, so memory
holds at most about one part whatever the file's size; a multipart object's ``sha256``, known only
at its end, is set by copying it onto itself (so an upload that died before the copy carries no
``sha256`` and is never re-used).

Retention: S3 lifecycle rules cannot follow a per-config day count, so every object is
tagged with one of a few fixed classes (``RETENTION_CLASSES``), each with one rule in template.yaml;
PixivFlow's ``storage.cacheRetentionDays`` picks the smallest class that keeps a file at least that
long (config.runtime.retention_class).
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from typing import Any, Iterable, Sequence
from urllib.parse import urlencode

from ..config.runtime import DEFAULT_RETENTION_CLASS
from ..domain.assets import file_key
from ..domain.work import ArtifactFile, StoredFile

PART_BYTES = 8 * 1024 * 1024  # one S3 part; a file up to this size is ONE PutObject
HEAD_BYTES = 64 * 1024  # what is read before a file is named (its type and size in pixels)
_META_LIMIT = 1500  # S3 user metadata is capped at 2 KB in all
_DELETE_BATCH = 1000  # DeleteObjects takes at most 1,000 keys


def _stored(prefix: str, f: ArtifactFile) -> StoredFile:
    return StoredFile(
        key=file_key(prefix, f.name), name=f.name, content_type=f.content_type, size=len(f.content),
        sha256=hashlib.sha256(f.content).hexdigest(), role=f.role, width=f.width, height=f.height,
        meta=dict(f.meta or {}),
    )


def _metadata(s: StoredFile) -> dict[str, str]:
    metadata = {"sha256": s.sha256, "size": str(s.size), "role": s.role}
    if s.width is not None:
        metadata["width"] = str(s.width)
    if s.height is not None:
        metadata["height"] = str(s.height)
    extra = json.dumps(dict(s.meta), separators=(",", ":"), ensure_ascii=True)
    if len(extra) <= _META_LIMIT:  # what a resumed run needs of a file (its page, its URL)
        metadata["meta"] = extra
    return metadata


def _checksum(sha256_hex: str) -> str:
    """S3's ``x-amz-checksum-sha256`` form of a hex SHA-256: base64 of the 32 bytes."""
    return base64.b64encode(bytes.fromhex(sha256_hex)).decode("ascii")


def _verified(key: str, head: dict[str, Any]) -> StoredFile | None:
    """The stored file a retry may re-use instead of a PUT, or None to store it again.

    Re-used only when the object carries the ``sha256`` this store wrote WITH its bytes (a
    multipart upload gets it only after its completion) and S3's own SHA-256 of the bytes (kept
    since the PUT or the checksum copy) is that sha256: an object another writer left, or one
    whose upload never finished, is stored again."""
    metadata = head.get("Metadata") or {}
    sha256 = metadata.get("sha256") or ""
    size = int(head.get("ContentLength") or 0)
    if len(sha256) != 64 or head.get("ChecksumSHA256") != _checksum(sha256):
        return None
    try:
        meta = json.loads(metadata.get("meta") or "{}")
    except ValueError:
        meta = {}
    return StoredFile(key=key, name=key.rsplit("/", 1)[1], content_type=head.get("ContentType") or "application/octet-stream",
                      size=size, sha256=sha256, role=metadata.get("role") or "original",
                      width=int(metadata["width"]) if metadata.get("width") else None,
                      height=int(metadata["height"]) if metadata.get("height") else None, meta=meta)


def stem_of(name: str) -> str:
    """The part of a stored name known before its bytes are (a plan's ``FileDownload.stem``): the
    name without the extension its first bytes chose (``95001_p0.jpg`` -> ``95001_p0``), else the
    whole name, so a novel's ``93001.txt`` and ``93001.md`` stay two files."""
    # Imported here: the pixiv package loads httpx and the whole App API client, which a function
    # that only stores or reads a catalogue work never needs (a faster cold start).
    from .pixiv.media import SNIFFED_EXTENSIONS

    base, dot, ext = name.rpartition(".")
    return base if dot and f".{ext}".lower() in SNIFFED_EXTENSIONS else name


def _reusable(have: dict[str, StoredFile], s: StoredFile) -> bool:
    """A file in hand (``s``) need not be PUT again when the same key holds the same checksum."""
    old = have.get(stem_of(s.name))
    return old is not None and old.key == s.key and old.sha256 == s.sha256 and old.size == s.size


class _Buffer:
    """The bytes of one file not yet sent, and the most it ever held (the memory bound)."""

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


class S3Artifacts:
    """``ArtifactStore`` on one bucket (encrypted, and expired by the lifecycle rule of each
    object's retention tag, template.yaml)."""

    def __init__(self, client: Any, bucket: str, *, retention: str = DEFAULT_RETENTION_CLASS) -> None:
        self._client = client
        self._bucket = bucket
        self._tagging = urlencode({"retention": retention})
        self.peak_buffer = 0  # the most bytes one put_stream held at once

    @property
    def bucket(self) -> str:
        return self._bucket

    def put(self, key: str, files: Sequence[ArtifactFile], *, reuse: bool = False) -> list[StoredFile]:
        """One PUT per file; with ``reuse`` (a resumed work) none for a file already stored whole."""
        have = self.partial(key) if reuse else {}
        stored = [_stored(key, f) for f in files]
        for f, s in zip(files, stored):
            if not _reusable(have, s):
                self._put_object(s, f.content)
        return stored

    def _put_object(self, s: StoredFile, body: bytes) -> None:
        # ChecksumAlgorithm SHA256: the client sends the bytes' SHA-256, S3 refuses the PUT (BadDigest)
        # unless the bytes it got match it, and keeps it for HEAD: what _verified compares.
        self._client.put_object(Bucket=self._bucket, Key=s.key, Body=body, ContentType=s.content_type,
                                Metadata=_metadata(s), ChecksumAlgorithm="SHA256", Tagging=self._tagging)

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
                            Bucket=bucket, Key=file_key(key, described[0]), ContentType=described[1],
                            Tagging=self._tagging)["UploadId"]
                    number = len(parts) + 1
                    answer = self._client.upload_part(Bucket=bucket, Key=file_key(key, described[0]), UploadId=upload,
                                                      PartNumber=number, Body=buffer.take(PART_BYTES))
                    parts.append({"PartNumber": number, "ETag": answer["ETag"]})
            described = _describe_once(buffer, described, describe, header_type)
            name, content_type, width, height = described
            stored = StoredFile(key=file_key(key, name), name=name, content_type=content_type, size=size,
                                sha256=digest.hexdigest(), role=role, width=width, height=height, meta=dict(meta or {}))
            if upload is None:
                self._put_object(stored, buffer.take(len(buffer.data)))
            else:
                if buffer.data:
                    answer = self._client.upload_part(Bucket=bucket, Key=stored.key, UploadId=upload,
                                                      PartNumber=len(parts) + 1, Body=buffer.take(len(buffer.data)))
                    parts.append({"PartNumber": len(parts) + 1, "ETag": answer["ETag"]})
                self._client.complete_multipart_upload(Bucket=bucket, Key=stored.key, UploadId=upload,
                                                       MultipartUpload={"Parts": parts})
                upload = None
                # The checksum is known only now: set it (with the rest) by copying the object onto
                # itself; S3 computes the whole object's SHA-256 on the copy. The tags are copied.
                self._client.copy_object(Bucket=bucket, Key=stored.key, CopySource={"Bucket": bucket, "Key": stored.key},
                                         MetadataDirective="REPLACE", ContentType=content_type, Metadata=_metadata(stored),
                                         ChecksumAlgorithm="SHA256")
        except BaseException:
            if upload is not None and described is not None:
                try:
                    self._client.abort_multipart_upload(Bucket=bucket, Key=file_key(key, described[0]), UploadId=upload)
                except Exception:  # noqa: BLE001 - the bucket's lifecycle rule aborts what is left
                    pass
            raise
        finally:
            self.peak_buffer = max(self.peak_buffer, buffer.peak)
        return stored

    def _keys(self, key: str) -> Iterable[str]:
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Bucket": self._bucket, "Prefix": f"{key}/"}
            if token:
                kwargs["ContinuationToken"] = token
            page = self._client.list_objects_v2(**kwargs)
            for o in page.get("Contents", []):
                yield o["Key"]
            if not page.get("IsTruncated"):
                return
            token = page.get("NextContinuationToken")

    def partial(self, key: str) -> dict[str, StoredFile]:
        """The files a run stored whole under ``key`` before it stopped, by name without extension."""
        found: dict[str, StoredFile] = {}
        for k in self._keys(key):
            stored = _verified(k, self._client.head_object(Bucket=self._bucket, Key=k, ChecksumMode="ENABLED"))
            if stored is not None:
                found[stem_of(stored.name)] = stored
        return found

    def read(self, file: StoredFile) -> bytes:
        return self._client.get_object(Bucket=self._bucket, Key=file.key)["Body"].read()

    def url(self, file: StoredFile, ttl_s: int) -> str:
        return self._client.generate_presigned_url(
            "get_object", Params={"Bucket": self._bucket, "Key": file.key}, ExpiresIn=int(ttl_s))

    def preview_url(self, key: str, expires_s: int) -> str | None:
        """The work's first ``preview`` object, presigned (the operator page's thumbnail);
        None when the work kept no preview. Read from the bucket itself -- one LIST of the prefix,
        a HEAD per object until the first whose ``role`` metadata says preview (a page's preview is
        named after it, so it follows its original in key order) -- not from any index of the
        work's files: what the bucket still holds after ``deleteAfterDelivery`` is what can be shown."""
        listed = self._client.list_objects_v2(Bucket=self._bucket, Prefix=f"{key}/", MaxKeys=100).get("Contents", [])
        for entry in sorted(listed, key=lambda o: o["Key"]):
            head = self._client.head_object(Bucket=self._bucket, Key=entry["Key"])
            if (head.get("Metadata") or {}).get("role") == "preview":
                return self._client.generate_presigned_url(
                    "get_object", Params={"Bucket": self._bucket, "Key": entry["Key"]}, ExpiresIn=int(expires_s))
        return None

    def delete(self, key: str, files: Sequence[StoredFile] | None = None) -> int:
        """Delete ``files`` (their keys, no LIST), or every file under ``key``; idempotent."""
        keys = [f.key for f in files] if files is not None else list(self._keys(key))
        for at in range(0, len(keys), _DELETE_BATCH):
            batch = keys[at:at + _DELETE_BATCH]
            self._client.delete_objects(Bucket=self._bucket, Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True})
        return len(keys)


class MemoryArtifacts:
    """``ArtifactStore`` in process memory (tests; the same contract as S3Artifacts)."""

    def __init__(self) -> None:
        self._objects: dict[str, tuple[bytes, StoredFile]] = {}
        self._lock = threading.Lock()
        self.puts = 0

    def put(self, key: str, files: Sequence[ArtifactFile], *, reuse: bool = False) -> list[StoredFile]:
        have = self.partial(key) if reuse else {}
        stored = [_stored(key, f) for f in files]
        with self._lock:
            for f, s in zip(files, stored):
                if not _reusable(have, s):
                    self.puts += 1
                    self._objects[s.key] = (bytes(f.content), s)
        return stored

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

    def read(self, file: StoredFile) -> bytes:
        with self._lock:
            return self._objects[file.key][0]

    def url(self, file: StoredFile, ttl_s: int) -> str:
        return f"memory://{file.key}?ttl={int(ttl_s)}"

    def preview_url(self, key: str, expires_s: int) -> str | None:
        return None  # memory:// is nothing a browser can fetch: the page shows no thumbnail

    def delete(self, key: str, files: Sequence[StoredFile] | None = None) -> int:
        with self._lock:
            doomed = [f.key for f in files] if files is not None else [k for k in self._objects if k.startswith(f"{key}/")]
            for k in doomed:
                self._objects.pop(k, None)
            return len(doomed)
