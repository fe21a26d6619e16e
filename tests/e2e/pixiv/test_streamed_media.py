"""Issue 24 (the store brief, item 2): a ugoira's zip and the previews a route sends are streamed
from Pixiv to S3 like an illustration's pages: never whole in memory (the store's buffer is
asserted), started only when the invocation's time left covers their worst case, resumed at the
first missing file.

Real handlers on moto (multipart uploads), the real Pixiv client on the loopback fake Pixiv, the
TelePost-like receiver of the published configs' routes (``support.published_routes``' world)."""

from __future__ import annotations

import hashlib

from pixivflow.adapters.pixiv.client import STREAM_CHUNK
from pixivflow.adapters.s3_artifacts import PART_BYTES
from pixivflow.local.fake_pixiv import DEFAULT_REFRESH_TOKEN, FakePixiv, illust
from pixivflow.services.assets import recorded_files
from pixivflow.services.execution import execute_cell
from support.builders import pixiv_config, pixiv_runtime
from support.delivery import drive
from support.published_routes import illust_target, world  # noqa: F401 - the fixture

FIRE = "2026-11-30T23:00:00Z"
SLOT = "pixiv-morning@2026-12-01T0800"
UGOIRA, ZIP_BYTES = 98001, 3 * PART_BYTES + 123_457  # a zip of four parts


class Streams:
    """The artifact store, watched: which files went through put_stream, and that none was ``put`` whole."""

    def __init__(self, store) -> None:
        self._store, self.streamed, self.whole = store, [], []

    def __getattr__(self, name):
        return getattr(self._store, name)

    def put_stream(self, *args, **kwargs):
        stored = self._store.put_stream(*args, **kwargs)
        self.streamed.append((stored.name, stored.role))
        return stored

    def put(self, key, files, **kwargs):
        self.whole.extend(f.name for f in files)
        return self._store.put(key, files, **kwargs)


def test_a_ugoira_zip_is_streamed_in_bounded_parts_with_its_frame_delays_recorded(make_runtime, monkeypatch, downstream):
    monkeypatch.setenv("PIXIV_REFRESH_TOKEN", DEFAULT_REFRESH_TOKEN)
    monkeypatch.setenv("MOTO_S3_DEFAULT_KEY_BUFFER_SIZE", str(1024 * 1024))  # moto spools objects to disk
    with FakePixiv() as fake:
        fake.fixtures.add_illust(illust(UGOIRA, "Waves", ["sea"], "2026-11-28T05:00:00+09:00", kind="ugoira"))
        large = fake.fixtures.ugoira[UGOIRA]["zip_urls"]["medium"].replace("_ugoira600x600", "_ugoira1920x1080")
        path = large.split("i.pximg.net", 1)[1]
        fake.generated.add(path, ZIP_BYTES, seed=7)

        mutate = pixiv_config(fake, [{"id": "waves", "type": "illustration", "illustId": UGOIRA, "storageMode": "cache",
                                      "delivery": {"target": "review"}}],
                              pixiv={"accountId": "main"}, network={"requestPacingMs": 0, "retries": 0})
        rt = pixiv_runtime(make_runtime, mutate, backend="moto", virtual_sleep=False)  # multipart uploads: moto only (the S3 twin has whole-object PUTs)
        watched = rt.wiring.artifacts = Streams(rt.wiring.artifacts)
        rt.fire("pixiv-morning", iso=FIRE)
        rt.settle()

        assert rt.wiring.ledger.get_cell(SLOT, "waves").status == "submitted"
        assert watched.streamed == [(f"{UGOIRA}_ugoira.zip", "archive")] and watched.whole == []
        assert watched.peak_buffer <= PART_BYTES + STREAM_CHUNK < ZIP_BYTES // 2  # about one part, never the whole zip
        [intent] = rt.wiring.ledger.load(SLOT).intents_for("waves")
        [record] = recorded_files(intent)
        expected = hashlib.sha256(b"".join(fake.generated.content(path))).hexdigest()
        assert (record.size, record.sha256, record.content_type) == (ZIP_BYTES, expected, "application/zip")
        assert record.meta["frames"] == fake.fixtures.ugoira[UGOIRA]["frames"]  # the delays, from the ledger
        assert hashlib.sha256(rt.wiring.artifacts.read(record)).hexdigest() == expected
        [request] = downstream.requests
        assert [a["bytes"] for a in request.body["assets"]] == [ZIP_BYTES]


class TimeLeft:
    """An invocation's time left that runs out after ``files`` file starts (the guard asks once per file)."""

    def __init__(self, files: int) -> None:
        self.left, self.asked = files, 0

    def __call__(self) -> int:
        self.asked += 1
        return 60_000 if self.asked <= self.left + 1 else 2_000  # the first ask is the invocation's budget


def test_previews_are_streamed_after_the_pages_and_a_short_invocation_resumes_at_the_first_missing_one(world):  # noqa: F811
    factory, fake, telepost, _ = world
    rt = factory("production.json", [illust_target("bot1-submit")])
    watched = rt.wiring.artifacts = Streams(rt.wiring.artifacts)
    # One invocation with time for four files: the three pages and the first preview.
    execute_cell(rt.wiring.executions, SLOT, "bot1-illust", time_left=TimeLeft(4))
    cell = rt.wiring.ledger.get_cell(SLOT, "bot1-illust")
    assert (cell.status, cell.work_id) == ("selected", "91001")  # handed back, the binding kept
    assert cell.candidate_report["waited"]["reason"] == "download_incomplete"
    assert watched.streamed == [("91001_p0.png", "original"), ("91001_p1.png", "original"), ("91001_p2.png", "original"),
                                ("91001_p0.png.preview.jpg", "preview")]
    drive(rt)  # the handed-back message: the two missing previews, then the delivery
    assert watched.streamed[4:] == [("91001_p1.png.preview.jpg", "preview"), ("91001_p2.png.preview.jpg", "preview")]
    assert watched.whole == []  # nothing was downloaded whole
    images = [r.path for r in fake.requests if r.host == "image"]
    assert len(images) == len(set(images)) == 6  # each page and each preview fetched once
    (submission,) = telepost.submissions.values()
    assert [n for n, _ in submission["files"]] == ["91001_p0.png", "91001_p1.png", "91001_p2.png"]
    assert [n for n, _ in submission["previews"]] == [f"91001_p{i}.png.preview.jpg" for i in range(3)]
    assert rt.wiring.ledger.get_cell(SLOT, "bot1-illust").status == "submitted"


P1_PREVIEW = "/c/600x1200_90/img-master/img/2026/11/29/21/15/00/91001_p1_master1200.jpg"


def test_a_preview_pixiv_does_not_have_drops_every_preview_and_the_work_is_delivered_without(world, logs):  # noqa: F811
    factory, fake, telepost, _ = world
    fake.fail(P1_PREVIEW, 404, "gone", times=99)
    rt = factory("production.json", [illust_target("bot1-submit")])
    watched = rt.wiring.artifacts = Streams(rt.wiring.artifacts)
    drive(rt)
    # the first preview was stored before the second failed; all or none: it is gone again
    assert ("91001_p0.png.preview.jpg", "preview") in watched.streamed and watched.whole == []
    (submission,) = telepost.submissions.values()
    assert [n for n, _ in submission["files"]] == ["91001_p0.png", "91001_p1.png", "91001_p2.png"]
    assert submission.get("previews", []) == []
    [intent] = rt.wiring.ledger.load(SLOT).intents_for("bot1-illust")
    assert [f.role for f in recorded_files(intent)] == ["original"] * 3
    (dropped,) = logs.events("artifacts.no_previews")
    assert dropped["work_id"] == "91001"


def test_a_preview_that_failed_for_now_is_fetched_again_and_every_preview_is_sent(world, logs):  # noqa: F811
    factory, fake, telepost, _ = world
    fake.fail(P1_PREVIEW, 503, {"error": "busy"}, times=3)  # through the quick retries: the cell is retried
    rt = factory("production.json", [illust_target("bot1-submit")])
    drive(rt)
    (submission,) = telepost.submissions.values()
    assert [n for n, _ in submission["previews"]] == [f"91001_p{i}.png.preview.jpg" for i in range(3)]
    assert logs.events("artifacts.no_previews") == []
    pages = [r.path for r in fake.requests if r.host == "image" and "/img-original/" in r.path]
    assert len(pages) == len(set(pages)) == 3  # the retry resumed: no page fetched twice
