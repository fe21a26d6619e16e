"""The Telegram review route's pure rules and Pixiv's novel markup (issue 23; real-configs note §6, §7)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import pytest

from pixivflow.domain.novel_markup import inline_images, render_markdown, scan
from pixivflow.domain.review import (
    CAPTION_LIMIT_UTF16,
    classify_answer,
    cut_caption,
    parse_review_ack,
    plan_blocks,
    plan_items,
    review_id,
    review_outcome,
    utf16_len,
)


@dataclass(frozen=True)
class File:
    name: str
    size: int = 1000
    width: int | None = None
    height: int | None = None


def test_review_id_is_the_prefix_and_16_hex_of_sha1_of_target_type_work():
    digest = hashlib.sha1(b"bot1-illust-botefuku|illustration|12345").hexdigest()[:16]
    assert review_id("bot1-illust-botefuku", "illustration", "12345") == f"rv_{digest}"
    assert review_id("t", "novel", "9", "bot2") == "bot2_" + hashlib.sha1(b"t|novel|9").hexdigest()[:16]


@pytest.mark.parametrize("pages,sizes", [(23, [10, 10, 3]), (11, [10, 1]), (10, [10]), (1, [1]), (20, [10, 10])])
def test_blocks_are_filled_greedily(pages, sizes):
    blocks = plan_blocks(plan_items("illustration", [File(f"p{i}") for i in range(pages)], []))
    assert [len(b.items) for b in blocks] == sizes
    assert [b.method for b in blocks] == ["sendMediaGroup" if n > 1 else "sendPhoto" for n in sizes]


def test_a_page_over_sendphoto_limits_goes_as_its_preview_or_as_a_document_and_kinds_never_mix():
    files = [File("a"), File("big", size=11 * 1024 * 1024), File("tall", width=300, height=9_800), File("c")]
    previews = [File("a.p"), File("big.p", size=500_000), File("tall.p", size=20 * 1024 * 1024), File("c.p")]
    items = plan_items("illustration", files, previews)
    assert [(i.kind, i.file.name, i.note) for i in items] == [
        ("photo", "a", None), ("photo", "big.p", "preview"), ("document", "tall", "document"), ("photo", "c", None)]
    assert [[i.file.name for i in b.items] for b in plan_blocks(items)] == [["a", "big.p"], ["tall"], ["c"]]
    assert [i.kind for i in plan_items("novel", [File("n.txt")], [])] == ["document"]
    # no previews (or not one-to-one): a page over the limits is a document
    assert plan_items("illustration", [File("big", size=11 * 1024 * 1024)], [])[0].kind == "document"


@pytest.mark.parametrize("text", [
    "a" * 1023 + "😀",  # an astral character is two UTF-16 units: it does not fit
    "a" * 1022 + "e\u0301" + "tail",  # a letter and its combining accent stay together
    "a" * 1020 + "👩\u200d👩\u200d👧" + "x",  # a ZWJ family is one grapheme
    "a" * 1021 + "🇯🇵🇯🇵",  # flags are pairs of regional indicators
])
def test_a_caption_is_cut_to_1024_utf16_units_at_a_grapheme_boundary(text):
    cut = cut_caption(text)
    assert utf16_len(cut) <= CAPTION_LIMIT_UTF16 and text.startswith(cut)
    rest = text[len(cut):]
    assert not rest or rest[0] not in ("\u0301", "\u200d") and cut[-1:] != "\u200d"
    if "🇯🇵" in text:
        assert cut.count("\U0001F1EF") == cut.count("\U0001F1F5")  # never half a flag
    assert cut_caption("short") == "short"


def test_answers_are_classified_from_telegrams_structured_fields():
    ok = classify_answer(200, {"ok": True, "result": [{"message_id": 5}, {"message_id": 6}]}, chat="-100")
    assert ok.outcome == "ok" and [m["message_id"] for m in ok.messages] == [5, 6]
    assert classify_answer(200, {"ok": True, "result": True}, chat="-100").outcome == "ambiguous"
    wait = classify_answer(429, {"ok": False, "error_code": 429, "description": "x", "parameters": {"retry_after": 37}}, chat="-1")
    assert (wait.outcome, wait.retry_after_s) == ("retry", 37)
    blocked = classify_answer(403, {"ok": False, "error_code": 403, "description": "Forbidden: bot was blocked by the user"},
                              chat="-100123")
    assert blocked.outcome == "permanent" and "-100123" in blocked.detail
    # the description's words never decide: a 400 that mentions "retry" is still permanent
    assert classify_answer(400, {"ok": False, "error_code": 400, "description": "please retry later"}, chat="c").outcome == "permanent"
    assert classify_answer(502, "<html>bad gateway</html>", chat="c").outcome == "ambiguous"
    moved = classify_answer(400, {"ok": False, "error_code": 400, "description": "group upgraded",
                                  "parameters": {"migrate_to_chat_id": -100777}}, chat="-5")
    assert moved.outcome == "permanent" and "-100777" in moved.detail


def test_the_review_ack():
    assert parse_review_ack(review_outcome("accepted", "rv_1")).kind == "accepted"
    replay = parse_review_ack(review_outcome("replay", "rv_1"))
    assert (replay.kind, replay.remote_status) == ("idempotent_replay", "review_exists")
    retry = parse_review_ack(review_outcome("retry", "rv_1", error="429", retry_after_ms=37_000, progress={"blocks": []},
                                            clear_sending=True))
    assert (retry.kind, retry.retry_after_ms, retry.progress, retry.clear_sending) == (
        "retryable_failure", 37_000, {"blocks": []}, True)
    uncertain = parse_review_ack(review_outcome("uncertain", "rv_1", error="uncertain: x"))
    assert (uncertain.kind, uncertain.remote_status) == ("permanent_failure", "uncertain")
    assert parse_review_ack({"nonsense": 1}).kind == "retryable_failure"


TEXT = ("[chapter:One]\nA [[rb:漢字 > かんじ]] and [[jumpuri:a link > https://example.com/a]b]]\n"
        "[uploadedimage:77] [pixivimage:123-2] [pixivimage:999]\n[newpage]\n*stars* # not a heading\n- not a list")


def test_the_scanner_gives_the_text_back_and_keeps_urls_inside_markers_whole():
    markers = list(scan(TEXT))
    assert "".join(m.raw for m in markers) == TEXT
    (link,) = [m for m in markers if m.kind == "jumpuri"]
    assert link.value.endswith("https://example.com/a]b")


def test_inline_images_and_markdown():
    webview = {"images": {"77": {"urls": {"original": "https://i.pximg.net/novel/77.png"}}},
               "illusts": {"123-2": {"illust": {"images": {"medium": "https://i.pximg.net/c/123_p1.jpg"}}}}}
    found = inline_images(TEXT, webview)
    assert [(i.kind, i.key, i.url) for i in found] == [("uploadedimage", "77", "https://i.pximg.net/novel/77.png"),
                                                       ("pixivimage", "123-2", "https://i.pximg.net/c/123_p1.jpg"),
                                                       ("pixivimage", "999", None)]
    md = render_markdown(TEXT, "Title", {"[uploadedimage:77]": "n_77.png", "[pixivimage:123-2]": "n_123-2.jpg"})
    assert md.startswith("# Title\n\n## One\n")
    assert "漢字（かんじ）" in md and "[a link](https://example.com/a]b)" in md
    assert "![](images/n_77.png)" in md and "![](images/n_123-2.jpg)" in md
    assert "\\[pixivimage:999\\]" in md  # not downloaded: the marker stays, escaped as text
    assert "\n---\n" in md and "\\*stars\\* \\# not a heading" in md and "\\- not a list" in md
