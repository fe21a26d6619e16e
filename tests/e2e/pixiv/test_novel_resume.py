"""The novels brief (issue 24), the rules at small sizes: a novel handed back mid-way resumes on
its stored text answer (Pixiv is asked for the text once) and stored images, leaves out an image
Pixiv no longer has, and keeps nothing but its own files; a text answer past the client's bound is
refused with its reason. The real execute and deliver handlers, the loopback fake Pixiv billing
image bytes in virtual time, the twins."""

from __future__ import annotations

import pytest

from test_pixiv_big_work import pinned_runtime, under_deadline

from pixivflow.adapters.pixiv import client
from pixivflow.local.fake_pixiv import DEFAULT_REFRESH_TOKEN, FakePixiv, jpeg, novel
from pixivflow.services.assets import recorded_files

FIRE = "2026-11-30T23:00:00Z"
SLOT = "pixiv-morning@2026-12-01T0800"
NOVEL = 94101
DAY = "2026/11/29/00/00/00"
TIMEOUT_MS, RETRIES = 5_000, 1  # an image's worst case: 10 s, 11 s with the guard's slack
BANDWIDTH = 1_000_000  # 1 s per 1 MB image


def image_path(image_id: str) -> str:
    return f"/novel-cover-original/img/{DAY}/ci{NOVEL}_{image_id}.jpg"


def novel_world(make_runtime, fake, text: str, images: dict[str, int]):
    """A pinned novel whose ``images`` (id -> generated size; 0: not on the image host) the text names."""
    raw = fake.fixtures.add_novel(novel(NOVEL, "Serial", ["fantasy"], "2026-11-29T20:00:00+09:00", text), text)
    fake.fixtures.inline[NOVEL] = {"images": {i: {"urls": {"original": f"https://i.pximg.net{image_path(i)}"}}
                                              for i in images}, "illusts": {}}
    for n, (i, size) in enumerate(images.items()):
        if size:
            fake.generated.add(image_path(i), size, seed=n)
    fake.fixtures.files[raw["image_urls"]["large"].split("i.pximg.net", 1)[1]] = jpeg(240, 480, 1)
    target = {"id": "novel", "type": "novel", "novelId": NOVEL, "storageMode": "cache", "delivery": {"target": "review"}}
    return pinned_runtime(make_runtime, fake, target, bandwidth=BANDWIDTH, timeout_ms=TIMEOUT_MS, retries=RETRIES,
                          backend="twin")


@pytest.mark.parametrize("budget_ms, invocations_needed", [
    (13_000, 2),  # images 1-3 start at 13, 12 and 11 s left, the Markdown at 10; the cover (11 s) must wait
    (60_000, 1),  # all of it in one invocation
])
def test_a_handed_back_novel_resumes_on_its_stored_text_answer_and_images(make_runtime, monkeypatch, budget_ms,
                                                                          invocations_needed):
    monkeypatch.setenv("PIXIV_REFRESH_TOKEN", DEFAULT_REFRESH_TOKEN)
    with FakePixiv() as fake:
        text = "[uploadedimage:1]\n一。\n[uploadedimage:2]\n二。\n[uploadedimage:9]\n[uploadedimage:3]\n三。"
        rt = novel_world(make_runtime, fake, text, {"1": 1_000_000, "2": 1_000_000, "9": 0, "3": 1_000_000})
        invocations = under_deadline(rt, budget_ms)
        rt.fire("pixiv-morning", iso=FIRE)
        rt.settle(max_ms=30 * 60_000)

        cell = rt.wiring.ledger.get_cell(SLOT, "novel")
        assert (cell.status, cell.work_id, cell.attempt_count) == ("submitted", str(NOVEL), 1)
        assert len(invocations) == invocations_needed
        waited = (cell.candidate_report or {}).get("waited", {}).get("reason")
        assert waited == ("download_incomplete" if invocations_needed > 1 else None)
        # The text was asked for once: the second invocation read the stored answer back.
        assert fake.paths().count("/webview/v2/novel") == 1
        assert sorted(fake.generated.served) == sorted(image_path(i) for i in "123")  # each image once
        assert fake.paths().count(image_path("9")) == 1  # not there: left out, and not asked again once the Markdown is made
        (row,) = rt.wiring.ledger.load(SLOT).intents_for("novel")
        names = [f"{NOVEL}_uploadedimage_{i}.jpg" for i in "123"]
        assert [f.name for f in recorded_files(row)] == [f"{NOVEL}.txt", *names, f"{NOVEL}.md", f"{NOVEL}_cover.jpg"]
        markdown = rt.wiring.artifacts.read(next(f for f in recorded_files(row) if f.role == "markdown")).decode()
        assert all(f"![](images/{n})" in markdown for n in names) and "uploadedimage:9" in markdown
        assert row.status == "delivered"
        # The bucket holds the novel's own files only: the text answer kept for the resume is gone.
        assert sorted(rt.wiring.artifacts.partial(f"{SLOT}/novel/{NOVEL}")) == sorted(
            [f"{NOVEL}.txt", *(n[:-4] for n in names), f"{NOVEL}.md", f"{NOVEL}_cover"])


def test_a_text_answer_past_the_bound_is_refused_with_its_reason(make_runtime, monkeypatch):
    monkeypatch.setenv("PIXIV_REFRESH_TOKEN", DEFAULT_REFRESH_TOKEN)
    monkeypatch.setattr(client, "MAX_ANSWER_BYTES", 64 * 1024)  # the bound, scaled down: the same code path
    with FakePixiv() as fake:
        rt = novel_world(make_runtime, fake, "長" * 40_000, {})  # 120 KB of UTF-8 in each text answer
        rt.fire("pixiv-morning", iso=FIRE)
        rt.settle(max_ms=30 * 60_000)

        cell = rt.wiring.ledger.get_cell(SLOT, "novel")
        assert cell.status == "failed" and cell.attempt_count == 1, (cell.status, cell.last_error)
        assert "unsupported media" in cell.last_error and f"limit {64 * 1024}" in cell.last_error, cell.last_error
        assert fake.generated.served == [] and rt.wiring.ledger.load(SLOT).intents_for("novel") == []
