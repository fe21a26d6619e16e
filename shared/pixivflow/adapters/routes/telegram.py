"""PixivFlow's Telegram review route on the wire.

One attempt:

1. pre-flight ``GET <controlPlaneUrl>/reviews/<reviewId>``: 200 = already posted, nothing is
   sent (``idempotent_replay``); 404 = go on; anything else = retry later, nothing posted;
2. a row found ``sending`` (an earlier attempt began posting and saved nothing) with no review
   record is recorded ``uncertain`` at the control plane and dead-lettered: it is never posted
   again by itself (``pixivflow outbox redrive`` re-sends on purpose); so is a row whose cell
   ended while what earlier attempts posted was still unrecorded (``SendGuard.record_only``);
3. otherwise the row is marked ``sending`` in the ledger (a conditional write) before the first
   Bot API call, then the media go in blocks of at most 10 of one kind (the caption on the last
   item), then the control card with the approve/reject keyboard;
4. ``POST <controlPlaneUrl>/reviews`` records the message ids; ``accepted`` only when every
   call returned ``ok`` and the record was stored.

Better than PixivFlow where its code loses work: a definitive refusal (429, an unreachable
Telegram before any byte was sent, the control plane down after the posts) saves what was
posted on the row and the next attempt resumes after it (a 429 at Telegram's ``retry_after``);
failures are classified from Telegram's structured answer; the bot token, which is part of the
Bot API's URL path, is scrubbed from every text that leaves this module, and from httpx's own
request log lines.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from typing import Any, Callable, Iterator, Mapping, Sequence

from ...domain.errors import ConfigError
from ...domain.review import (
    CONTROL_CARD,
    BotAnswer,
    MediaBlock,
    classify_answer,
    cut_caption,
    keyboard,
    message_facts,
    plan_blocks,
    plan_items,
    review_id,
    review_outcome,
)
from ...domain.templates import render, template_variables
from ...domain.route_io import DeliveryRequest, DeliveryResponse
from ...domain.work import StoredFile
from ..secret_refs import Expander
from . import multipart
from .http import Http, RouteTransportError, checked_url

DEFAULT_API_BASE = "https://api.telegram.org"
API_BASE_ENV = "TELEGRAM_API_BASE"  # PixivFlow's own variable: how tests reach the fake
# One attempt's posts must end well inside the deliver function's 60 s and the 120 s claim: past
# this budget no new call starts, what was posted is saved and the next attempt resumes after it.
ATTEMPT_BUDGET_S = 45.0
_TOKEN_IN_PATH = re.compile(r"/bot\d+:[A-Za-z0-9_-]+")
_REDACTED = "/bot<redacted>"
PHOTO_ROLES = ("original",)
FILE_ROLES = multipart.FILE_ROLES


def scrub_token(text: str) -> str:
    """Every ``/bot<token>`` in ``text`` redacted (the Bot API's URLs carry the token)."""
    return _TOKEN_IN_PATH.sub(_REDACTED, text)


class _TokenFilter(logging.Filter):
    """httpx logs every request URL at INFO ("HTTP Request: POST https://api.telegram.org/bot…"),
    and on Lambda the root logger is at the function's log level: redact before it is written."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(a if isinstance(a, (int, float)) else scrub_token(str(a)) for a in record.args)
        if isinstance(record.msg, str):
            record.msg = scrub_token(record.msg)
        return True


for _name in ("httpx", "httpcore"):
    _logger = logging.getLogger(_name)
    if not any(isinstance(f, _TokenFilter) for f in _logger.filters):
        _logger.addFilter(_TokenFilter())


class _Stop(Exception):
    """Ends the attempt with its outcome body."""

    def __init__(self, body: dict[str, Any]) -> None:
        super().__init__(body["review"].get("error") or body["review"]["outcome"])
        self.body = body


class TelegramReview:
    """Sends one attempt of a ``type: telegram`` route (see the module doc)."""

    def __init__(self, http: Http, lookup: Callable[[str], str | None], stored: Callable[[DeliveryRequest], list[StoredFile]],
                 open_file: Callable[[StoredFile], Iterator[bytes]], *, monotonic: Callable[[], float] = time.monotonic,
                 environ: Mapping[str, str] | None = None) -> None:
        self._http = http
        self._lookup = lookup
        self._stored = stored
        self._open = open_file
        self._monotonic = monotonic
        self._environ = environ

    def deliver(self, request: DeliveryRequest, config: Any) -> DeliveryResponse:
        attempt = _Attempt(self, request, config)
        try:
            body = attempt.run()
        except _Stop as stop:
            body = stop.body
        return DeliveryResponse(status=200, body=body, text=attempt.scrub(json.dumps(body, ensure_ascii=False))[:2000])

    def api_base(self) -> str:
        environ = self._environ if self._environ is not None else os.environ
        return (environ.get(API_BASE_ENV) or DEFAULT_API_BASE).rstrip("/")


class _Attempt:
    def __init__(self, route: TelegramReview, request: DeliveryRequest, config: Any) -> None:
        self.route, self.request, self.config = route, request, config
        self.expand = Expander(route._lookup, where=f"route {request.route}")
        context = dict(request.payload.get("context") or {})
        self.context = context
        self.work_type = str(context.get("type") or (request.payload.get("work") or {}).get("work_type") or "illustration")
        self.work_id = str(context.get("pixivId") or (request.payload.get("work") or {}).get("work_id") or "")
        self.target_id = str(context.get("targetId") or "")
        self.rid = review_id(self.target_id, self.work_type, self.work_id, config.reviewIdPrefix)
        self.chat = str(config.chatId)
        self.token = ""
        self.deadline = route._monotonic() + ATTEMPT_BUDGET_S
        guard = request.guard
        self.progress: dict[str, Any] = dict(guard.progress or {}) if guard is not None else {}
        self.progress.setdefault("blocks", [])
        self.marked = False

    # -- text hygiene ----------------------------------------------------------------------------
    def scrub(self, text: str) -> str:
        text = scrub_token(self.expand.scrub(text))
        return text.replace(self.token, "<bot-token>") if len(self.token) >= 8 else text

    def stop(self, outcome: str, error: str | None = None, **kw: Any) -> _Stop:
        return _Stop(review_outcome(outcome, self.rid, error=self.scrub(error) if error else None, **kw))

    def retry(self, error: str, *, after_s: int | None = None) -> _Stop:
        """A definitive refusal: nothing unknown was posted. When this attempt marked the row, what
        was posted is saved and the marker dropped, so the next attempt resumes after it; a row
        with nothing in the chat is left without progress (``Intent.began_posting`` stays false,
        so a consumer's cancel may cancel it outright)."""
        saved = self.progress if self.marked and self.in_chat() else None
        return self.stop("retry", error, retry_after_ms=None if after_s is None else after_s * 1000,
                         progress=saved, clear_sending=self.marked)

    def in_chat(self) -> bool:
        """Whether any part of this review was posted (by this attempt or saved by earlier ones)."""
        return bool(self.progress["blocks"]) or self.progress.get("control_message_id") is not None

    # -- the attempt -----------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        config, guard = self.config, self.request.guard
        if guard is None:
            raise ConfigError(f"route {self.request.route}: a Telegram review needs the ledger's send guard")
        self.token = self.expand(config.botToken)
        self.cp = checked_url(self.expand(config.controlPlaneUrl).rstrip("/"), "controlPlaneUrl", self.request.route)
        self.cp_token = self.expand(config.controlPlaneToken)
        base = checked_url(self.route.api_base(), API_BASE_ENV, self.request.route)
        self.api = f"{base}/bot{self.token}"
        existing = self.preflight()
        if existing is not None:
            again = guard.redriven and not guard.started and existing.get("status") == "uncertain"
            if not again and existing.get("status") == "uncertain":
                # Recorded uncertain (this row's earlier attempt, or another slot's cell of the same
                # work: the review id names target, type and work only): maybe part of it is in the
                # chat, maybe none. Not a delivery, and never posted again by itself.
                raise self.stop("uncertain", f"uncertain: review {self.rid} is recorded uncertain at the control plane "
                                             f"(an earlier attempt may have posted part of it). Operator: look for it in "
                                             f"chat {self.chat}; `pixivflow outbox redrive <key>` re-sends it on purpose")
            if not again:  # posted already: never post it again by itself
                return review_outcome("replay", self.rid)
        if guard.started:
            self.record_uncertain("an earlier attempt began posting to Telegram and ended without saving what it posted")
        if guard.record_only:
            # The cell ended (a consumer's cancel) after earlier attempts posted part or all of the
            # review and before the control plane recorded it: post nothing more, record what is
            # in the chat (its message ids go with the record) so an operator can find it.
            self.record_uncertain("the cell ended before the review posted by an earlier attempt was recorded; "
                                  "nothing more is posted")
        if not guard.mark_sending():
            raise self.stop("retry", "the outbox claim was lost before the first post; nothing was posted")
        self.marked = True
        self.post_media()
        self.post_card()
        self.record("pending")
        return review_outcome("accepted", self.rid, progress=self.progress)

    def preflight(self) -> dict[str, Any] | None:
        url = f"{self.cp}/reviews/{self.rid}"
        try:
            answer = self.route._http.exchange("GET", url, headers=self.cp_headers(), content=None,
                                               timeout_ms=self.config.timeoutMs, scrub=self.scrub)
        except RouteTransportError as exc:
            raise self.stop("retry", f"control plane unreachable before posting; nothing posted ({exc})") from None
        if answer.status == 404:
            return None
        if answer.status == 200:
            return answer.body if isinstance(answer.body, dict) else {}
        raise self.stop("retry", f"control plane answered HTTP {answer.status} to the review lookup; nothing posted")

    def cp_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.cp_token}", "Accept": "application/json"}

    # -- Telegram calls --------------------------------------------------------------------------
    def files(self) -> tuple[list[StoredFile], list[StoredFile]]:
        stored = self.route._stored(self.request)
        main = [f for f in stored if f.role in FILE_ROLES]
        previews = [f for f in stored if f.role == multipart.PREVIEW_ROLE]
        if not main:
            raise self.stop("permanent", f"no deliverable file stored for work {self.work_id} (invalid payload)")
        return main, previews

    def caption(self) -> str:
        template = self.config.caption
        text = render(template, template_variables(self.context)) if template else str(self.context.get("title") or "")
        return cut_caption(text)

    def post_media(self) -> None:
        main, previews = self.files()
        blocks = plan_blocks(plan_items(self.work_type, main, previews))
        caption = self.caption()
        done = len(self.progress["blocks"])
        for index, block in enumerate(blocks):
            if index < done:
                continue  # posted and saved by an earlier attempt
            self.before_call()
            last = index == len(blocks) - 1
            answer = self.call(block.method, *self.block_request(block, caption if last else None))
            ids, file_ids, group = message_facts(answer.messages)
            self.progress["blocks"].append({"message_ids": ids, "file_ids": file_ids, "media_group_id": group})

    def block_request(self, block: MediaBlock, caption: str | None) -> tuple[list[tuple[str, str]], list[tuple[str, StoredFile]]]:
        fields: list[tuple[str, str]] = [("chat_id", self.chat)]
        if self.config.publishThreadId is not None:
            fields.append(("message_thread_id", str(self.config.publishThreadId)))  # PixivFlow applies it here too
        if block.method == "sendMediaGroup":
            media = []
            for i, item in enumerate(block.items):
                entry: dict[str, Any] = {"type": item.kind, "media": f"attach://media{i}"}
                if caption and i == len(block.items) - 1:
                    entry["caption"] = caption
                media.append(entry)
            fields.append(("media", json.dumps(media, ensure_ascii=False)))
            return fields, [(f"media{i}", item.file) for i, item in enumerate(block.items)]
        item = block.items[0]
        if caption:
            fields.append(("caption", caption))
        return fields, [(item.kind, item.file)]

    def post_card(self) -> None:
        if self.progress.get("control_message_id") is not None:
            return
        self.before_call()
        fields = [("chat_id", self.chat), ("text", CONTROL_CARD.format(review_id=self.rid)),
                  ("reply_markup", json.dumps(keyboard(self.rid), ensure_ascii=False))]
        if self.config.publishThreadId is not None:
            fields.append(("message_thread_id", str(self.config.publishThreadId)))
        answer = self.call("sendMessage", fields, [])
        self.progress["control_message_id"] = answer.messages[0]["message_id"]

    def before_call(self) -> None:
        if self.route._monotonic() > self.deadline:
            raise self.retry(f"the attempt's {ATTEMPT_BUDGET_S:.0f} s budget ran out between Telegram calls; "
                             "what was posted is saved and the next attempt continues after it")

    def call(self, method: str, fields: Sequence[tuple[str, str]], files: Sequence[tuple[str, StoredFile]]) -> BotAnswer:
        body = multipart.build(files, fields, self.route._open, boundary=None)
        headers = {"Content-Type": body.content_type, "Content-Length": str(body.length)}
        try:
            answer = self.route._http.exchange("POST", f"{self.api}/{method}", headers=headers, content=body.chunks(),
                                               timeout_ms=self.config.timeoutMs, scrub=self.scrub)
        except RouteTransportError as exc:
            if exc.unsent:
                raise self.retry(f"Telegram unreachable before {method} was sent ({exc})") from None
            self.record_uncertain(f"{method} to chat {self.chat} had no answer ({exc}); the post may or may not exist")
            raise AssertionError("unreachable")  # record_uncertain always raises
        verdict = classify_answer(answer.status, answer.body, chat=self.chat)
        if verdict.outcome == "ok":
            return verdict
        if verdict.outcome == "retry":
            raise self.retry(f"{method}: {verdict.detail}", after_s=verdict.retry_after_s)
        if verdict.outcome == "ambiguous":
            self.record_uncertain(f"{method}: {verdict.detail}")
        if self.in_chat():
            # part of the review is in the chat already: say so at the control plane, then stop
            self.record_uncertain(f"{method}: {verdict.detail}; part of the review was posted")
        raise self.stop("permanent", f"{method}: {verdict.detail}")

    # -- control plane records ---------------------------------------------------------------------
    def record(self, status: str, error: str | None = None) -> None:
        blocks = self.progress.get("blocks") or []
        media_ids = [i for b in blocks for i in b.get("message_ids") or []]
        file_ids = [i for b in blocks for i in b.get("file_ids") or []]
        group = next((b.get("media_group_id") for b in blocks if b.get("media_group_id")), None)
        document: dict[str, Any] = {
            "review_id": self.rid, "bot_id": self.config.botId, "chat_id": self.chat,
            "publish_chat_id": str(self.config.publishChatId), "slot_id": self.context.get("slotId"),
            "target_id": self.target_id, "work_id": self.work_id, "caption": self.caption(), "status": status,
        }
        if self.config.publishThreadId is not None:
            document["publish_thread_id"] = self.config.publishThreadId
        if status == "pending":
            document.update(media_message_ids=media_ids, control_message_id=self.progress.get("control_message_id"),
                            file_ids=file_ids, media_group_id=group)
        else:
            document["error"] = self.scrub(error or "")[:500]
            if media_ids:
                document["media_message_ids"] = media_ids
            if self.progress.get("control_message_id") is not None:  # where the operator finds the card
                document["control_message_id"] = self.progress["control_message_id"]
        raw = json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        headers = {**self.cp_headers(), "Content-Type": "application/json"}
        try:
            answer = self.route._http.exchange("POST", f"{self.cp}/reviews", headers=headers, content=raw,
                                               timeout_ms=self.config.timeoutMs, scrub=self.scrub)
            failure = None if 200 <= answer.status <= 299 else f"HTTP {answer.status}"
        except RouteTransportError as exc:
            failure = str(exc)
        if failure is None:
            return
        if status == "pending":
            # Everything is in the chat: only the record is missing. Save what was posted; the
            # next attempt's pre-flight finds no record and records it, never posting again.
            raise self.retry(f"the review was posted but the control plane did not record it ({failure}); "
                             "the record is retried, the post is not")
        raise self.stop("retry", f"could not record review {self.rid} as uncertain at the control plane ({failure})")

    def record_uncertain(self, why: str) -> None:
        """Record the review ``uncertain`` and dead-letter the row with an operator hint. The row
        keeps its ``sending`` marker, so no later attempt posts it again by itself."""
        self.record("uncertain", why)
        raise self.stop("uncertain", f"uncertain: {why}. Operator: look for review {self.rid} in chat {self.chat}; "
                                     "`pixivflow outbox redrive <key>` re-sends it on purpose")


__all__ = ["API_BASE_ENV", "DEFAULT_API_BASE", "TelegramReview", "scrub_token"]
