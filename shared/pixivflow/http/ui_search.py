"""The operator page's search, ``/ui/search?q=`` (the box in every page's header): a slot id opens
its occurrence, a job id its job, a refetch or job request id the occurrence it opened, and a Pixiv
work id the occurrences holding that work on each route. Each answer is a few item reads (one per
route and work type for a work id), whatever the ledger holds; nothing is scanned."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from ..domain.reservation import holder_of
from ..domain.text import ascii_digits
from .ui import e, page, search_form, slot_link, table

MAX_QUERY = 300
WORK_TYPES = ("illustration", "novel")


def find(reads: Any, query: str) -> tuple[str | None, list[list[Any]]]:
    """Where ``query`` leads: a page to open (None when it names no one thing), and the works'
    holders as table rows (route, work, occurrence, target) when it is a work id."""
    ledger = reads.ledger
    slot = ledger.get_slot(query)
    if slot is not None:
        where = "jobs" if slot.is_job else "slots"
        return f"/ui/{where}/{quote(query, safe='@:')}", []
    record = ledger.get_request_key(query) if len(query) <= 100 else None
    if record is not None and record.get("slotRef") and ledger.get_slot(str(record["slotRef"])) is not None:
        return f"/ui/slots/{quote(str(record['slotRef']), safe='@:')}", []
    if not ascii_digits(query) or len(query) > 20:
        return None, []
    config = reads.config
    routes = sorted({r for s in (config.schedules if config is not None else []) for t in config.targets_for(s)
                     for r in t.routes()}) if config is not None else []
    rows = []
    for route in routes:
        for work_type in WORK_TYPES:
            for _work, owner in ledger.work_owners(route, work_type, [query]).items():
                slot_id, target_id = holder_of(owner)
                rows.append([route, f"{work_type} {query}", slot_link(slot_id), target_id])
    return None, rows


def register(shell: Any, route: Any) -> None:
    """``GET /ui/search`` on the trigger function's shell."""
    from .. import runtime
    from .ui import _guard, html_response, redirect

    @route("GET", "/ui/search")
    def ui_search(req: Any) -> Any:
        event = shell.app.current_event
        denied = _guard(req, event)
        if denied is not None:
            return denied
        query = ((event.query_string_parameters or {}).get("q") or "").strip()
        if not query or len(query) > MAX_QUERY or not query.isprintable():
            body = page("Search", f'{search_form()}<p class="err">q: a slot, job, request or work id of at most '
                                  f"{MAX_QUERY} printable characters</p>")
            return req.respond(html_response(400, body), "ui.bad_query", field="q")
        where, holders = find(runtime.get().wiring.reads, query)
        if where is not None:
            return req.respond(redirect(where), "ui.page", page="search", found=True)
        if holders:
            body = (f"{search_form(query)}<p>Work {e(query)} is held on these routes:</p>"
                    + table(["Route", "Work", "Occurrence", "Target"], holders))
            return req.respond(html_response(200, page("Search", body)), "ui.page", page="search", found=True)
        body = (f"{search_form(query)}<p>Nothing in the ledger is named <code>{e(query)}</code>: no occurrence, job or "
                "request of that id, and no route holds a work of that id.</p>")
        return req.respond(html_response(404, page("Search", body)), "ui.page", page="search", found=False)


__all__ = ["find", "register", "search_form"]
