"""Fetch and store a cell's work: stream its files into the artifact store, each only when the
invocation's time left covers its worst case, resuming at the first missing file; apply the rules
that need the files (the AI metadata check, a novel's language)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import replace
from typing import Callable, ContextManager

from ..domain.errors import SourceError, TransientSourceError
from ..domain.language import detect as detect_language, verdict as language_verdict
from ..domain.selection import (
    has_ai_file_markers,
)
from ..domain.work import ArtifactFile, FileDownload, StoredFile, Work
from .assets import previews_for
from .cell_run import CellRun


class WorkFiltered(Exception):
    """A content-side rule excludes the work once its files are fetched (aiMetadataCheck, the
    novel language filter); the message is the skip's reason."""


AI_MARKED = "excluded by aiMetadataCheck: the first page carries AI generator metadata"


class DownloadIncomplete(Exception):
    """The invocation has no time left for the next file's worst case; the files stored so
    far stay, the cell keeps its binding and is handed back to its queue to resume there."""

    def __init__(self, stored: int, total: int) -> None:
        super().__init__(f"download_incomplete: {stored} of {total} files stored; the rest in the next invocation")
        self.stored = stored
        self.total = total


GUARD_SLACK_MS = 1_000  # what storing one file and recording it takes beyond its fetch
AI_CHECK_BYTES = 2 * 1024 * 1024  # PixivFlow scans the first 2 MiB of an image for generator markers


def store_work(run: CellRun, work: Work, prefix: str, *, resumed: bool, filters: bool = False) -> tuple[Work, list[StoredFile]]:
    """The work's files in the store, all of them (before any intent is recorded; the intents
    then record what was stored); the work as the content rules left it (a detected language).
    ``filters``: apply the content-side rules (a fresh candidate; raises ``WorkFiltered``).

    A ``resumed`` work (a bound cell run again: a hand-back, or a crash before its intents)
    re-uses every file an earlier run stored whole (the store checks each object's checksum), so
    a retry PUTs only what is missing and downloads nothing a streamed run already stored.
    A source that plans its files (the Pixiv source: an illustration's pages and the previews its
    routes send, a ugoira's zip, a novel's text, inline images, Markdown and cover) has them
    streamed one at a time, a resumed work starting at its first missing file; each starts only
    when the invocation's time left covers its worst case. Other sources hand over the whole work."""
    ctx, target = run.ctx, run.target
    previews = any(route.takes_previews for route in map(ctx.config.route, target.routes()) if route is not None)
    artifacts = ctx.artifacts
    have: dict[str, StoredFile] | None = None  # what an earlier run stored: listed once, for a planned work only

    def stored_files() -> dict[str, StoredFile]:
        nonlocal have
        if have is None:
            have = artifacts.partial(prefix) if resumed else {}
        return have

    def stored_bytes(stem: str) -> bytes | None:  # a resumed novel's text answer, read back, not asked again
        stored = stored_files()
        return artifacts.read(stored[stem]) if stem in stored else None

    planned = ctx.source.plan(work, previews=previews, stored=stored_bytes)
    if planned is None:
        files = ctx.source.download(work)
        if not files:
            raise SourceError("no files produced")
        if filters:
            work = _content_rules(run, work, files)
        extra = previews_for(ctx.source, ctx.log, work, files, target_id=target.id) if previews else []
        return work, ctx.artifacts.put(prefix, files + extra, reuse=resumed)
    if filters and work.work_type == "novel":
        work = _language_rule(run, work, _novel_text(planned))  # on the text in hand, before anything is stored
    return work, _stream_planned(run, work, prefix, planned, stored_files(), filters=filters)


def _stream_planned(run: CellRun, work: Work, prefix: str, planned: Sequence[FileDownload], have: Mapping[str, StoredFile], *,
                    filters: bool) -> list[StoredFile]:
    """Store a planned work's files one at a time, in plan order, resuming after what ``have`` holds
    (an earlier run's files); raises ``DownloadIncomplete`` before a file the invocation's time left
    cannot cover, and ``WorkFiltered`` when the first page carries AI generator metadata."""
    ctx, target, artifacts = run.ctx, run.target, run.ctx.artifacts
    out: list[StoredFile] = []
    kept: list[StoredFile] = []  # transient files: deleted once the work's own files are all stored
    names: dict[str, str] = {}  # a file's stem -> its stored name (a preview's name and a Markdown follow them)
    total = sum(1 for f in planned if not f.transient)
    # Files are stored in plan order: an optional one missing before a stored one was left out by
    # the invocation that stored the later ones (a novel's Markdown was made without it), so it
    # stays out rather than be asked for again (it would not be in that Markdown).
    last_stored = max((i for i, f in enumerate(planned) if f.pairs_with is None and f.stem in have), default=-1)
    no_previews = False
    for index, planned_file in enumerate(planned):
        page = planned_file.pairs_with
        if page is not None and (no_previews or page not in names):
            continue
        stem = planned_file.stem if page is None else f"{names[page]}.preview"
        if stem in have:
            # Stored by an earlier invocation: resume after it. What S3 metadata could not carry
            # (a ugoira's frame delays, over its 2 KB) comes from the plan.
            found = replace(have[stem], meta={**dict(planned_file.meta), **dict(have[stem].meta)})
            (kept if planned_file.transient else out).append(found)
            names[planned_file.stem] = have[stem].name
            continue
        if planned_file.optional and index < last_stored:
            continue
        content = planned_file.render(names) if planned_file.render is not None else planned_file.content
        if planned_file.render is not None and content is None:
            continue  # the work has no such file (a novel's Markdown when no inline image was stored)
        if not _file_fits(run, planned_file.worst_case_ms):
            raise DownloadIncomplete(len(out), total)
        check = filters and run.target.aiMetadataCheck and work.work_type == "illustration" and index == 0
        head = bytearray()
        describe = planned_file.describe if page is None else _after_name(names[page], planned_file.describe)
        try:
            with _opened(planned_file, content) as (chunks, header_type):
                stored = artifacts.put_stream(prefix, _watched(chunks, head if check else None), describe,
                                              header_type=header_type, role=planned_file.role, meta=planned_file.meta)
        except SourceError as exc:
            if planned_file.optional and exc.status == 404 and not exc.retryable:
                # Pixiv no longer has it (a novel's cover or inline image): the work goes without
                # it, the Markdown keeps its marker (as PixivFlow does). Asked again on a resume.
                ctx.log("info", "a file the work can go without is not on Pixiv; left out", event="artifacts.file_left_out",
                        work_id=work.work_id, target_id=target.id, file=stem, error=str(exc)[:200])
                continue
            if page is None or isinstance(exc, TransientSourceError):
                raise  # a page, or a preview the retry may get: the cell resumes here
            out = _drop_previews(run, work, prefix, out, exc)
            no_previews = True
            continue
        (kept if planned_file.transient else out).append(stored)
        names[planned_file.stem] = stored.name
        if check and has_ai_file_markers(bytes(head)):
            ctx.artifacts.delete(prefix)
            raise WorkFiltered(AI_MARKED)
        run.heartbeat()
    if kept:
        ctx.artifacts.delete(prefix, kept)
    return out


def _opened(planned_file: FileDownload, content: bytes | None) -> ContextManager[tuple[Iterator[bytes], str]]:
    """A planned file's chunks: the bytes in hand (a novel's text, its Markdown), else the source's stream."""
    if content is not None:
        return nullcontext((iter((content,)), ""))
    assert planned_file.open is not None  # a fetched file: the source gives its stream
    return planned_file.open()


def _after_name(name: str, describe: Callable[..., tuple[str, str, int | None, int | None]] | None) -> Callable[
        [bytes, str], tuple[str, str, int | None, int | None]]:
    """A preview's describe: its page's stored name + what the source names (``.preview.jpg``)."""
    assert describe is not None

    def named(head: bytes, header_type: str) -> tuple[str, str, int | None, int | None]:
        suffix, content_type, width, height = describe(head, header_type)
        return f"{name}{suffix}", content_type, width, height
    return named


def _drop_previews(run: CellRun, work: Work, prefix: str, out: list[StoredFile], exc: SourceError) -> list[StoredFile]:
    """All previews or none (a receiver refuses previews that do not pair one-to-one with the
    pages; assets.previews_for's rule): a preview Pixiv does not have drops those stored so far."""
    stored = [f for f in out if f.role == "preview"]
    if stored:
        run.ctx.artifacts.delete(prefix, stored)
    run.ctx.log("warning", "previews could not be fetched; the work is delivered without them", event="artifacts.no_previews",
                work_id=work.work_id, target_id=run.target.id, error=str(exc)[:300])
    return [f for f in out if f.role != "preview"]


def _content_rules(run: CellRun, work: Work, files: list[ArtifactFile]) -> Work:
    """aiMetadataCheck and the novel language filter on the fetched files."""
    target = run.target
    if target.aiMetadataCheck and work.work_type == "illustration" and files and has_ai_file_markers(files[0].content):
        raise WorkFiltered(AI_MARKED)
    if work.work_type == "novel":
        work = _language_rule(run, work, _novel_text(files))
    return work


def _language_rule(run: CellRun, work: Work, text: str) -> Work:
    """The novel language filter on the novel's text, and ``{{language}}``: a novel's language is
    detected once, here, whenever ``detectLanguage`` is on (PixivFlow's default), filter or not, and
    kept on the work, so every route renders the same label (an illustration has none)."""
    target = run.target
    found = None
    if target.languageFilter:
        verdict = language_verdict(work.work_id, work.title, text, target.languageFilter,
                                   strict=target.strictLanguageFilter, detect_language=target.detectLanguage)
        if not verdict.keep:
            raise WorkFiltered(str(verdict.reason))
        found = verdict.detected
    elif target.detectLanguage:
        found = detect_language(work.title, text)
    if found is not None:
        work = replace(work, raw={**dict(work.raw or {}), "language": found.label})
    return work


def _watched(chunks: Iterable[bytes], head: bytearray | None) -> Iterator[bytes]:
    for chunk in chunks:
        if head is not None and len(head) < AI_CHECK_BYTES:
            head += chunk[: AI_CHECK_BYTES - len(head)]
        yield chunk


def _file_fits(run: CellRun, worst_case_ms: int) -> bool:
    """Start a file only when the time left covers its worst case plus a second. A file
    whose worst case no invocation could cover (more than this invocation's whole budget, both
    read from the Lambda context) is started anyway: waiting would never help."""
    if run.time_left is None:
        return True
    need = worst_case_ms + GUARD_SLACK_MS
    return (run.time_budget is not None and need > run.time_budget) or run.time_left() >= need


def _novel_text(files: Sequence[ArtifactFile | FileDownload]) -> str:
    """The novel's body: the fetched text file (or the planned one, held whole)."""
    for file in files:
        if file.role == "text" and file.content is not None:
            return bytes(file.content).decode("utf-8", "replace")
    return ""
