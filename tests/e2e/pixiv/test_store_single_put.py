"""Issue 25, the cost side of the Pixiv write path: ONE S3 PUT per stored file, no manifest object.

The real execute and deliver handlers on the twins (whose S3 counts every request and refuses a
PUT whose checksum does not match its bytes), the real Pixiv client on the loopback fake Pixiv.
The delivery intent records the stored files (keys, sizes, checksums); a run that dies after k of
n files leaves k whole objects, and the retry re-uses them (each one's checksum checked) and PUTs
only the missing ones. Every object carries its retention class tag.
"""

from __future__ import annotations

import base64
import hashlib

import pytest

from pixivflow import aws
from pixivflow.local.fake_pixiv import DEFAULT_REFRESH_TOKEN, FakePixiv, illust
from pixivflow.services.assets import recorded_files
from pixivflow.services.execution import execute_cell
from support.builders import pixiv_config, pixiv_runtime

FIRE = "2026-11-30T23:00:00Z"
SLOT = "pixiv-morning@2026-12-01T0800"
WORK, PAGES = 96001, 4
PREFIX = f"{SLOT}/manga/{WORK}"


@pytest.fixture
def rt(make_runtime, monkeypatch):
    monkeypatch.setenv("PIXIV_REFRESH_TOKEN", DEFAULT_REFRESH_TOKEN)
    with FakePixiv() as fake:
        fake.fixtures.add_illust(illust(WORK, "Four pages", ["manga"], "2026-11-29T12:00:00+09:00", pages=PAGES))

        mutate = pixiv_config(fake, [{"id": "manga", "type": "illustration", "illustId": WORK, "storageMode": "cache",
                                      "delivery": {"target": "review"}}],
                              pixiv={"accountId": "main"}, network={"requestPacingMs": 0, "retries": 0},
                              storage={"cacheRetentionDays": 7})  # as the published configs set it
        runtime = pixiv_runtime(make_runtime, mutate, virtual_sleep=False)
        runtime.fake = fake
        yield runtime


class DiesAfter:
    """The artifact store of an executor whose Lambda dies as it starts its ``n``+1-th file."""

    def __init__(self, store, n: int) -> None:
        self._store, self._left = store, n

    def __getattr__(self, name):
        return getattr(self._store, name)

    def put_stream(self, *args, **kwargs):
        if self._left == 0:
            raise RuntimeError("injected crash: the invocation died between two files")
        self._left -= 1
        return self._store.put_stream(*args, **kwargs)


def _objects(rt) -> dict[str, bytes]:
    s3, bucket = aws.client("s3"), rt.env["ARTIFACT_BUCKET"]
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=PREFIX + "/").get("Contents", [])
    return {o["Key"].rsplit("/", 1)[1]: s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read() for o in listed}


def _intent(rt):
    [intent] = rt.wiring.ledger.load(SLOT).intents_for("manga")
    return intent


def test_a_work_costs_one_put_per_file_and_its_intent_records_them(rt, downstream):
    rt.fire("pixiv-morning", iso=FIRE)
    rt.settle()
    s3 = rt.cloud.s3
    assert rt.wiring.ledger.get_cell(SLOT, "manga").status == "submitted"
    assert s3.calls.get("PutObject") == PAGES  # one PUT per stored file, nothing else written to S3
    assert not {"CopyObject", "CreateMultipartUpload", "ListObjectsV2", "HeadObject"} & set(s3.calls)
    objects = _objects(rt)
    assert sorted(objects) == [f"{WORK}_p{n}.png" for n in range(PAGES)]  # no manifest object
    # The intent records each file once: its key, size and SHA-256, which are the object's.
    records = recorded_files(_intent(rt))
    assert [r.key for r in records] == [f"{PREFIX}/{WORK}_p{n}.png" for n in range(PAGES)]
    for record in records:
        body = objects[record.name]
        assert (record.size, record.sha256, record.content_type) == (len(body), hashlib.sha256(body).hexdigest(), "image/png")
    # The delivery reads them from the intent: each page as an asset of its size.
    [request] = downstream.requests
    assert [a["bytes"] for a in request.body["assets"]] == [r.size for r in records]
    # Every object carries S3's checksum of its bytes and its retention class (7 days -> 7d).
    client = aws.client("s3")
    for record in records:
        head = client.head_object(Bucket=rt.env["ARTIFACT_BUCKET"], Key=record.key, ChecksumMode="ENABLED")
        assert head["ChecksumSHA256"] == base64.b64encode(bytes.fromhex(record.sha256)).decode()
        tags = client.get_object_tagging(Bucket=rt.env["ARTIFACT_BUCKET"], Key=record.key)["TagSet"]
        assert tags == [{"Key": "retention", "Value": "7d"}]


@pytest.mark.parametrize("k", [1, 3])
def test_a_run_that_died_after_k_of_n_files_is_retried_with_a_put_for_each_missing_file_only(rt, downstream, k):
    rt.fire("pixiv-morning", iso=FIRE)
    wiring, store = rt.wiring, rt.wiring.artifacts
    wiring.artifacts = DiesAfter(store, k)
    with pytest.raises(RuntimeError, match="injected crash"):
        execute_cell(wiring.executions, SLOT, "manga")
    wiring.artifacts = store
    cell = wiring.ledger.get_cell(SLOT, "manga")
    assert (cell.status, cell.work_id) == ("selected", str(WORK))  # retryable: the binding kept, no intent
    assert wiring.ledger.load(SLOT).intents_for("manga") == []
    assert rt.cloud.s3.calls.get("PutObject") == k and len(_objects(rt)) == k

    rt.settle()  # the cell's message again: the bound work, resumed
    assert wiring.ledger.get_cell(SLOT, "manga").status == "submitted"
    assert rt.cloud.s3.calls.get("PutObject") == PAGES  # k before the crash, the n - k missing ones after
    images = [r.path.rsplit("/", 1)[1] for r in rt.fake.requests if r.host == "image"]
    assert sorted(set(images)) == [f"{WORK}_p{n}.png" for n in range(PAGES)]
    assert all(images.count(f"{WORK}_p{n}.png") == 1 for n in range(k))  # stored pages never fetched again
    assert [r.name for r in recorded_files(_intent(rt))] == [f"{WORK}_p{n}.png" for n in range(PAGES)]
    [request] = downstream.requests
    assert len(request.body["assets"]) == PAGES


def test_a_left_object_whose_checksum_does_not_hold_is_stored_again(rt, downstream):
    """A page object at the right key that S3 holds no matching checksum for (written by something
    else, or a multipart upload whose checksum copy never ran) is not re-used."""
    rt.fire("pixiv-morning", iso=FIRE)
    wiring, store = rt.wiring, rt.wiring.artifacts
    wiring.artifacts = DiesAfter(store, 2)
    with pytest.raises(RuntimeError, match="injected crash"):
        execute_cell(wiring.executions, SLOT, "manga")
    wiring.artifacts = store
    s3, bucket = aws.client("s3"), rt.env["ARTIFACT_BUCKET"]
    key = f"{PREFIX}/{WORK}_p1.png"
    head = s3.head_object(Bucket=bucket, Key=key)
    # the same metadata, other bytes, and no checksum S3 computed
    s3.put_object(Bucket=bucket, Key=key, Body=b"\x89PNG-not-the-page", ContentType="image/png",
                  Metadata={**head["Metadata"], "size": str(len(b"\x89PNG-not-the-page"))})
    before = rt.cloud.s3.calls["PutObject"]
    rt.settle()
    assert wiring.ledger.get_cell(SLOT, "manga").status == "submitted"
    assert rt.cloud.s3.calls["PutObject"] - before == PAGES - 1  # p1 again, p2 and p3; p0 re-used
    record = next(r for r in recorded_files(_intent(rt)) if r.name == f"{WORK}_p1.png")
    assert hashlib.sha256(_objects(rt)[f"{WORK}_p1.png"]).hexdigest() == record.sha256 != hashlib.sha256(
        b"\x89PNG-not-the-page").hexdigest()
