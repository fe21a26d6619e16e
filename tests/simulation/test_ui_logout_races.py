"""A logout racing page requests and a login ends exactly the sessions it should: the ``/ui`` session
epoch (issue 21 item 10: sessions end at logout), a guard the seeded world does not drive, run
concurrently under ``baton.Baton``. The world has no operator at a browser, so this is its own
deterministic concurrency test: a logout, page requests with the same cookie, a second browser's
page request and a fresh login race, every AWS call a step at which a seeded scheduler switches to
another invocation, over a few dozen interleavings.

What an operator would notice, whatever the interleaving:

* a page request whose epoch read came after the logout's commit gets the login page (no
  request is served by a session that had already ended); one that read before it is served;
* the logout advances the epoch exactly once, and afterwards the logged-out cookie -- and its
  copy in another browser -- gets the login page;
* the cookie the racing login issued is live exactly when its epoch read came after the commit.
"""

from __future__ import annotations

import itertools
from random import Random
from typing import Any

from baton import Baton, stepped_factory
from conftest import TRIGGER_TOKEN
from jobs_world import CALLBACK_HOST  # noqa: F401 - the simulation's modules import cleanly side by side

from pixivflow import aws, runtime
from pixivflow.local.harness import http_event
from pixivflow.local.lambda_context import context_for

INTERLEAVINGS = 8


def _request(rt: Any, method: str, path: str, cookie: str | None = None, body: str | None = None) -> dict[str, Any]:
    event = http_event(method, path)
    if cookie is not None:
        event["cookies"] = [cookie]
    if body is not None:
        event["headers"]["content-type"] = "application/x-www-form-urlencoded"
        event["body"] = body
    return rt.handlers["trigger"](event, context_for("trigger"))


def _login(rt: Any) -> str:
    answer = _request(rt, "POST", "/ui/login", body=f"token={TRIGGER_TOKEN}")
    assert answer["statusCode"] == 303, answer
    return answer["cookies"][0].split(";", 1)[0]


def _served(answer: dict[str, Any]) -> bool:
    if answer["statusCode"] == 200:
        return True
    headers = {k.lower(): v for k, v in (answer.get("headers") or {}).items()}
    assert (answer["statusCode"], headers.get("location")) == (303, "/ui/login"), answer
    return False


def test_a_logout_racing_page_requests_and_a_login_ends_exactly_the_sessions_it_should(make_runtime):
    rt = make_runtime(backend="twin")
    previous = aws.set_factory(stepped_factory(rt.cloud.client))
    runtime.override(clock=rt.clock)  # the engine is built again, on stepped clients
    ledger = rt.wiring.ledger
    observed: dict[str, int] = {}  # the order of each invocation's first epoch read and of the logout's commit
    order = itertools.count()  # one invocation runs at a time: a counter orders the calls exactly
    real_epoch, real_end = ledger.ui_session_epoch, ledger.end_ui_sessions

    def ui_session_epoch() -> int:
        epoch = real_epoch()
        observed.setdefault(f"read@{_current_name()}", next(order))
        return epoch

    def end_ui_sessions(seen_epoch: int, now_ms: int) -> int:
        result = real_end(seen_epoch, now_ms)
        observed["commit"] = next(order)
        return result

    ledger.ui_session_epoch, ledger.end_ui_sessions = ui_session_epoch, end_ui_sessions
    try:
        outcomes = set()
        for seed in range(INTERLEAVINGS):
            cookie = _login(rt)  # the harness's own calls (main thread): no steps
            copy = cookie  # the same cookie in another browser
            epoch = real_epoch()
            observed.clear()
            baton = Baton(rt.clock, Random(seed), switch=0.6)
            results: dict[str, dict[str, Any]] = {}
            for name, call in (("page", lambda: _request(rt, "GET", "/ui/slots", cookie)),
                               ("logout", lambda: _request(rt, "POST", "/ui/logout", cookie)),
                               ("other", lambda: _request(rt, "GET", "/ui", copy)),
                               ("login", lambda: _request(rt, "POST", "/ui/login", body=f"token={TRIGGER_TOKEN}"))):
                baton.spawn(name, call, on_end=lambda inv: results.__setitem__(inv.name, inv))
            baton.drain()
            for name, inv in results.items():
                assert inv.error is None, (seed, name, inv.error)
            commit = observed["commit"]
            assert real_epoch() == epoch + 1, seed  # advanced exactly once
            for name in ("page", "other"):
                read = observed[f"read@{name}"]
                served = _served(results[name].result)
                assert served == (read < commit), (seed, name, read, commit)
                outcomes.add((name, served))
            # afterwards the logged-out cookie (and its copy) is refused everywhere
            assert not _served(_request(rt, "GET", "/ui", cookie)), seed
            fresh = results["login"].result["cookies"][0].split(";", 1)[0]
            assert _served(_request(rt, "GET", "/ui", fresh)) == (observed["read@login"] > commit), (seed, observed)
        # the interleavings really raced: some requests were served, some sent to the login page
        assert {("page", True), ("page", False), ("other", True), ("other", False)} <= outcomes, outcomes
    finally:
        aws.set_factory(previous)


def _current_name() -> str:
    import threading

    return threading.current_thread().name.removeprefix("sim-")
