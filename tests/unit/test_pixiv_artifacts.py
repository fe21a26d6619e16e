"""Artifact stores (issue 10): S3 on moto (the template's own bucket), the in-memory twin, and
none; plus the protocol Assets a delivery payload carries."""

from __future__ import annotations

import hashlib
import json
from urllib.parse import parse_qs, urlsplit

import boto3
import pytest
from botocore.config import Config
from moto import mock_aws

from pixivflow.adapters.s3_artifacts import MANIFEST, MemoryArtifacts, NoArtifacts, S3Artifacts
from pixivflow.domain.assets import assets_for
from pixivflow.local.provision import provision
from pixivflow.ports import ArtifactFile, StoredFile

PREFIX = "morning-tokyo@2026-12-01T0800/cats/91001"
FILES = [
    ArtifactFile("91001_p0.png", b"\x89PNG-page-0", "image/png", role="original", width=8, height=6, meta={"page": 0}),
    ArtifactFile("91001_p1.png", b"\x89PNG-page-1", "image/png", role="original", meta={"page": 1}),
    ArtifactFile("92002_ugoira.zip", b"PK\x03\x04zip", "application/zip", role="archive", width=600, height=600,
                 meta={"frames": [{"file": f"{n:06d}.jpg", "delay": 40 + n} for n in range(200)]}),
]


@pytest.fixture
def s3():
    with mock_aws():
        bucket = provision()["ARTIFACT_BUCKET"]
        client = boto3.client("s3", config=Config(signature_version="s3v4"))
        yield S3Artifacts(client, bucket), client, bucket


def expected(prefix: str = PREFIX) -> list[StoredFile]:
    return [StoredFile(key=f"{prefix}/{f.name}", name=f.name, content_type=f.content_type, size=len(f.content),
                       sha256=hashlib.sha256(f.content).hexdigest(), role=f.role, width=f.width, height=f.height,
                       meta=f.meta) for f in FILES]


def test_s3_put_writes_each_file_with_type_and_sha256_then_the_manifest(s3):
    store, client, bucket = s3
    assert store.stored(PREFIX) == []
    locations = store.put(PREFIX, FILES)
    assert locations == [f"s3://{bucket}/{PREFIX}/{f.name}" for f in FILES]
    head = client.head_object(Bucket=bucket, Key=f"{PREFIX}/91001_p0.png")
    assert head["ContentType"] == "image/png" and head["ContentLength"] == len(FILES[0].content)
    assert head["Metadata"] == {"sha256": hashlib.sha256(FILES[0].content).hexdigest(), "role": "original",
                                "width": "8", "height": "6"}
    assert client.head_object(Bucket=bucket, Key=f"{PREFIX}/91001_p1.png")["Metadata"] == {
        "sha256": hashlib.sha256(FILES[1].content).hexdigest(), "role": "original"}
    # the ugoira's 200 frame delays do not fit S3 metadata (2 KB): they live in the manifest
    manifest = json.loads(client.get_object(Bucket=bucket, Key=f"{PREFIX}/{MANIFEST}")["Body"].read())
    assert len(manifest["files"][2]["meta"]["frames"]) == 200
    # a fresh store (another container) reads the same answer from S3
    again = S3Artifacts(client, bucket)
    assert again.stored(PREFIX) == expected()
    assert [again.read(f) for f in again.stored(PREFIX)] == [f.content for f in FILES]


def test_s3_a_put_that_died_before_its_manifest_is_not_complete(s3):
    store, client, bucket = s3
    client.put_object(Bucket=bucket, Key=f"{PREFIX}/91001_p0.png", Body=b"half", ContentType="image/png")
    assert S3Artifacts(client, bucket).stored(PREFIX) == []


def test_s3_presigned_url_is_sigv4_with_the_asked_lifetime(s3):
    store, _, bucket = s3
    store.put(PREFIX, FILES[:1])
    [stored] = store.stored(PREFIX)
    url = urlsplit(store.url(stored, 3600))
    query = parse_qs(url.query)
    assert query["X-Amz-Expires"] == ["3600"] and query["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"]
    assert url.path.endswith("/91001_p0.png") and bucket in url.netloc + url.path


def test_s3_delete_removes_every_file_and_the_manifest(s3):
    store, client, bucket = s3
    store.put(PREFIX, FILES)
    store.put(f"{PREFIX}-other", FILES[:1])
    assert store.delete(PREFIX) == 3
    assert store.stored(PREFIX) == [] and S3Artifacts(client, bucket).stored(PREFIX) == []
    left = [o["Key"] for o in client.list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert sorted(left) == [f"{PREFIX}-other/91001_p0.png", f"{PREFIX}-other/{MANIFEST}"]
    assert store.delete(PREFIX) == 0  # idempotent


def test_s3_a_store_outage_is_not_read_as_nothing_stored(s3):
    from botocore.exceptions import ClientError

    _, client, bucket = s3

    class Broken:
        def get_object(self, **kwargs):
            raise ClientError({"Error": {"Code": "SlowDown", "Message": "slow"}}, "GetObject")

    with pytest.raises(ClientError):
        S3Artifacts(Broken(), bucket).stored(PREFIX)


def test_memory_artifacts_keep_the_same_contract():
    store = MemoryArtifacts()
    assert store.stored(PREFIX) == []
    store.put(PREFIX, FILES)
    assert store.stored(PREFIX) == expected()
    assert store.read(store.stored(PREFIX)[1]) == FILES[1].content
    assert store.url(store.stored(PREFIX)[0], 60) == f"memory://{PREFIX}/91001_p0.png?ttl=60"
    assert store.delete(PREFIX) == 3 and store.stored(PREFIX) == []


def test_no_artifacts_keeps_nothing():
    store = NoArtifacts()
    assert store.put(PREFIX, FILES) == [f"memory://{PREFIX}/{f.name}" for f in FILES]
    assert store.stored(PREFIX) == [] and store.delete(PREFIX) == 0
    with pytest.raises(KeyError):
        store.read(expected()[0])


def test_assets_are_protocol_assets_with_url_locators():
    cover = StoredFile(key="k/1_cover.jpg", name="1_cover.jpg", content_type="image/jpeg", size=5, sha256="ab",
                       role="cover", width=240, height=320)
    text = StoredFile(key="k/1.txt", name="1.txt", content_type="text/plain; charset=utf-8", size=9, sha256="cd",
                      role="text", meta={"pages": 2})
    assets = assets_for([text, cover], lambda f: f"https://bucket.example/{f.key}?sig=1")
    assert assets == [
        {"asset_id": "k/1.txt", "type": "novel", "role": "primary", "source": "pixiv", "quality": "unknown",
         "locator": {"kind": "url", "value": "https://bucket.example/k/1.txt?sig=1", "url": "https://bucket.example/k/1.txt?sig=1"},
         "name": "1.txt", "bytes": 9, "mime": "text/plain; charset=utf-8", "hash": "sha256:cd", "metadata": {"pages": 2}},
        {"asset_id": "k/1_cover.jpg", "type": "cover", "role": "cover", "source": "pixiv", "quality": "unknown",
         "locator": {"kind": "url", "value": "https://bucket.example/k/1_cover.jpg?sig=1",
                     "url": "https://bucket.example/k/1_cover.jpg?sig=1"},
         "name": "1_cover.jpg", "bytes": 5, "mime": "image/jpeg", "hash": "sha256:ab", "width": 240, "height": 320},
    ]


def test_assets_validate_against_the_protocol_schema():
    import jsonschema

    from pathlib import Path

    # tests/contract/protocol_asset.schema.json is the kit's Asset/Locator definition, copied.
    schema = json.loads((Path(__file__).resolve().parents[1] / "contract" / "protocol_asset.schema.json").read_text())
    for asset in assets_for(expected(), lambda f: f"https://b.example/{f.key}"):
        jsonschema.validate(asset, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**assets_for(expected(), lambda f: "u")[0], "role": "original"}, schema)


def test_assets_stay_within_a_byte_budget_and_say_how_many_were_left_out():
    files = [StoredFile(key=f"k/{n}.png", name=f"{n}.png", content_type="image/png", size=1, sha256="0" * 64)
             for n in range(200)]
    assets = assets_for(files, lambda f: "https://b.example/" + "x" * 900, budget_chars=50_000)
    assert 10 < len(assets) < 200
    assert assets[-1]["metadata"]["omitted"] == 200 - len(assets)
    assert len(json.dumps(assets)) <= 50_000


# -- issue 24: streamed, page-by-page storage ---------------------------------------------------


def _chunks(total: int, piece: int = 1024 * 1024):
    block = bytes(range(256)) * (piece // 256)
    sent = 0
    while sent < total:
        out = block[: min(piece, total - sent)]
        sent += len(out)
        yield out


def _describe(head: bytes, header_type: str):
    return "7_p0.bin", header_type or "application/octet-stream", None, None


class CountingS3:
    def __init__(self, client):
        self._client = client
        self.calls: list[str] = []

    def __getattr__(self, name):
        self.calls.append(name)
        return getattr(self._client, name)


def test_a_file_up_to_one_part_is_one_put_and_a_bigger_one_a_bounded_multipart_upload(s3):
    from pixivflow.adapters.s3_artifacts import PART_BYTES

    _, client, bucket = s3
    counting = CountingS3(client)
    store = S3Artifacts(counting, bucket)
    small = store.put_stream(PREFIX, _chunks(PART_BYTES), _describe, header_type="image/jpeg", meta={"page": 0})
    assert counting.calls == ["put_object"]  # one PUT below the multipart threshold
    counting.calls.clear()
    total = 2 * PART_BYTES + 12_345
    big = store.put_stream(PREFIX + "-big", _chunks(total), _describe, header_type="image/jpeg", meta={"page": 0})
    assert counting.calls == ["create_multipart_upload", "upload_part", "upload_part", "upload_part",
                              "complete_multipart_upload", "copy_object"]
    assert store.peak_buffer <= PART_BYTES + 1024 * 1024  # never more than a part and a chunk in memory
    expected = hashlib.sha256(b"".join(_chunks(total))).hexdigest()
    head = client.head_object(Bucket=bucket, Key=big.key)
    assert (head["ContentLength"], head["Metadata"]["sha256"], big.sha256, big.size) == (total, expected, expected, total)
    assert small.size == PART_BYTES and client.head_object(Bucket=bucket, Key=small.key)["Metadata"]["sha256"] == small.sha256
    # Not committed: stored() sees nothing; partial() finds what a stopped run left, to resume after it.
    assert S3Artifacts(client, bucket).stored(PREFIX) == []
    again = S3Artifacts(client, bucket).partial(PREFIX)
    assert again == {"7_p0": small}
    store.commit(PREFIX, [small])
    assert S3Artifacts(client, bucket).stored(PREFIX) == [small]


def test_a_stream_cut_off_midway_aborts_its_multipart_upload(s3):
    from pixivflow.adapters.s3_artifacts import PART_BYTES

    _, client, bucket = s3
    store = S3Artifacts(client, bucket)

    def cut():
        yield from _chunks(PART_BYTES + 2 * 1024 * 1024)
        raise ConnectionError("peer went away")

    with pytest.raises(ConnectionError):
        store.put_stream(PREFIX, cut(), _describe, header_type="image/jpeg")
    assert client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    assert store.partial(PREFIX) == {}
