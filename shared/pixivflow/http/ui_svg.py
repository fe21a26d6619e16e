"""Server-rendered SVG for the operator page: a schedule's history strip (its last
fires, one square each, coloured by outcome, each a link to its occurrence) and the daily
outcome chart (stacked bars of slots by status). Inline SVG, colours as presentation
attributes (``fill``), no ``style`` attribute and no script: the page's CSP stays as strict
as it is (``default-src 'none'``, one hashed stylesheet)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence
from urllib.parse import quote

from ..services.inspection import local
from .ui import Html, e

# One colour per outcome, the page's badge colours (ui.CSS ``.st-*``).
COLOURS = {"success": "#1f8a4c", "partial": "#b7791f", "failed": "#c0392b", "expired": "#7b341e",
           "running": "#2b6cb0", "pending": "#6b7785", "missed": "#d8dde3", "no_data": "#ffffff",
           "paused": "#ffffff"}
ORDER = ("success", "partial", "failed", "expired", "running", "pending")
CELL, GAP = 14, 3


def _colour(status: str) -> str:
    return COLOURS.get(status, "#6b7785")


def history_strip(schedule_id: str, history: Sequence[Mapping[str, Any]]) -> Html:
    """``history``: ``schedule_views.schedule_history`` (oldest first). A missed fire is a pale square
    without a link (there is no slot to open); a fire the operator's pause covered, an outlined white
    one; a fire with no data (before the schedule was watched, or not judged yet), a dotted outline."""
    width = max(1, len(history)) * (CELL + GAP)
    parts = [f'<svg class="strip" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{CELL}" '
             f'viewBox="0 0 {width} {CELL}" role="img" aria-label="{e(f"last {len(history)} fires of {schedule_id}")}">']
    for n, fire in enumerate(history):
        label = f"{local(fire['at'], fire['timezone'])}: {fire['status']}"
        outline = {"paused": ' stroke="#6b7785" stroke-width="1"',
                   "no_data": ' stroke="#b8c0c8" stroke-width="1" stroke-dasharray="2 2"'}.get(fire["status"], "")
        rect = (f'<rect x="{n * (CELL + GAP)}" y="0" width="{CELL}" height="{CELL}" rx="2" fill="{_colour(fire["status"])}"'
                f' data-status="{e(fire["status"])}"{outline}><title>{e(label)}</title></rect>')
        if fire["status"] not in ("missed", "paused", "no_data"):
            rect = f'<a href="/ui/slots/{e(quote(fire["slotId"], safe="@:"))}">{rect}</a>'
        parts.append(rect)
    parts.append("</svg>")
    return Html("".join(parts))


def daily_chart(days: Sequence[Mapping[str, Any]], *, height: int = 120, bar: int = 22) -> Html:
    """``days``: ``schedule_views.daily_outcomes`` (oldest first): a stacked bar a day, the tallest
    day filling the height, each segment titled with its day, status and count."""
    top = max([sum(d["counts"].values()) for d in days] + [1])
    label_h = 16
    width = max(1, len(days)) * (bar + 6)
    parts = [f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + label_h}" '
             f'viewBox="0 0 {width} {height + label_h}" role="img" aria-label="outcomes by day">']
    for n, day in enumerate(days):
        x, y = n * (bar + 6), height
        statuses = [s for s in ORDER if s in day["counts"]] + sorted(s for s in day["counts"] if s not in ORDER)
        for status in statuses:
            count = day["counts"][status]
            h = max(1, round(count * height / top))
            y -= h
            parts.append(f'<rect x="{x}" y="{y}" width="{bar}" height="{h}" fill="{_colour(status)}" '
                         f'data-day="{e(day["day"])}" data-status="{e(status)}" data-count="{count}">'
                         f"<title>{e(day['day'])}: {count} {e(status)}</title></rect>")
        parts.append(f'<text x="{x + bar / 2:g}" y="{height + 12}" font-size="9" text-anchor="middle" fill="#1d232a">'
                     f"{e(day['day'][5:])}</text>")
    parts.append("</svg>")
    return Html("".join(parts))


__all__ = ["COLOURS", "daily_chart", "history_strip"]
