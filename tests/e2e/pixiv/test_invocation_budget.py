"""Issue 24 (the store brief, item 4): the Lambda context is the only source of time. Its time left
guards each file download; what it had when the invocation began is the invocation's budget (no
constant copies the template's timeout). A file whose worst case exceeds the whole budget is
started anyway (no invocation could ever cover it, waiting would never help); one that merely
does not fit the time left hands the cell back (``download_incomplete``) to resume next time.

The real execute handler, the loopback fake Pixiv billing its bytes in virtual time, the twins."""

from __future__ import annotations

import pytest

from test_pixiv_big_work import VirtualDeadline, pinned_work_runtime

from pixivflow.local.fake_pixiv import DEFAULT_REFRESH_TOKEN, FakePixiv

FIRE = "2026-11-30T23:00:00Z"
SLOT = "pixiv-morning@2026-12-01T0800"
WORK, PAGES, PAGE_BYTES = 97001, 3, 1_000_000
BANDWIDTH = 1_000_000  # 1 s per page
TIMEOUT_MS, RETRIES = 5_000, 1  # a page's worst case: 10 s, 11 s with the guard's slack


@pytest.mark.parametrize("budget_ms, invocations, handed_back", [
    (8_000, 1, False),   # every page's worst case (11 s) is beyond the whole budget: started anyway
    (12_000, 2, True),   # p0 at 12 s left, p1 at 11 s; p2 at 10 s does not fit: resumed next time
])
def test_the_budget_is_the_lambda_contexts_own(make_runtime, monkeypatch, budget_ms, invocations, handed_back):
    monkeypatch.setenv("PIXIV_REFRESH_TOKEN", DEFAULT_REFRESH_TOKEN)
    with FakePixiv() as fake:
        rt, originals = pinned_work_runtime(make_runtime, fake, work=WORK, pages=PAGES, page_bytes=PAGE_BYTES,
                                            bandwidth=BANDWIDTH, timeout_ms=TIMEOUT_MS, retries=RETRIES, backend="twin")
        handler, seen = rt.handlers["execute"], []

        def with_deadline(event, context):
            seen.append(rt.clock.now_ms())
            return handler(event, VirtualDeadline(rt.clock, budget_ms))

        rt.pumps["execute"]._handler = with_deadline  # noqa: SLF001 - the pump plays the event source mapping
        rt.fire("pixiv-morning", iso=FIRE)
        rt.settle(max_ms=30 * 60_000)

        cell = rt.wiring.ledger.get_cell(SLOT, "manga")
        assert (cell.status, cell.work_id, cell.attempt_count) == ("submitted", str(WORK), 1)
        assert len(seen) == invocations
        assert ((cell.candidate_report or {}).get("waited", {}).get("reason") == "download_incomplete") is handed_back
        assert sorted(fake.generated.served) == sorted(originals)  # each page fetched once
        assert len(rt.wiring.artifacts.partial(f"{SLOT}/manga/{WORK}")) == PAGES
