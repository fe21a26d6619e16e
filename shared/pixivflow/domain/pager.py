"""The one search pager every work source goes through.

A source only knows how to return one page for a cursor. This module owns the rest:
how far to page (the over-fetch bound), the client-side date window, the guard that
refuses a pager which stops advancing, the final stable sort and the slice to the
target's limit. Keeping it in one place means the catalogue source and the Pixiv
App API source cannot drift apart.

Pages and works are read by attribute (``items`` / ``next_cursor``; ``work_id``,
``work_type``, ``create_date``, ``total_bookmarks``), so this module stays free of
the ports layer; ``pixivflow.ports.Page`` and ``Work`` fit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from typing import Any, Callable, Protocol, Sequence, TypeVar

from .errors import PaginationError

SORT_DATE_DESC = "date_desc"
SORT_DATE_ASC = "date_asc"
SORT_POPULAR_DESC = "popular_desc"
SORTS = frozenset({SORT_DATE_DESC, SORT_DATE_ASC, SORT_POPULAR_DESC})
# Sort values that keep the source's order (ranking lists are already ordered).
KEEP_SOURCE_ORDER = frozenset({"none", "source"})


class PageLike(Protocol):
    @property
    def items(self) -> Sequence[Any]: ...

    @property
    def next_cursor(self) -> str | None: ...


W = TypeVar("W")


def fetch_limit(limit: int | None, sort: str | None, has_date_filter: bool) -> int | None:
    """How many in-range items to gather before paging stops (``None``: no bound).

    Over-fetching leaves room for the candidates the scan will pass over. A missing or
    non-positive ``limit`` means no bound. Below 50 the bound is ``max(limit × k, 100)``,
    otherwise ``max(limit × k', 200)``; ``k``/``k'`` are 10/3 for ``popular_desc`` with a
    date filter (the date window can reject most of a popularity-ordered page) and 5/2
    otherwise.
    """
    if limit is None or isinstance(limit, bool) or limit <= 0:
        return None
    heavy = sort == SORT_POPULAR_DESC and has_date_filter
    if limit < 50:
        return max(limit * (10 if heavy else 5), 100)
    return max(limit * (3 if heavy else 2), 200)


# ------------------------------------------------------------------ dates


def _parse_bound(value: str) -> date | datetime:
    text = value.strip()
    if len(text) == 10:
        return date.fromisoformat(text)
    return _aware(datetime.fromisoformat(text.replace("Z", "+00:00")))


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def _parse_created(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    try:
        if len(text) == 10:
            return datetime.combine(date.fromisoformat(text), datetime.min.time(), timezone.utc)
        return _aware(datetime.fromisoformat(text.replace("Z", "+00:00")))
    except ValueError:
        return None


def _position(created: datetime, bound: date | datetime) -> int:
    """-1 when the work is before ``bound``, 0 when on it, 1 when after it.

    A date-only bound is compared with the calendar date written in the work's own
    ``create_date`` (Pixiv writes Japan time), so "2024-05-01" means that whole day.
    """
    if isinstance(bound, datetime):
        return (created > bound) - (created < bound)
    day = created.date()  # the calendar date in the offset the source wrote
    return (day > bound) - (day < bound)


_KEEP, _SKIP, _STOP = "keep", "skip", "stop"


def _date_decision(item: Any, sort: str | None, start: date | datetime | None, end: date | datetime | None) -> str:
    if start is None and end is None:
        return _KEEP
    created = _parse_created(getattr(item, "create_date", ""))
    if created is None:
        return _SKIP  # cannot prove it is inside the window; never ends the walk
    before_start = start is not None and _position(created, start) < 0
    after_end = end is not None and _position(created, end) > 0
    if sort == SORT_DATE_DESC:
        if before_start:
            return _STOP  # every later item is older still
        return _SKIP if after_end else _KEEP
    if sort == SORT_DATE_ASC:
        if after_end:
            return _STOP  # every later item is newer still
        return _SKIP if before_start else _KEEP
    return _SKIP if before_start or after_end else _KEEP


# ------------------------------------------------------------------- sort


def _created_key(item: Any) -> datetime:
    created = _parse_created(getattr(item, "create_date", ""))
    return created if created is not None else datetime.min.replace(tzinfo=timezone.utc)


def sort_works(items: Sequence[W], sort: str | None) -> list[W]:
    """Stable sort: ties keep the order the source returned them in."""
    if sort is None or sort in KEEP_SOURCE_ORDER:
        return list(items)
    if sort == SORT_DATE_DESC:
        return sorted(items, key=_created_key, reverse=True)
    if sort == SORT_DATE_ASC:
        return sorted(items, key=_created_key)
    if sort == SORT_POPULAR_DESC:
        return sorted(items, key=lambda w: int(getattr(w, "total_bookmarks", 0) or 0), reverse=True)
    raise ValueError(f"unknown sort {sort!r}")


# ------------------------------------------------------------------ walk

# Pixiv refuses an offset above 5000 (HTTP 400, ../notes): no real search can be read further,
# so no walk examines more than this many items, whatever its date window skips.
MAX_EXAMINED = 5000


class InvalidDateWindow(ValueError):
    """A bound that does not parse, or a start after the end: the search has no result."""


@dataclass
class Walk:
    """What one paged search returned: the in-window works in source order, and what it passed over."""

    items: list[Any] = field(default_factory=list)
    outside: list[Any] = field(default_factory=list)  # examined but outside the date window
    requests: int = 0
    stopped: bool = False  # a date_desc/date_asc walk left the window

    @property
    def examined(self) -> int:
        return len(self.items) + len(self.outside)


def parse_window(start_date: str | None, end_date: str | None) -> tuple[date | datetime | None, date | datetime | None]:
    """The parsed bounds; raises ``InvalidDateWindow`` for an unparsable or inverted window."""
    try:
        start = _parse_bound(start_date) if start_date else None
        end = _parse_bound(end_date) if end_date else None
    except ValueError as exc:
        raise InvalidDateWindow(f"unparsable date window {start_date!r}..{end_date!r}") from exc
    if start is not None and end is not None and _bounds_inverted(start, end):
        raise InvalidDateWindow(f"the date window {start_date}..{end_date} is empty (start after end)")
    return start, end


def walk(
    fetch_page: Callable[[str | None], PageLike],
    *,
    bound: int | None,
    order: str | None = SORT_DATE_DESC,
    start_date: str | None = None,
    end_date: str | None = None,
    max_examined: int | None = MAX_EXAMINED,
) -> Walk:
    """Page through one search until ``bound`` in-window works are gathered.

    ``order`` is the order the source returns items in: for ``date_desc`` an item older than
    the start ends the walk and a newer one than the end is skipped, ``date_asc`` mirrors it,
    any other order skips out-of-window items without stopping. Paging also ends when
    ``next_cursor`` is ``None`` or ``max_examined`` items were looked at. Items are
    de-duplicated by (type, id), the first kept; whole pages are taken, so ``items`` may pass
    the bound by less than a page. A cursor that repeats raises ``PaginationError``; a bad
    window raises ``InvalidDateWindow`` before anything is fetched.
    """
    start, end = parse_window(start_date, end_date)
    out = Walk()
    seen_ids: set[tuple[str, str]] = set()
    seen_cursors: set[str] = set()
    cursor: str | None = None
    while not out.stopped and (bound is None or len(out.items) < bound):
        if max_examined is not None and out.examined >= max_examined:
            break
        out.requests += 1
        page = fetch_page(cursor)
        next_cursor = page.next_cursor
        if next_cursor is not None:
            if next_cursor == cursor or next_cursor in seen_cursors:
                why = "equals the cursor just used" if next_cursor == cursor else "was already fetched in this search"
                raise PaginationError(
                    f"search pager did not advance: request {out.requests} returned next cursor "
                    f"{next_cursor!r}, which {why}"
                )
            seen_cursors.add(next_cursor)
        for item in page.items:
            identity = (str(getattr(item, "work_type", "")), str(getattr(item, "work_id", "")))
            if identity in seen_ids:
                continue
            seen_ids.add(identity)
            decision = _date_decision(item, order, start, end)
            if decision == _KEEP:
                out.items.append(item)
                continue
            out.outside.append(item)
            if decision == _STOP:
                out.stopped = True
                break
        if next_cursor is None:
            break
        cursor = next_cursor
    return out


# ------------------------------------------------------------------ collect


def collect(
    fetch_page: Callable[[str | None], PageLike],
    *,
    limit: int | None,
    sort: str | None = SORT_DATE_DESC,
    start_date: str | None = None,
    end_date: str | None = None,
    has_date_filter: bool = False,
    max_items: int | None = None,
) -> list[Any]:
    """Page through one search and return at most ``limit`` works.

    ``fetch_page(cursor)`` returns one page; the first call gets ``None`` and each later
    call the previous page's ``next_cursor``. Paging ends when ``next_cursor`` is
    ``None``, when a ``date_desc``/``date_asc`` walk leaves the date window, or once the
    gathered in-range items reach the over-fetch bound (``fetch_limit``; ``max_items``,
    when given, lowers it further). Whole pages are taken, so the gathered list may pass
    the bound by less than a page.

    A page whose non-null ``next_cursor`` equals the cursor just used, or any cursor
    already seen in this search, raises ``PaginationError``: re-requesting it could
    loop forever, and the caller must not read it as "no results".

    Date bounds are ``YYYY-MM-DD`` (whole days, inclusive) or ISO datetimes (instants;
    naive means UTC). A start after the end, or a bound that does not parse, is an
    invalid range: the result is empty and nothing is fetched. Works are de-duplicated
    by (type, id), first occurrence kept. The result is stably sorted by ``sort``
    (``None``/``"none"``/``"source"`` keep the source's order) and sliced to ``limit``.
    """
    if sort is not None and sort not in SORTS and sort not in KEEP_SOURCE_ORDER:
        raise ValueError(f"unknown sort {sort!r}")
    try:
        parse_window(start_date, end_date)
    except InvalidDateWindow:
        return []
    dated = has_date_filter or bool(start_date) or bool(end_date)
    bound = fetch_limit(limit, sort, dated)
    if max_items is not None and max_items > 0:
        bound = max_items if bound is None else min(bound, max_items)
    found = walk(fetch_page, bound=bound, order=sort, start_date=start_date, end_date=end_date, max_examined=None)
    ordered = sort_works(found.items, sort)
    if limit is not None and not isinstance(limit, bool) and limit > 0:
        return ordered[:limit]
    return ordered


def _bounds_inverted(start: date | datetime, end: date | datetime) -> bool:
    if isinstance(start, datetime) != isinstance(end, datetime):
        start_day = start.date() if isinstance(start, datetime) else start
        end_day = end.date() if isinstance(end, datetime) else end
        return start_day > end_day
    return start > end
