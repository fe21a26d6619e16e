"""Issue 24 (the store brief, item 4): the Lambda context is the only source of time. Its time left
guards each file download; what it had when the invocation began is the invocation's budget (no
constant copies the template's timeout). A file whose worst case exceeds the whole budget is
started anyway (no invocation could ever cover it, waiting would never help); one that merely
does not fit the time left hands the cell back (``download_incomplete``) to resume next time.

The real execute handler, the loopback fake Pixiv billing its bytes in virtual time, the twins."""

from __future__ import annotations

import pytest

from pixivflow.local.fake_pixiv import DEFAULT_REFRESH_TOKEN, FakePixiv, illust
from pixivflow.local.lambda_context import LocalLambdaContext

FIRE = "2026-11-30T23:00:00Z"
SLOT = "pixiv-morning@2026-12-01T0800"
WORK, PAGES, PAGE_BYTES = 97001, 3, 1_000_000
BANDWIDTH = 1_000_000  # 1 s per page
TIMEOUT_MS, RETRIES = 5_000, 1  # a page's worst case: 10 s, 11 s with the guard's slack


class Deadline(LocalLambdaContext):
    """A Lambda context whose remaining time is read off the virtual clock."""

    def __init__(self, clock, budget_ms: int) -> None:
        super().__init__(function_name="pixivflow-execute")
        self._clock, self._deadline = clock, clock.now_ms() + budget_ms

    def get_remaining_time_in_millis(self) -> int:
        return self._deadline - self._clock.now_ms()


@pytest.mark.parametrize("budget_ms, invocations, handed_back", [
    (8_000, 1, False),   # every page's worst case (11 s) is beyond the whole budget: started anyway
    (12_000, 2, True),   # p0 at 12 s left, p1 at 11 s; p2 at 10 s does not fit: resumed next time
])
def test_the_budget_is_the_lambda_contexts_own(make_runtime, monkeypatch, budget_ms, invocations, handed_back):
    monkeypatch.setenv("PIXIV_REFRESH_TOKEN", DEFAULT_REFRESH_TOKEN)
    with FakePixiv() as fake:
        raw = fake.fixtures.add_illust(illust(WORK, "Three pages", ["manga"], "2026-11-29T12:00:00+09:00",
                                              pages=PAGES, ext="jpg", width=1200, height=1700))
        originals = [p["image_urls"]["original"].split("i.pximg.net", 1)[1] for p in raw["meta_pages"]]
        for n, path in enumerate(originals):
            fake.generated.add(path, PAGE_BYTES, seed=n)

        def mutate(cfg):
            cfg["source"] = {"kind": "pixiv", "baseUrls": fake.base_urls}
            cfg["pixiv"] = {"accountId": "main"}
            cfg["network"] = {"requestPacingMs": 0, "timeoutMs": TIMEOUT_MS, "retries": RETRIES}
            cfg["download"] = {"requestDelay": 0}
            cfg["targets"] = [{"id": "manga", "type": "illustration", "illustId": WORK, "storageMode": "persistent"}]
            cfg["schedules"] = [{"id": "pixiv-morning", "cron": "0 8 * * *", "timezone": "Asia/Tokyo",
                                 "targetIds": ["manga"], "timeoutMs": 3_600_000}]

        box: list = []
        rt = make_runtime("2026-11-30T22:59:00Z", mutate=mutate, backend="twin",
                          overrides={"sleep": lambda s: box[0].advance(int(s * 1000))})
        box.append(rt.clock)
        fake.generated.bill(rt.clock, BANDWIDTH)
        handler, seen = rt.handlers["execute"], []

        def with_deadline(event, context):
            seen.append(rt.clock.now_ms())
            return handler(event, Deadline(rt.clock, budget_ms))

        rt.pumps["execute"]._handler = with_deadline  # noqa: SLF001 - the pump plays the event source mapping
        rt.fire("pixiv-morning", iso=FIRE)
        rt.settle(max_ms=30 * 60_000)

        cell = rt.engine.ledger.get_cell(SLOT, "manga")
        assert (cell.status, cell.work_id, cell.attempt_count) == ("submitted", str(WORK), 1)
        assert len(seen) == invocations
        assert ((cell.candidate_report or {}).get("waited", {}).get("reason") == "download_incomplete") is handed_back
        assert sorted(fake.generated.served) == sorted(originals)  # each page fetched once
        assert len(rt.engine.artifacts.partial(f"{SLOT}/manga/{WORK}")) == PAGES
