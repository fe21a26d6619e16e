"""A ``mode: topic`` target's selection, as PixivFlow's topic mode makes it.

The rules are ``pixivflow.domain.topic``'s; this module sends the requests and keeps the state:

* the topic day is Japan's, taken at the slot's occurrence (a retry of the same slot means the
  same day); ``noMatchPolicy.lookbackDays`` adds the days before it, walked one at a time:
  illustrations always (PixivFlow's handleTopicWithLookback), novels when a ``languageFilter`` is
  set; a day is a full selection and scan, and the walk stops at the first day that delivers;
* the tag space comes from the ledger's cache (fresh for ``cacheDays``), else from three requests
  (autocomplete, a seed sample, a background sample) and is stored with a conditional put; a
  failing discovery falls back to the stale space, else to the seed alone (never an error);
* each space tag's day search is one step. After each step the progress may be checkpointed on
  the cell (a conditional write by the lease owner); when the invocation's selection budget is
  spent the checkpoint is written and the cell is handed to the next invocation
  (``SelectionSuspended``), which resumes at the next (day, tag).

The checkpoint keeps a compact entry per collected work (id, popularity, gate score, date). A
work restored from a checkpoint is a *light* work; it is fetched whole (``get_work``) only when the
scan reaches it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

from ..domain.errors import FatalSourceError, PaginationError, SourceError, TransientSourceError
from ..domain.outcomes import CandidateScan, CandidateSupply, TargetOutcome
from ..domain.reasons import reason_of
from ..domain.scan import merge_scans, no_candidate_reason
from ..domain.selection import AI_GENERATED, DATE_OUT_OF_RANGE, Selection, rejection
from ..domain.topic import (BACKGROUND_SAMPLE, BACKGROUND_WORD, BELOW_METADATA_SCORE, BEYOND_POOL, DAY_SEARCH_MAX_COLLECT,
                            DUPLICATE_ACROSS_TAGS, DayProgress, Entry,
                            before_day, cache_key, checkpoint_fingerprint, lookback_days, metadata_score, on_day,
                            pool_size, popularity, rank, score_tags, space_from_doc, space_to_doc,
                            tag_space, topic_day)
from ..domain.work import SearchRequest, Work
from ..ports import TargetSettings

DAY_MS = 86_400_000
# The executor's Lambda timeout is 60 s (template.yaml). Selection hands over after 30 s, leaving
# the rest for the scan's downloads and the writes; a checkpoint is also written at least every
# 10 s of selection, so a Lambda that dies mid-selection loses at most that much work.
SELECTION_BUDGET_MS = 30_000
CHECKPOINT_EVERY_MS = 10_000
LIGHT = "light"  # raw marker of a work restored from a checkpoint (fetched whole when attempted)


class SelectionSuspended(Exception):
    """The selection's progress is on the cell; the next invocation continues it."""


def occurrence_ms(run: Any) -> int:
    slot = run.slot
    return int(slot.occurrence_at or slot.created_at or run.ctx.now())


def topic_days(target: TargetSettings, now_ms: int) -> list[str]:
    base = topic_day(target.date, now_ms)
    lookback = target.noMatchPolicy.lookbackDays
    if target.type == "novel" and not target.languageFilter:
        lookback = 0  # PixivFlow's novel handler walks back only with a language filter
    return lookback_days(base, lookback)


class TopicRun:
    def __init__(self, run: Any, select_fn: Callable[[Any, Selection], TargetOutcome]) -> None:
        self.run = run
        self.ctx = run.ctx
        self.target = run.target
        self.select_fn = select_fn
        self.topic = (self.target.topic or self.target.tag or "").strip()
        self.options = self.target.topicDiscovery
        self.collect = self.target.candidateCollection
        self.criteria = replace(self.target.criteria(), r18=self.options.includeR18, start_date=None, end_date=None)
        self.started = self.ctx.now()
        self.last_saved = self.started
        self.days = topic_days(self.target, occurrence_ms(run))
        self.fingerprint = checkpoint_fingerprint(self.target.type, self.topic, self.days[0])
        self.works: dict[str, Work] = {}  # collected in THIS invocation: no second fetch needed
        self.space: list[Any] | None = None

    # -- checkpoint -------------------------------------------------------------------------
    def _restore(self) -> tuple[int, DayProgress | None, dict[str, Any]]:
        doc = self.run.cell.selection_checkpoint or {}
        if doc.get("fp") != self.fingerprint:
            return 0, None, {}
        index = int(doc.get("dayIndex") or 0)
        progress = DayProgress.from_doc(doc["progress"]) if isinstance(doc.get("progress"), dict) else None
        return index, progress, dict(doc.get("done") or {})

    def _save(self, index: int, progress: DayProgress | None, done: dict[str, Any]) -> None:
        now = self.ctx.now()
        doc = {"fp": self.fingerprint, "dayIndex": index, "progress": progress.to_doc() if progress else None,
               "done": done}
        if not self.ctx.leases.save_selection_checkpoint(self.run.slot.slot_id, self.target.id, self.run.owner,
                                                         now, doc):
            from .cell_run import LeaseLost  # the one exception the executor reads as "not mine any more"

            raise LeaseLost(f"lease on {self.run.slot.slot_id}/{self.target.id} was lost (checkpoint refused)")
        self.run.cell.selection_checkpoint = doc
        self.last_saved = now

    def _step_done(self, index: int, progress: DayProgress, done: dict[str, Any]) -> None:
        now = self.ctx.now()
        if now - self.started >= SELECTION_BUDGET_MS:
            self._save(index, progress, done)
            self.ctx.log("info", "topic selection checkpointed; the next invocation continues it",
                         event="topic.suspended", slot_id=self.run.slot.slot_id, target_id=self.target.id,
                         day=progress.day, next_tag=progress.next_tag)
            raise SelectionSuspended(f"{progress.day} tag {progress.next_tag}")
        if now - self.last_saved >= CHECKPOINT_EVERY_MS:
            self._save(index, progress, done)

    # -- requests ----------------------------------------------------------------------------
    def _request(self, tag: str, **extra: Any) -> SearchRequest:
        return SearchRequest(work_type=self.target.type, mode="topic", tag=tag, topic=self.topic, sort="date_desc",
                             include_r18=self.options.includeR18, **extra)

    def _sample(self, tag: str, count: int) -> list[Work]:
        out: list[Work] = []
        cursor = None
        while len(out) < count:
            self.run.heartbeat()
            page = self.ctx.source.search_page(self._request(tag), cursor)
            out.extend(page.items)
            cursor = page.next_cursor
            if not cursor or not page.items:
                break
        return out[:count]

    def _discover(self) -> list[Any]:
        """The tag space: cached, else resolved."""
        key = cache_key(self.target.type, self.topic)
        now = self.ctx.now()
        cached = self.ctx.topics.get_topic_space(key, now)
        if cached and not self.options.refresh and int(cached.get("freshUntil") or 0) > now:
            space = space_from_doc(cached["space"])
            self.ctx.log("info", "topic tag space from cache", event="topic.space_cached", topic=self.topic,
                         type=self.target.type, tags=len(space),
                         age_days=round((now - int(cached.get("resolvedAt") or now)) / DAY_MS, 2))
            return space
        source = self.ctx.source
        try:
            try:
                suggestions = list(source.autocomplete(self.topic))
            except FatalSourceError:
                raise
            except SourceError:
                suggestions = []  # a failed autocomplete counts as no suggestions
            seed = self._sample(self.topic, self.options.sampleWorks)
            try:
                background = self._sample(BACKGROUND_WORD[self.target.type], BACKGROUND_SAMPLE)
            except FatalSourceError:
                raise
            except (SourceError, PaginationError):
                background = []
        except FatalSourceError:
            raise
        except (SourceError, PaginationError) as exc:
            if cached:
                self.ctx.log("warning", "topic discovery failed; using the stale cached space",
                             event="topic.space_stale", topic=self.topic, error=str(exc)[:200])
                return space_from_doc(cached["space"])
            self.ctx.log("warning", "topic discovery failed with no cache; searching the seed alone",
                         event="topic.space_seed_only", topic=self.topic, error=str(exc)[:200])
            return tag_space(self.topic, [])
        space = tag_space(self.topic, score_tags(self.topic, suggestions, seed, background),
                          max_tags=self.options.maxTags, min_score=self.options.minScore)
        self.ctx.topics.put_topic_space(key, self.topic, self.target.type, space_to_doc(space), now,
                                        now + self.options.cacheDays * DAY_MS)
        self.ctx.log("info", "topic tag space resolved", event="topic.space_resolved", topic=self.topic,
                     type=self.target.type, tags=[s.tag for s in space], suggestions=len(suggestions),
                     sampled=len(seed), background=len(background))
        return space

    def _day_search(self, tag: str, day: str) -> list[Work]:
        """One tag's works of ``day``: newest first, at most 200 read, stop past the day's start,
        the newest ``maxPerTag`` of the day kept (TargetSearchRunner + TopicCollector)."""
        found: list[Work] = []
        cursor = None
        read = 0
        while read < DAY_SEARCH_MAX_COLLECT:
            self.run.heartbeat()
            page = self.ctx.source.search_page(self._request(tag, start_date=day, end_date=day), cursor)
            read += len(page.items)
            found.extend(page.items)
            cursor = page.next_cursor
            if not cursor or not page.items or any(before_day(w, day) for w in page.items):
                break
        return found

    # -- one day ------------------------------------------------------------------------------
    def _collect(self, index: int, progress: DayProgress, done: dict[str, Any]) -> None:
        if progress.space is None:
            # One space for every day of the walk (resolved, or read from the cache, once per run).
            self.space = self.space if self.space is not None else self._discover()
            progress.space = self.space
        tags = [s.tag for s in progress.space]
        while progress.next_tag < len(tags):
            if len(progress.entries) >= self.collect.maxCandidates:
                break
            tag = tags[progress.next_tag]
            try:
                works = self._day_search(tag, progress.day)
            except (FatalSourceError, PaginationError):
                raise
            except SourceError as exc:
                # PixivFlow counts a failing tag as empty. Here the day goes on with the tags that
                # answered and names the failed ones; a day no tag answered is an outage, never "no
                # new works" (docs/explanation/selection.md).
                works = []
                progress.failed[tag] = reason_of(exc.reason, str(exc))
                self.ctx.log("warning", "topic day search failed; the day goes on without this tag",
                             event="topic.tag_failed", tag=tag, day=progress.day, error=str(exc)[:200])
            progress.raw += len(works)
            day_works = [w for w in works if on_day(w, progress.day)]
            progress.off_day += len(works) - len(day_works)
            day_works.sort(key=lambda w: (w.create_date or "", w.work_id), reverse=True)
            for work in day_works[: self.collect.maxPerTag]:
                if progress.seen(work.work_id) or len(progress.entries) >= self.collect.maxCandidates:
                    continue
                code = rejection(work, self.criteria)  # restricted, R-18, AI, bookmarks, page count
                if code is not None:
                    progress.reject(work.work_id, code)
                    continue
                meta = metadata_score(work, progress.space, translated=self.options.matchTranslatedNames)
                progress.entries[work.work_id] = Entry(work.work_id, popularity(work), meta, work.create_date or "")
                self.works[work.work_id] = work
            progress.next_tag += 1
            self._step_done(index, progress, done)
        if tags and progress.next_tag >= len(tags) and all(tag in progress.failed for tag in tags):
            self._outage(index, progress, done)
        self.ctx.log("info", "topic day collected", event="topic.collected", topic=self.topic, day=progress.day,
                     tags=tags[: progress.next_tag], raw=progress.raw, deduped=len(progress.entries),
                     ai_excluded=progress.rejected.get(AI_GENERATED, 0), off_day=progress.off_day,
                     rejected=progress.rejected)

    def _outage(self, index: int, progress: DayProgress, done: dict[str, Any]) -> None:
        """Every tag search of the day failed: the source did not answer, so nothing can be said about
        the day. The day's progress is dropped (the retry searches every tag again) and the cell
        fails with the reason of the failures, retried like any outage of the source."""
        reasons = sorted(set(progress.failed.values()))
        self._save(index, None, done)
        raise TransientSourceError(f"{reasons[0]}: every tag search of topic {self.topic!r} on {progress.day} failed "
                                   f"({len(progress.failed)} tag(s): {', '.join(reasons)})", reason=reasons[0])

    def _candidates(self, progress: DayProgress) -> Selection:
        limit = max(1, self.target.effective_limit)
        ranked = rank(progress.entries.values(), min_meta=self.collect.minMetadataScore, fallback=limit)
        pool = pool_size(self.target.type, limit, language_filter=self.target.languageFilter,
                         language_candidate_limit=self.target.languageCandidateLimit)
        chosen = ranked[:pool]
        supply = CandidateSupply(fetched=progress.raw, selected=len(chosen),
                                 failed_queries=[f"{progress.day} {tag}" for tag in progress.failed])
        supply.reject(DATE_OUT_OF_RANGE, progress.off_day)
        for code, count in progress.rejected.items():
            supply.reject(code, count)
        repeated = progress.raw - progress.off_day - sum(progress.rejected.values()) - len(progress.entries)
        supply.reject(DUPLICATE_ACROSS_TAGS, max(0, repeated))
        supply.reject(BELOW_METADATA_SCORE, len(progress.entries) - len(ranked))
        supply.reject(BEYOND_POOL, len(ranked) - len(chosen))
        works = []
        for entry in chosen:
            work = self.works.get(entry.work_id) or Work(work_id=entry.work_id, work_type=self.target.type,
                                                         create_date=entry.created, raw={LIGHT: True})
            raw = dict(work.raw or {})
            raw.update({"ranking_date": progress.day, "topic_day": progress.day})
            works.append(replace(work, raw=raw))
        return Selection(works, supply)

    # -- the walk ----------------------------------------------------------------------------------
    def _wants_more(self, outcome: TargetOutcome) -> bool:
        """Illustrations stop at the first day that delivers; a multi-work novel cell with routes
        goes on until it holds ``limit`` works (PixivFlow's NovelTargetHandler)."""
        return (self.target.type == "novel" and outcome.kind == "delivery_pending" and not self.target.single_work
                and len(outcome.work_ids) < self.target.effective_limit)

    def run_days(self) -> TargetOutcome:
        start, restored, done = self._restore()
        total: CandidateScan | None = None
        checked: list[str] = list(done.get("checked") or [])
        for index in range(start, len(self.days)):
            day = self.days[index]
            progress = restored if (restored is not None and index == start and restored.day == day) else DayProgress(day)
            if index > start or restored is None:
                if index > 0:
                    self.ctx.log("info", "no matching work yet; checking fallback day", event="topic.lookback",
                                 target_id=self.target.id, day=day)
            self._collect(index, progress, {"checked": checked})
            outcome = self.select_fn(self.run, self._candidates(progress))
            scan = outcome.scan
            total = scan if total is None else (merge_scans(total, scan) if scan is not None else total)
            checked.append(day)
            if outcome.kind != "no_candidate":
                if total is not None and outcome.scan is not total:
                    outcome = replace(outcome, scan=total)
                if not self._wants_more(outcome) or index + 1 == len(self.days):
                    return outcome
                # Novels ask the next day for the remaining count, as PixivFlow does; the works
                # handed to delivery so far are the cell's held intents, which the next scan counts.
                self.ctx.log("info", "fewer novels than the limit; checking fallback day for the rest",
                             event="topic.lookback_remaining", target_id=self.target.id,
                             delivered=len(outcome.work_ids), limit=self.target.effective_limit)
            if index + 1 < len(self.days):
                self._save(index + 1, None, {"checked": checked})
        scan = total or CandidateScan(supply=CandidateSupply())
        if scan.attempted == 0 and not scan.skipped and self.target.languageFilter:
            reason = (f"No matching {self.target.languageFilter} novels found after checking "
                      f"{scan.supply.selected if scan.supply else 0} candidate(s) across {len(checked)} day(s): "
                      f"{', '.join(checked)}")
        else:
            reason = f"{no_candidate_reason(scan, None)} (checked {', '.join(checked)})"
        return TargetOutcome.no_candidate(reason, scan)


def run_topic(run: Any, select_fn: Callable[[Any, Selection], TargetOutcome]) -> TargetOutcome:
    return TopicRun(run, select_fn).run_days()

