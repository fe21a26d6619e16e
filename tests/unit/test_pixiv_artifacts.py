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

from pixivflow.adapters.s3_artifacts import MemoryArtifacts, S3Artifacts
from pixivflow.domain.assets import assets_for
from pixivflow.local.provision import provision
from pixivflow.domain.work import ArtifactFile, StoredFile

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


def _puts(client, bucket):
    """Count the PUT-class requests a store makes (S3 bills them; issue 25)."""
    counting = CountingS3(client)
    return S3Artifacts(counting, bucket, retention="7d"), counting


def test_s3_put_is_one_put_per_file_with_type_sha256_checksum_and_retention_tag_and_no_manifest(s3):
    _, client, bucket = s3
    store, counting = _puts(client, bucket)
    stored = store.put(PREFIX, FILES)
    assert stored == expected()
    assert counting.calls == ["put_object"] * len(FILES)  # one PUT per file; nothing else is written
    keys = sorted(o["Key"] for o in client.list_objects_v2(Bucket=bucket)["Contents"])
    assert keys == sorted(f"{PREFIX}/{f.name}" for f in FILES)  # no manifest object
    head = client.head_object(Bucket=bucket, Key=f"{PREFIX}/91001_p0.png")
    assert head["ContentType"] == "image/png" and head["ContentLength"] == len(FILES[0].content)
    assert head["Metadata"] == {"sha256": hashlib.sha256(FILES[0].content).hexdigest(), "size": str(len(FILES[0].content)),
                                "role": "original", "width": "8", "height": "6", "meta": '{"page":0}'}
    for f in FILES:
        tags = client.get_object_tagging(Bucket=bucket, Key=f"{PREFIX}/{f.name}")["TagSet"]
        assert tags == [{"Key": "retention", "Value": "7d"}]
    assert [store.read(f) for f in stored] == [f.content for f in FILES]


def test_s3_a_resumed_put_re_uses_the_files_whose_checksum_matches_and_puts_the_rest(s3):
    _, client, bucket = s3
    first, _ = _puts(client, bucket)
    first.put(PREFIX, FILES[:1])  # the run that died after its first file
    # a foreign or truncated object under a later file's key: its checksum does not match
    client.put_object(Bucket=bucket, Key=f"{PREFIX}/{FILES[1].name}", Body=b"half", ContentType="image/png",
                      Metadata={"sha256": hashlib.sha256(FILES[1].content).hexdigest(), "size": "4"})
    store, counting = _puts(client, bucket)
    assert store.put(PREFIX, FILES, reuse=True) == expected()
    puts = [c for c in counting.calls if c == "put_object"]
    assert len(puts) == 2  # page 1 (its object did not hold) and the archive; page 0 re-used
    assert [store.read(f) for f in expected()] == [f.content for f in FILES]


def test_s3_partial_finds_only_objects_stored_whole(s3):
    _, client, bucket = s3
    store, _ = _puts(client, bucket)
    [page0] = store.put(PREFIX, FILES[:1])
    client.put_object(Bucket=bucket, Key=f"{PREFIX}/91001_p1.png", Body=b"half", ContentType="image/png")  # no sha256
    client.put_object(Bucket=bucket, Key=f"{PREFIX}/91001_p2.png", Body=b"other", ContentType="image/png",
                      Metadata={"sha256": "0" * 64, "size": "5"})  # S3 holds no checksum that is this sha256
    found = S3Artifacts(client, bucket).partial(PREFIX)
    assert list(found) == ["91001_p0"] and found["91001_p0"].sha256 == page0.sha256 and found["91001_p0"].width == 8


def test_s3_presigned_url_is_sigv4_with_the_asked_lifetime(s3):
    store, _, bucket = s3
    [stored] = store.put(PREFIX, FILES[:1])
    url = urlsplit(store.url(stored, 3600))
    query = parse_qs(url.query)
    assert query["X-Amz-Expires"] == ["3600"] and query["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"]
    assert url.path.endswith("/91001_p0.png") and bucket in url.netloc + url.path


def test_s3_delete_removes_every_file_or_the_ones_named(s3):
    store, client, bucket = s3
    stored = store.put(PREFIX, FILES)
    store.put(f"{PREFIX}-other", FILES[:1])
    assert store.delete(PREFIX, stored[:2]) == 2
    left = sorted(o["Key"] for o in client.list_objects_v2(Bucket=bucket).get("Contents", []))
    assert left == [f"{PREFIX}-other/91001_p0.png", f"{PREFIX}/92002_ugoira.zip"]
    assert store.delete(PREFIX) == 1 and store.partial(PREFIX) == {}
    assert [o["Key"] for o in client.list_objects_v2(Bucket=bucket).get("Contents", [])] == [f"{PREFIX}-other/91001_p0.png"]
    assert store.delete(PREFIX) == 0  # idempotent


def test_s3_a_store_outage_is_not_read_as_nothing_stored(s3):
    from botocore.exceptions import ClientError

    _, client, bucket = s3

    class Broken:
        def list_objects_v2(self, **kwargs):
            raise ClientError({"Error": {"Code": "SlowDown", "Message": "slow"}}, "ListObjectsV2")

    with pytest.raises(ClientError):
        S3Artifacts(Broken(), bucket).partial(PREFIX)


def test_memory_artifacts_keep_the_same_contract():
    store = MemoryArtifacts()
    assert store.partial(PREFIX) == {}
    assert store.put(PREFIX, FILES) == expected() and store.puts == 3
    assert store.put(PREFIX, FILES, reuse=True) == expected() and store.puts == 3  # all re-used
    assert store.read(expected()[1]) == FILES[1].content
    assert store.url(expected()[0], 60) == f"memory://{PREFIX}/91001_p0.png?ttl=60"
    assert store.delete(PREFIX, expected()[:1]) == 1 and sorted(store.partial(PREFIX)) == ["91001_p1", "92002_ugoira"]
    assert store.delete(PREFIX) == 2 and store.partial(PREFIX) == {}


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
    # partial() finds what a stopped run left, to resume after it: both, the multipart one once
    # its checksum copy is done, tagged like the single PUT.
    again = S3Artifacts(client, bucket).partial(PREFIX)
    assert again == {"7_p0": small}
    assert S3Artifacts(client, bucket).partial(PREFIX + "-big")["7_p0"].sha256 == expected
    assert client.get_object_tagging(Bucket=bucket, Key=big.key)["TagSet"] == [{"Key": "retention", "Value": "14d"}]


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


def test_s3_a_resumed_put_stores_again_a_file_whose_bytes_changed(s3):
    _, client, bucket = s3
    first, _ = _puts(client, bucket)
    first.put(PREFIX, FILES[:1])
    changed = ArtifactFile(FILES[0].name, b"\x89PNG-page-0-redrawn", "image/png", width=8, height=6, meta={"page": 0})
    store, counting = _puts(client, bucket)
    [stored] = store.put(PREFIX, [changed], reuse=True)
    assert counting.calls.count("put_object") == 1  # the old object's checksum is not this file's
    assert store.read(stored) == changed.content and stored.sha256 == hashlib.sha256(changed.content).hexdigest()


@pytest.mark.parametrize("store", ["s3", "memory"])
def test_a_resumed_novel_finds_its_text_and_markdown_as_two_files(s3, store):
    """The novels brief: a stored file's stem drops only an extension its bytes chose, so a novel's
    ``<id>.txt`` and ``<id>.md`` (one base name) are both found when a resumed work lists its prefix."""
    artifacts = s3[0] if store == "s3" else MemoryArtifacts()
    novel = [ArtifactFile("93001.txt", "本文".encode(), "text/plain; charset=utf-8", role="text"),
             ArtifactFile("93001.md", b"# t\n", "text/markdown; charset=utf-8", role="markdown"),
             ArtifactFile("93001_uploadedimage_5551.jpg", b"\xff\xd8jpeg", "image/jpeg", role="inline")]
    artifacts.put(PREFIX, novel)
    found = artifacts.partial(PREFIX)
    assert sorted(found) == ["93001.md", "93001.txt", "93001_uploadedimage_5551"]
    assert [found[k].role for k in ("93001.txt", "93001.md")] == ["text", "markdown"]
