"""An in-memory twin of the S3 low-level client: objects with content type, metadata, tags and
S3's SHA-256 checksum (a PUT whose ``ChecksumSHA256`` does not match its bytes is refused with
``BadDigest``, as S3 does; HEAD reports the checksum only with ``ChecksumMode=ENABLED``), prefix
listing with continuation, idempotent deletes, presigned URLs (which only name the object: the twin
serves no HTTP)."""

from __future__ import annotations

import base64
import hashlib
import io
import threading
from typing import Any
from urllib.parse import parse_qsl

from .errors import Exceptions, Meta, client_error


def _tags(tagging: str, operation: str) -> dict[str, str]:
    """S3's ``Tagging`` header: URL-encoded ``key=value`` pairs, at most 10, keys unique."""
    pairs = parse_qsl(tagging or "", keep_blank_values=True)
    keys = [k for k, _ in pairs]
    if len(pairs) > 10 or len(set(keys)) != len(keys) or any(not k or len(k) > 128 for k in keys):
        raise client_error("InvalidTag", "The TagSet is not valid.", operation, status=400)
    return dict(pairs)


class _Body(io.BytesIO):
    def read(self, amt: int | None = None) -> bytes:  # botocore's StreamingBody reads like this
        return super().read(-1 if amt is None else amt)

    def iter_chunks(self, chunk_size: int = 1024):
        while True:
            chunk = self.read(chunk_size)
            if not chunk:
                return
            yield chunk


class TwinS3:
    def __init__(self, *, region: str = "us-east-1") -> None:
        self._buckets: dict[str, dict[str, dict[str, Any]]] = {}
        self._config: dict[str, dict[str, Any]] = {}
        self._lock = threading.RLock()
        self.meta = Meta("s3", region)
        self.exceptions = Exceptions()
        self.calls: dict[str, int] = {}

    def _count(self, op: str) -> None:
        self.calls[op] = self.calls.get(op, 0) + 1

    def _bucket(self, name: str, operation: str) -> dict[str, dict[str, Any]]:
        b = self._buckets.get(name)
        if b is None:
            raise client_error("NoSuchBucket", "The specified bucket does not exist", operation, status=404)
        return b

    def create_bucket(self, **kw: Any) -> dict[str, Any]:
        with self._lock:
            if kw["Bucket"] in self._buckets:
                raise client_error("BucketAlreadyOwnedByYou", "Your previous request to create the named bucket succeeded",
                                   "CreateBucket", status=409)
            self._buckets[kw["Bucket"]] = {}
            self._config[kw["Bucket"]] = {}
            return {"Location": f"/{kw['Bucket']}"}

    def head_bucket(self, **kw: Any) -> dict[str, Any]:
        if kw["Bucket"] not in self._buckets:
            raise client_error("404", "Not Found", "HeadBucket", status=404)
        return {}

    def list_buckets(self, **kw: Any) -> dict[str, Any]:
        return {"Buckets": [{"Name": n} for n in sorted(self._buckets)]}

    def _configure(self, kind: str):
        def call(**kw: Any) -> dict[str, Any]:
            self._bucket(kw["Bucket"], kind)
            self._config[kw["Bucket"]][kind] = {k: v for k, v in kw.items() if k != "Bucket"}
            return {}
        return call

    def __getattr__(self, name: str) -> Any:
        # put_bucket_lifecycle_configuration, put_bucket_encryption, put_public_access_block, … are
        # recorded (provisioning applies them); they change nothing the engine reads.
        if name.startswith("put_bucket_") or name == "put_public_access_block":
            return self._configure(name)
        raise AttributeError(name)

    def put_object(self, **kw: Any) -> dict[str, Any]:
        self._count("PutObject")
        with self._lock:
            bucket = self._bucket(kw["Bucket"], "PutObject")
            body = kw.get("Body", b"")
            if hasattr(body, "read"):
                body = body.read()
            if isinstance(body, str):
                body = body.encode("utf-8")
            etag = '"' + hashlib.md5(body).hexdigest() + '"'
            checksum = base64.b64encode(hashlib.sha256(body).digest()).decode("ascii")
            if kw.get("ChecksumSHA256") is not None and kw["ChecksumSHA256"] != checksum:
                raise client_error("BadDigest", "The SHA256 you specified did not match the calculated checksum.",
                                   "PutObject", status=400)
            tags = _tags(kw.get("Tagging", ""), "PutObject")
            bucket[kw["Key"]] = {
                "Body": bytes(body),
                "ContentType": kw.get("ContentType", "binary/octet-stream"),
                "Metadata": dict(kw.get("Metadata") or {}),
                "ETag": etag,
                "Tags": tags,
                # S3 keeps the checksum it was asked to compute or verify, none otherwise.
                "ChecksumSHA256": checksum if (kw.get("ChecksumSHA256") or kw.get("ChecksumAlgorithm") == "SHA256") else None,
            }
            return {"ETag": etag}

    def get_object_tagging(self, **kw: Any) -> dict[str, Any]:
        self._count("GetObjectTagging")
        with self._lock:
            obj = self._object(kw, "GetObjectTagging")
            return {"TagSet": [{"Key": k, "Value": v} for k, v in obj["Tags"].items()]}

    def _object(self, kw: dict[str, Any], operation: str) -> dict[str, Any]:
        obj = self._bucket(kw["Bucket"], operation).get(kw["Key"])
        if obj is None:
            if operation == "HeadObject":
                raise client_error("404", "Not Found", operation, status=404)
            raise client_error("NoSuchKey", "The specified key does not exist.", operation, status=404)
        return obj

    def get_object(self, **kw: Any) -> dict[str, Any]:
        self._count("GetObject")
        with self._lock:
            obj = self._object(kw, "GetObject")
            return {"Body": _Body(obj["Body"]), "ContentType": obj["ContentType"], "ContentLength": len(obj["Body"]),
                    "Metadata": dict(obj["Metadata"]), "ETag": obj["ETag"]}

    def head_object(self, **kw: Any) -> dict[str, Any]:
        self._count("HeadObject")
        with self._lock:
            obj = self._object(kw, "HeadObject")
            out = {"ContentType": obj["ContentType"], "ContentLength": len(obj["Body"]), "Metadata": dict(obj["Metadata"]),
                   "ETag": obj["ETag"]}
            if kw.get("ChecksumMode") == "ENABLED" and obj.get("ChecksumSHA256"):
                out["ChecksumSHA256"] = obj["ChecksumSHA256"]
            return out

    def delete_object(self, **kw: Any) -> dict[str, Any]:
        self._count("DeleteObject")
        with self._lock:
            self._bucket(kw["Bucket"], "DeleteObject").pop(kw["Key"], None)
            return {}

    def delete_objects(self, **kw: Any) -> dict[str, Any]:
        self._count("DeleteObjects")
        with self._lock:
            bucket = self._bucket(kw["Bucket"], "DeleteObjects")
            deleted = []
            for o in kw["Delete"]["Objects"]:
                bucket.pop(o["Key"], None)
                deleted.append({"Key": o["Key"]})
            return {"Deleted": deleted}

    def list_objects_v2(self, **kw: Any) -> dict[str, Any]:
        self._count("ListObjectsV2")
        with self._lock:
            bucket = self._bucket(kw["Bucket"], "ListObjectsV2")
            prefix = kw.get("Prefix", "")
            keys = sorted(k for k in bucket if k.startswith(prefix))
            start = kw.get("ContinuationToken") or kw.get("StartAfter")
            if start:
                keys = [k for k in keys if k > start]
            limit = int(kw.get("MaxKeys", 1000))
            page, more = keys[:limit], len(keys) > limit
            out: dict[str, Any] = {"KeyCount": len(page), "IsTruncated": more, "Prefix": prefix}
            if page:
                out["Contents"] = [{"Key": k, "Size": len(bucket[k]["Body"]), "ETag": bucket[k]["ETag"]} for k in page]
            if more:
                out["NextContinuationToken"] = page[-1]
            return out

    def generate_presigned_url(self, ClientMethod: str, Params: dict[str, Any] | None = None, ExpiresIn: int = 3600,
                               HttpMethod: str | None = None) -> str:
        params = Params or {}
        signature = hashlib.sha256(f"{params.get('Bucket')}/{params.get('Key')}/{ExpiresIn}".encode()).hexdigest()
        return (f"https://{params.get('Bucket')}.s3.twin.local/{params.get('Key')}?X-Amz-Algorithm=AWS4-HMAC-SHA256"
                f"&X-Amz-Expires={int(ExpiresIn)}&X-Amz-Signature={signature}")
