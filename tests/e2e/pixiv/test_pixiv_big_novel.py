"""The novels brief (issue 24): a novel of any size inside the Lambda budget. A novel whose text
carries 30 inline images of 8 MB each (240 MB; the fake Pixiv generates the bytes, never holds
them) is stored file by file through the real execute handler and the S3 adapter on the S3 twin
(the same streamed path as on moto, at a third of moto's CPU: the twin keeps objects in memory,
moto spools them to disk and hashes them again), under a 60 s
invocation deadline read from the Lambda context (the virtual clock's), at a bandwidth the fake
bills in virtual time: its text answer, its text, each image and its cover are units the
remaining-time guard checks before starting; an invocation that cannot finish the next one stops,
records ``download_incomplete`` and hands the cell back on the same binding (no attempt used); the
next one resumes at the first missing file, re-using the stored text answer (Pixiv is asked for the
text once) and every stored image. Then the published production route delivers it: the TelePost
submission carries the text and one media asset per image, and the TelePress upload (read by the
fake in 1 MiB pieces, each image kept as its digest) carries every image exactly once, byte for
byte. Memory is bounded by construction: 1 MiB reads, at most one part buffered per file."""

from __future__ import annotations

import hashlib
import json

import pytest

from test_pixiv_big_work import pinned_runtime, under_deadline
from support.builders import published
from support.published_routes import SUBMIT_TOKEN, TELEPRESS_KEY, production_novel_delivery

from pixivflow.adapters.pixiv.client import STREAM_CHUNK
from pixivflow.adapters.s3_artifacts import PART_BYTES
from pixivflow.local.fake_pixiv import DEFAULT_REFRESH_TOKEN, FakePixiv, jpeg, novel
from pixivflow.local.route_fakes import FakeTelePress, TelePostReceiver
from pixivflow.services.assets import recorded_files

FIRE = "2026-11-30T23:00:00Z"
SLOT = "pixiv-morning@2026-12-01T0800"
NOVEL = 94001
IMAGES = 30
IMAGE_BYTES = 8_000_000
GONE = "6999"  # an inline image the payload names but the image host no longer has
BANDWIDTH = 2_000_000  # bytes/s between Pixiv's image host and the function: 4 s per image
DEADLINE_MS = 60_000  # the execute function's timeout
TIMEOUT_MS, RETRIES = 5_000, 1  # an image's worst case: 5 s x 2 tries (+ 1 s of slack)
DAY = "2026/11/29/00/00/00"


def image_path(image_id: str) -> str:
    return f"/novel-cover-original/img/{DAY}/ci{NOVEL}_{image_id}.jpg"


@pytest.fixture
def world(make_runtime, monkeypatch):
    monkeypatch.setenv("PIXIV_REFRESH_TOKEN", DEFAULT_REFRESH_TOKEN)
    with FakePixiv() as fake, TelePostReceiver(token=SUBMIT_TOKEN) as telepost, \
            FakeTelePress(token=TELEPRESS_KEY, digest_images=True) as press:
        monkeypatch.setenv("TELEPOST_API_BASE_URL", telepost.base)
        monkeypatch.setenv("TELEPOST_BOT1_SUBMIT_TOKEN", SUBMIT_TOKEN)
        monkeypatch.setenv("TELEPRESS_API_KEY", TELEPRESS_KEY)
        ids = [str(7000 + n) for n in range(IMAGES)]
        text = "[chapter:第一章]\n" + "".join(f"第{n}節。\n[uploadedimage:{i}]\n" for n, i in enumerate(ids)) + \
            f"[newpage]\n[uploadedimage:{GONE}]\n終わり"
        raw = fake.fixtures.add_novel(novel(NOVEL, "Illustrated serial", ["fantasy"], "2026-11-29T20:00:00+09:00", text), text)
        fake.fixtures.inline[NOVEL] = {"images": {i: {"urls": {"original": f"https://i.pximg.net{image_path(i)}"}}
                                                  for i in [*ids, GONE]}, "illusts": {}}
        for n, i in enumerate(ids):
            fake.generated.add(image_path(i), IMAGE_BYTES, seed=n)
        fake.fixtures.files[raw["image_urls"]["large"].split("i.pximg.net", 1)[1]] = jpeg(240, 480, 1)
        delivery = production_novel_delivery()
        delivery["richNovelPreview"]["url"] = press.url
        target = {"id": "novel", "type": "novel", "novelId": NOVEL, "storageMode": "cache", "delivery": delivery}
        routes = {**published("production.json")["delivery"], "deleteAfterDelivery": False}  # the bucket is inspected after
        rt = pinned_runtime(make_runtime, fake, target, bandwidth=BANDWIDTH, timeout_ms=TIMEOUT_MS, retries=RETRIES,
                            backend="twin", delivery=routes)
        yield rt, fake, telepost, press, ids


@pytest.mark.size("large")  # 240 MB into the S3 twin and out to TelePress: the size is the point (tests/README.md)
def test_a_novel_with_30_images_of_8_mb_completes_across_invocations_and_delivers_each_image_once(world):
    rt, fake, telepost, press, ids = world
    invocations = under_deadline(rt, DEADLINE_MS)
    rt.fire("pixiv-morning", iso=FIRE)
    rt.settle()

    cell = rt.wiring.ledger.get_cell(SLOT, "novel")
    assert (cell.status, cell.work_id, cell.attempt_count) == ("submitted", str(NOVEL), 1)  # hand-backs used no attempt
    assert cell.candidate_report["waited"]["reason"] == "download_incomplete"
    # 13 images fit one 60 s invocation (each starts only with 11 s left): three invocations, none past its deadline.
    assert len(invocations) == 3 and max(invocations) <= DEADLINE_MS, invocations
    # Every image fetched exactly once (resumed, never redone); the text asked for once, re-used from the store after.
    assert sorted(fake.generated.served) == sorted(image_path(i) for i in ids)
    assert fake.paths().count("/webview/v2/novel") == 1 and "/v1/novel/text" not in fake.paths()
    # Bounded memory by construction: 1 MiB reads, at most one part buffered per file.
    assert rt.wiring.artifacts.peak_buffer <= PART_BYTES + STREAM_CHUNK

    names = [f"{NOVEL}_uploadedimage_{i}.jpg" for i in ids]
    (row,) = rt.wiring.ledger.load(SLOT).intents_for("novel")
    assert row.status == "delivered"
    recorded = [f.name for f in recorded_files(row)]
    assert recorded == [f"{NOVEL}.txt", *names, f"{NOVEL}.md", f"{NOVEL}_cover.jpg"]
    # The stored text answer was only for resuming: gone once the novel's own files were all stored.
    assert sorted(rt.wiring.artifacts.partial(f"{SLOT}/novel/{NOVEL}")) == sorted(
        [f"{NOVEL}.txt", f"{NOVEL}.md", f"{NOVEL}_cover", *(n[:-4] for n in names)])

    # TelePress got one upload with every image once, byte for byte, each referenced by the Markdown.
    (page,) = press.published
    assert len(press.at("/publish/rich-novel", "POST")) == 1
    expected = {}
    for i in ids:
        digest = hashlib.sha256()
        for piece in fake.generated.content(image_path(i)):
            digest.update(piece)
        expected[f"images/{NOVEL}_uploadedimage_{i}.jpg"] = f"sha256:{digest.hexdigest()} {IMAGE_BYTES}".encode()
    assert page["images"] == expected
    assert [m["local"] for m in page["manifest"]] == list(expected)
    assert all(f"![]({local})" in page["md"] for local in expected)
    assert f"uploadedimage:{GONE}" in page["md"]  # the image Pixiv no longer has keeps its marker
    # The submission: the text file, the preview's URL, one media asset per image.
    (submission,) = telepost.submissions.values()
    assert [name for name, _ in submission["files"]] == [f"{NOVEL}.txt"]
    assert submission["fields"]["novel_preview_url"] == [page["url"]]
    assets = json.loads(submission["fields"]["media_assets"][0])
    assert [a["asset_id"] for a in assets] == [f"pixiv:{NOVEL}:uploadedimage:{i}" for i in ids]
    print(f"\nbig novel: {IMAGES} x {IMAGE_BYTES} B in {len(invocations)} invocations "
          f"(longest {max(invocations) / 1000:.1f} s) at {BANDWIDTH / 1e6:.0f} MB/s")
