"""Issue 24: no work is too big for a Lambda. A 60-page manga of 8 MB pages (480 MB; the fake
Pixiv generates the bytes, never holds them) is streamed page by page to S3 (moto) through the
real execute handler, under a 60 s invocation deadline read from the Lambda context (injected:
the virtual clock's), at a stated bandwidth the fake bills in virtual time. Each invocation starts
a page only while the time left covers its worst case; it then stops, records
``download_incomplete`` with the pages stored so far and hands the cell back (no attempt used);
the next invocation resumes at the first missing page on the same binding. Memory is bounded by
construction: the client reads 1 MiB chunks and the store holds at most one part."""

from __future__ import annotations

import hashlib

import pytest

from pixivflow import aws
from pixivflow.adapters.pixiv.client import STREAM_CHUNK
from pixivflow.adapters.s3_artifacts import PART_BYTES
from pixivflow.local.fake_pixiv import DEFAULT_REFRESH_TOKEN, FakePixiv, illust
from pixivflow.local.lambda_context import LocalLambdaContext

FIRE = "2026-11-30T23:00:00Z"
SLOT = "pixiv-morning@2026-12-01T0800"
WORK = 95001
PAGES = 60
PAGE_BYTES = 8_000_000
BANDWIDTH = 2_000_000  # bytes/s between Pixiv's image host and the function: 4 s per page
DEADLINE_MS = 60_000  # the execute function's timeout
TIMEOUT_MS, RETRIES = 5_000, 1  # a page's worst case: 5 s x 2 tries


class VirtualDeadline(LocalLambdaContext):
    """The Lambda context of one invocation, its remaining time read off the virtual clock."""

    def __init__(self, clock, budget_ms: int) -> None:
        super().__init__(function_name="pixivflow-execute")
        self._clock = clock
        self._deadline = clock.now_ms() + budget_ms

    def get_remaining_time_in_millis(self) -> int:
        return self._deadline - self._clock.now_ms()


def pinned_work_runtime(make_runtime, fake, *, work: int, pages: int, page_bytes: int, bandwidth: int,
                        timeout_ms: int, retries: int, backend: str):
    """A runtime whose one target pins ``work``: ``pages`` generated pages of ``page_bytes`` on the fake
    Pixiv, billed at ``bandwidth`` bytes/s of virtual time; returns (runtime, the pages' paths)."""
    raw = fake.fixtures.add_illust(illust(work, "Long manga", ["manga"], "2026-11-29T12:00:00+09:00",
                                          pages=pages, ext="jpg", width=1200, height=1700))
    originals = [p["image_urls"]["original"].split("i.pximg.net", 1)[1] for p in raw["meta_pages"]]
    for n, path in enumerate(originals):
        fake.generated.add(path, page_bytes, seed=n)

    def mutate(cfg):
        cfg["source"] = {"kind": "pixiv", "baseUrls": fake.base_urls}
        cfg["pixiv"] = {"accountId": "main"}
        cfg["network"] = {"requestPacingMs": 0, "timeoutMs": timeout_ms, "retries": retries}
        cfg["download"] = {"requestDelay": 0}
        cfg["targets"] = [{"id": "manga", "type": "illustration", "illustId": work, "storageMode": "persistent"}]
        cfg["schedules"] = [{"id": "pixiv-morning", "cron": "0 8 * * *", "timezone": "Asia/Tokyo",
                             "targetIds": ["manga"], "timeoutMs": 3_600_000}]

    box: list = []
    rt = make_runtime("2026-11-30T22:59:00Z", mutate=mutate, backend=backend,
                      overrides={"sleep": lambda s: box[0].advance(int(s * 1000))})
    box.append(rt.clock)
    fake.generated.bill(rt.clock, bandwidth)
    return rt, originals


@pytest.fixture
def big(make_runtime, monkeypatch):
    monkeypatch.setenv("PIXIV_REFRESH_TOKEN", DEFAULT_REFRESH_TOKEN)
    monkeypatch.setenv("MOTO_S3_DEFAULT_KEY_BUFFER_SIZE", str(1024 * 1024))  # moto spools objects to disk
    with FakePixiv() as fake:
        rt, originals = pinned_work_runtime(make_runtime, fake, work=WORK, pages=PAGES, page_bytes=PAGE_BYTES,
                                            bandwidth=BANDWIDTH, timeout_ms=TIMEOUT_MS, retries=RETRIES, backend="moto")
        yield rt, fake, originals


@pytest.mark.size("large")  # 480 MB streamed to moto's S3: the size is the point (tests/README.md, test sizes)
def test_a_60_page_work_of_8_mb_pages_completes_across_invocations_under_a_60_s_deadline(big):
    rt, fake, originals = big
    handler = rt.handlers["execute"]
    invocations: list[int] = []

    def with_deadline(event, context):
        started = rt.clock.now_ms()
        answer = handler(event, VirtualDeadline(rt.clock, DEADLINE_MS))
        invocations.append(rt.clock.now_ms() - started)
        return answer

    rt.pumps["execute"]._handler = with_deadline  # noqa: SLF001 - the pump plays the event source mapping
    start = rt.clock.now_ms()
    rt.fire("pixiv-morning", iso=FIRE)
    rt.settle()

    cell = rt.engine.ledger.get_cell(SLOT, "manga")
    assert cell.status == "submitted" and cell.work_id == str(WORK)
    assert cell.attempt_count == 1  # the hand-backs used no attempt
    assert cell.candidate_report["waited"]["reason"] == "download_incomplete"
    # Several invocations, none past its deadline; every page fetched exactly once (resumed, never redone).
    assert len(invocations) >= 4 and max(invocations) <= DEADLINE_MS, invocations
    assert sorted(fake.generated.served) == sorted(originals)
    # Every page in S3, whole and checksummed, under the work's prefix.
    found = rt.engine.artifacts.partial(f"{SLOT}/manga/{WORK}")  # each object verified by its checksum
    stored = [found[f"{WORK}_p{n}"] for n in range(PAGES)]
    assert sorted(found) == sorted(f"{WORK}_p{n}" for n in range(PAGES))
    assert [f.name for f in stored] == [f"{WORK}_p{n}.jpg" for n in range(PAGES)]
    s3 = aws.client("s3")
    for n in (0, PAGES // 2, PAGES - 1):
        expected = hashlib.sha256()
        for piece in fake.generated.content(originals[n]):
            expected.update(piece)
        head = s3.head_object(Bucket=rt.env["ARTIFACT_BUCKET"], Key=stored[n].key)
        assert head["ContentLength"] == PAGE_BYTES and head["Metadata"]["sha256"] == expected.hexdigest() == stored[n].sha256
        assert (stored[n].width, stored[n].height, stored[n].content_type) == (1200, 1700, "image/jpeg")
    # Bounded memory by construction: 1 MiB reads, at most one part buffered per file.
    assert rt.engine.artifacts.peak_buffer <= PART_BYTES + STREAM_CHUNK
    total_s = (rt.clock.now_ms() - start) / 1000
    print(f"\nbig work: {PAGES} x {PAGE_BYTES} B in {len(invocations)} invocations, {total_s:.0f} s virtual "
          f"at {BANDWIDTH / 1e6:.0f} MB/s (longest invocation {max(invocations) / 1000:.1f} s)")
