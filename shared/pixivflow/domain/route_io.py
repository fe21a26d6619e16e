"""What one attempt on a delivery route takes and gives back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from .work import StoredFile


@dataclass(frozen=True)
class DeliveryResponse:
    status: int
    body: Any  # parsed JSON when the body was JSON, else the text
    text: str = ""
    note: str | None = None  # what the route did differently (a rich preview it could not publish)


@dataclass(frozen=True)
class DeliveryRequest:
    """One delivery attempt of an intent, as a route needs it."""

    route: str
    idempotency_key: str
    body: Mapping[str, Any]  # the ``kind: webhook`` JSON body: ids + the frozen intent payload
    payload: Mapping[str, Any]  # the frozen intent payload (work, context, per-target fields)
    artifact_key: str  # where the bound work's files are stored (ArtifactStore key)
    files: Sequence[StoredFile] = ()  # the stored files, as the intent recorded them
    guard: "SendGuard | None" = None  # only for routes that post in several calls (Telegram review)
    preview: Any = None  # the target's richNovelPreview block, for a novel (config.routes.RichNovelPreview)


@dataclass(frozen=True)
class SendGuard:
    """What a route that posts in several calls needs from the ledger so it never posts twice
    silently: the row's ``sending`` marker (set before the first post by a conditional
    write, cleared only by an attempt that saved what it posted), the progress an earlier attempt
    saved, whether an operator re-armed the row on purpose (``pixivflow outbox redrive``), and
    whether its cell ended while part of the review may be in the chat (``record_only``: the
    attempt posts nothing, it records what is there)."""

    started: bool  # the row is marked ``sending``: an attempt began posting and saved nothing
    progress: Mapping[str, Any] | None  # what earlier attempts posted and saved
    redriven: bool
    mark_sending: Callable[[], bool]  # the conditional write; False = the claim is no longer ours
    record_only: bool = False
