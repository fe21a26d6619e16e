"""The Telegram review route's pure rules.

PixivFlow's ``type: telegram`` route posts a work to a review chat through the Bot API, adds a
control card with approve/reject buttons, and records the review at a control plane, which
publishes on approval. Everything here is decided without I/O:

* the review id (deterministic per target and work, not per slot);
* the media plan: blocks of at most 10 files of one kind, filled greedily (23 -> 10+10+3), a
  group of 2-10 as ``sendMediaGroup``, a single file as ``sendPhoto``/``sendDocument``; a page
  over ``sendPhoto``'s limits goes as its preview, or as a document when it has none;
* the caption: at most 1,024 UTF-16 code units (as Telegram counts), cut at a grapheme
  boundary, riding on the last media item;
* the control card and its keyboard;
* the classification of one Bot API answer from its structured fields (``ok``,
  ``error_code``, ``description``, ``parameters``), never from the text of our own messages.
"""

from __future__ import annotations

import hashlib
import unicodedata
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

if TYPE_CHECKING:  # for the annotation only: parse_review_ack imports the ACK model when called
    from .ack import DeliveryAck

DEFAULT_REVIEW_ID_PREFIX = "rv"
MAX_GROUP = 10  # sendMediaGroup: 2-10 items
CAPTION_LIMIT_UTF16 = 1024  # caption: 0-1024 characters after entities parsing (counted in UTF-16)
PHOTO_MAX_BYTES = 10 * 1024 * 1024  # sendPhoto: at most 10 MB
PHOTO_MAX_SIDES = 10_000  # sendPhoto: width + height at most 10000
PHOTO_MAX_RATIO = 20  # sendPhoto: width/height ratio at most 20
DOCUMENT_MAX_BYTES = 50 * 1024 * 1024  # multipart uploads by bots: 50 MB
CONTROL_CARD = "🧾 审核 {review_id}\n按钮只作用于这一条审核，决定后本条会更新。"  # PixivFlow's card text
APPROVE_LABEL, REJECT_LABEL = "✅ 发布", "❌ 拒绝"


def review_id(target_id: str, work_type: str, work_id: str, prefix: str = DEFAULT_REVIEW_ID_PREFIX) -> str:
    """``<prefix>_<first 16 hex of SHA-1 of "<targetId>|<type>|<pixivId>">``, as PixivFlow names a review."""
    digest = hashlib.sha1(f"{target_id}|{work_type}|{work_id}".encode("utf-8")).hexdigest()
    return f"{prefix or DEFAULT_REVIEW_ID_PREFIX}_{digest[:16]}"


def keyboard(rid: str) -> dict[str, Any]:
    """One row: approve and reject, each carrying ``review:<id>:<decision>``."""
    return {"inline_keyboard": [[{"text": APPROVE_LABEL, "callback_data": f"review:{rid}:approve"},
                                 {"text": REJECT_LABEL, "callback_data": f"review:{rid}:reject"}]]}


# -- caption ---------------------------------------------------------------------------------------


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _extends(ch: str) -> bool:
    """A code point that belongs to the cluster before it (UAX #29 Extend/SpacingMark/ZWJ, the
    variation selectors, emoji modifiers and tag characters: the cases captions meet)."""
    code = ord(ch)
    if code == 0x200D or 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF or 0xE0020 <= code <= 0xE007F:
        return True
    if 0x1F3FB <= code <= 0x1F3FF or code == 0x20E3:
        return True
    return unicodedata.category(ch) in ("Mn", "Me", "Mc")


def _regional(ch: str) -> bool:
    return 0x1F1E6 <= ord(ch) <= 0x1F1FF


def _boundary(text: str, i: int) -> bool:
    """Whether a cut between ``text[i-1]`` and ``text[i]`` keeps every grapheme whole."""
    if i <= 0 or i >= len(text):
        return True
    before, after = text[i - 1], text[i]
    if before == "\r" and after == "\n":
        return False
    if _extends(after) or before == "\u200d":  # a ZWJ glues the next pictograph on
        return False
    if _regional(before) and _regional(after):
        run = 0
        j = i - 1
        while j >= 0 and _regional(text[j]):
            run += 1
            j -= 1
        return run % 2 == 0  # flags are pairs: cut only between two whole pairs
    # Hangul syllable sequences (L, V, T jamo)
    if unicodedata.name(before, "").startswith("HANGUL") and unicodedata.name(after, "").startswith("HANGUL JUNGSEONG"):
        return False
    return True


def cut_caption(text: str, limit: int = CAPTION_LIMIT_UTF16) -> str:
    """``text`` cut to at most ``limit`` UTF-16 code units at a grapheme boundary (never half an
    emoji, a flag or a letter with its accent)."""
    if utf16_len(text) <= limit:
        return text
    used = 0
    end = 0
    for i, ch in enumerate(text):
        size = 2 if ord(ch) > 0xFFFF else 1
        if used + size > limit:
            end = i
            break
        used += size
    while end > 0 and not _boundary(text, end):
        end -= 1
    return text[:end]


# -- the media plan -------------------------------------------------------------------------------


@dataclass(frozen=True)
class MediaItem:
    """One file as Telegram will receive it: ``photo`` or ``document``, and which stored file."""

    kind: str  # photo | document
    file: Any  # the stored file (a domain.work.StoredFile), opaque here
    note: str | None = None  # why it is not the original as a photo ("preview", "document")


@dataclass(frozen=True)
class MediaBlock:
    items: tuple[MediaItem, ...]

    @property
    def method(self) -> str:
        if len(self.items) >= 2:
            return "sendMediaGroup"
        return "sendPhoto" if self.items[0].kind == "photo" else "sendDocument"


def photo_fits(size: int, width: int | None, height: int | None) -> bool:
    """``sendPhoto``'s limits: 10 MB, width + height <= 10000, ratio <= 20 (unknown sides pass)."""
    if size > PHOTO_MAX_BYTES:
        return False
    if width and height:
        if width + height > PHOTO_MAX_SIDES:
            return False
        if max(width, height) / max(1, min(width, height)) > PHOTO_MAX_RATIO:
            return False
    return True


def plan_items(work_type: str, files: Sequence[Any], previews: Sequence[Any]) -> list[MediaItem]:
    """Photos for an illustration's pages, documents for a novel's files. A page over
    sendPhoto's limits goes as its stored preview (Pixiv's ``large`` image) when that fits, else
    as a document (originals up to 50 MB still reach the reviewers)."""
    if work_type == "novel":
        return [MediaItem("document", f) for f in files]
    by_page = {i: p for i, p in enumerate(previews)} if len(previews) == len(files) else {}
    items: list[MediaItem] = []
    for i, f in enumerate(files):
        if photo_fits(f.size, f.width, f.height):
            items.append(MediaItem("photo", f))
            continue
        preview = by_page.get(i)
        if preview is not None and photo_fits(preview.size, preview.width, preview.height):
            items.append(MediaItem("photo", preview, note="preview"))
        else:
            items.append(MediaItem("document", f, note="document"))
    return items


def plan_blocks(items: Sequence[MediaItem]) -> list[MediaBlock]:
    """Blocks of at most 10 items of ONE kind, in page order, filled greedily (Telegram groups
    documents only with documents): 23 photos -> 10 + 10 + 3, 11 -> 10 + 1."""
    blocks: list[MediaBlock] = []
    current: list[MediaItem] = []
    for item in items:
        if current and (len(current) == MAX_GROUP or current[0].kind != item.kind):
            blocks.append(MediaBlock(tuple(current)))
            current = []
        current.append(item)
    if current:
        blocks.append(MediaBlock(tuple(current)))
    return blocks


# -- one Bot API answer -----------------------------------------------------------------------------


@dataclass(frozen=True)
class BotAnswer:
    """What one Bot API call came to, from Telegram's structured answer (never from text)."""

    outcome: str  # ok | retry | permanent | ambiguous
    messages: tuple[dict[str, Any], ...] = ()
    error_code: int | None = None
    description: str | None = None
    retry_after_s: int | None = None
    detail: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def classify_answer(status: int, body: Any, *, chat: str) -> BotAnswer:
    """One Bot API answer (``{ok, result}`` or ``{ok: false, error_code, description,
    parameters}``). ``ok`` with message ids is ``ok``; ``ok`` without them is ``ambiguous`` (the
    post may exist); 429 is ``retry`` after ``parameters.retry_after``; 5xx is ``ambiguous`` (the
    request reached Telegram, the post may exist); 403 (bot blocked, kicked, not a member) and
    400 (chat not found, bad request) are ``permanent`` naming the chat; a chat upgraded to a
    supergroup names its new id."""
    answer = body if isinstance(body, Mapping) else {}
    if answer.get("ok") is True:
        result = answer.get("result")
        messages = tuple(m for m in (result if isinstance(result, list) else [result])
                         if isinstance(m, Mapping) and isinstance(m.get("message_id"), int))
        if messages and (not isinstance(result, list) or len(messages) == len(result)):
            return BotAnswer("ok", messages=tuple(dict(m) for m in messages))
        return BotAnswer("ambiguous", detail="Telegram answered ok without message ids")
    code = answer.get("error_code")
    code = code if isinstance(code, int) and not isinstance(code, bool) else status
    description = str(answer.get("description") or "")[:300] or None
    params = given if isinstance(given := answer.get("parameters"), Mapping) else {}
    if code == 429:
        after = params.get("retry_after")
        after = after if isinstance(after, int) and not isinstance(after, bool) and after >= 0 else None
        return BotAnswer("retry", error_code=429, description=description, retry_after_s=after,
                         detail=f"Telegram rate limit (429) for chat {chat}" + (f"; retry after {after} s" if after is not None else ""))
    if isinstance(params.get("migrate_to_chat_id"), int):
        new_id = params["migrate_to_chat_id"]
        return BotAnswer("permanent", error_code=code, description=description, extra={"migrate_to_chat_id": new_id},
                         detail=f"chat {chat} became the supergroup {new_id}; set chatId to {new_id}")
    if code >= 500 or not isinstance(body, Mapping):
        return BotAnswer("ambiguous", error_code=code, description=description,
                         detail=f"Telegram HTTP {status} for chat {chat}: the post may or may not exist")
    if code == 403:
        return BotAnswer("permanent", error_code=403, description=description,
                         detail=f"the bot cannot post to chat {chat} (403: {description or 'forbidden'})")
    if code == 401 or code == 404:
        return BotAnswer("permanent", error_code=code, description=description,
                         detail=f"the bot token was refused ({code}: {description or 'unauthorized'})")
    return BotAnswer("permanent", error_code=code, description=description,
                     detail=f"Telegram refused the post to chat {chat} ({code}: {description or 'bad request'})")


def message_facts(messages: Sequence[Mapping[str, Any]]) -> tuple[list[int], list[str], str | None]:
    """(message ids, file ids of the largest photo size or the document, media_group_id)."""
    ids, files = [], []
    group = None
    for m in messages:
        ids.append(int(m["message_id"]))
        group = group or (str(m["media_group_id"]) if m.get("media_group_id") is not None else None)
        photo = m.get("photo")
        if isinstance(photo, list) and photo:
            last = photo[-1]
            if isinstance(last, Mapping) and last.get("file_id"):
                files.append(str(last["file_id"]))
        for key in ("document", "animation", "video"):
            doc = m.get(key)
            if isinstance(doc, Mapping) and doc.get("file_id"):
                files.append(str(doc["file_id"]))
    return ids, files, group


# -- one attempt's outcome -> the outbox ACK ----------------------------------------------------------

REVIEW_OUTCOMES = ("accepted", "replay", "retry", "permanent", "uncertain")
UNCERTAIN = "uncertain"  # the remote status of a review that may or may not be in the chat
REVIEW_EXISTS = "review_exists"  # the remote status of a review the pre-flight found recorded
# A row that ends with either status names a review that is (or may be) in the chat: its dead row
# keeps the status, and its work stays reserved on the route (services.delivery._dead).
IN_CHAT = (UNCERTAIN, REVIEW_EXISTS)


def review_outcome(outcome: str, rid: str | None, *, error: str | None = None, retry_after_ms: int | None = None,
                   progress: Mapping[str, Any] | None = None, clear_sending: bool = False) -> dict[str, Any]:
    """What the Telegram adapter answers for one attempt (the body :func:`parse_review_ack` reads)."""
    assert outcome in REVIEW_OUTCOMES, outcome
    return {"review": {"outcome": outcome, "review_id": rid, "error": error, "retry_after_ms": retry_after_ms,
                       "progress": dict(progress) if progress is not None else None, "clear_sending": clear_sending}}


def parse_review_ack(body: Any) -> DeliveryAck:
    """The ACK of one Telegram review attempt: ``accepted`` (every call ok and the
    review recorded: remote status ``in_review``), ``idempotent_replay`` (the pre-flight found the
    review: ``review_exists``), a retry (at ``retry_after`` when Telegram said so), or a permanent
    failure; ``uncertain`` is permanent too: the row is dead-lettered, never posted again by
    itself (the operator hint says how to re-send on purpose)."""
    from .ack import AckKind, DeliveryAck  # the ACK model lives with the other routes' parsers

    review = body.get("review") if isinstance(body, Mapping) else None
    if not isinstance(review, Mapping) or review.get("outcome") not in REVIEW_OUTCOMES:
        return DeliveryAck(AckKind.RETRYABLE_FAILURE, None, error="internal_error: the Telegram route gave no outcome")
    outcome, rid, error = review["outcome"], review.get("review_id"), review.get("error")
    if outcome == "accepted":
        return DeliveryAck(AckKind.ACCEPTED, 200, remote_id=rid, remote_status="in_review")
    if outcome == "replay":
        return DeliveryAck(AckKind.IDEMPOTENT_REPLAY, 200, remote_id=rid, remote_status=REVIEW_EXISTS)
    if outcome == "retry":
        after = review.get("retry_after_ms")
        return DeliveryAck(AckKind.RETRYABLE_FAILURE, None, remote_id=rid, error=error,
                           retry_after_ms=after if isinstance(after, int) else None, progress=review.get("progress"),
                           clear_sending=bool(review.get("clear_sending")))
    return DeliveryAck(AckKind.PERMANENT_FAILURE, None, remote_id=rid,
                       remote_status=UNCERTAIN if outcome == UNCERTAIN else None, error=error)


__all__ = [
    "BotAnswer", "CAPTION_LIMIT_UTF16", "CONTROL_CARD", "DEFAULT_REVIEW_ID_PREFIX", "IN_CHAT", "MAX_GROUP", "REVIEW_EXISTS", "UNCERTAIN", "MediaBlock", "MediaItem",
    "classify_answer", "cut_caption", "parse_review_ack", "review_outcome", "keyboard", "message_facts", "photo_fits", "plan_blocks", "plan_items", "review_id",
    "utf16_len",
]
