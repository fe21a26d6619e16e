"""With Pixiv unreachable, no cell says "no new works" (docs/explanation/selection.md, "An outage is
an outage"): every target of the published PixivFlow configs, in every selection mode, ends with the
reason of the outage's cause, which pages an operator; never ``no_candidate``, which does not."""

from __future__ import annotations

import pytest

from test_published_topic_configs import fake, fire, receiver, start  # noqa: F401

DOWN = 10**6  # every request from here on


def as_search_ranking_and_pinned(targets):
    """The same schedule's targets in the other selection modes."""
    targets[0].update(mode="search", tag="ボテ腹")
    targets[1].update(mode="ranking", rankingMode="day")
    targets[2].pop("mode", None)
    targets[2]["illustId"] = 95001


@pytest.mark.size("large")
@pytest.mark.parametrize(("config", "schedule", "at", "edit"), [
    ("production.json", "bot1-daily", "2026-12-01T02:00:00Z", None),
    ("production.json", "bot2-daily", "2026-12-01T02:10:00Z", None),
    ("pixivflow.production.json", "bot1-daily", "2026-12-01T02:00:00Z", None),
    ("pixivflow.shadow.json", "bot2-daily", "2026-12-01T02:10:00Z", None),
    ("fly-two-bots.example.json", "morning", "2026-12-01T02:00:00Z", None),
    ("fly-two-bots.example.json", "morning", "2026-12-01T02:00:00Z", as_search_ranking_and_pinned),
])
def test_a_pixiv_that_drops_every_connection_ends_every_cell_with_network_error(start, fake, logs, config, schedule,  # noqa: F811
                                                                                at, edit):
    rt = start(config, edit=edit)
    fake.interruptions.drop("/", DOWN)
    state = fire(rt, schedule, at)
    got = {t: (c.status, c.terminal_reason_code, c.last_error) for t, c in state.cells.items()}
    assert {(c.status, c.terminal_reason_code) for c in state.cells.values()} == {("failed", "network_error")}, got
    [outcome] = [e for e in logs.events("schedule.outcome") if e["slot_id"] == state.slot.slot_id]
    assert outcome["alertable"] is True and outcome["business_status"] != "no_candidate"


def test_a_topic_whose_tags_partly_failed_goes_on_with_the_tags_that_answered_and_names_the_others(start, fake):  # noqa: F811
    """One tag's day search keeps failing (HTTP 500) while the others answer: the day is judged on
    what answered, and the candidate report names the tag it could not see."""
    rt = start("production.json")
    fake.fail("/v1/search/illust", 500, {"error": {"message": "boom"}}, times=DOWN,
              query={"word": "ボテ腹", "start_date": "2026-11-30"})
    state = fire(rt, "bot1-daily", "2026-12-01T02:00:00Z")
    cell = state.cells["bot1-illust-botefuku"]
    assert cell.status in ("submitted", "no_candidate"), (cell.status, cell.last_error)
    assert cell.candidate_report["supply"]["failedQueries"] == ["2026-11-30 ボテ腹"]
    assert cell.candidate_report["supply"]["fetched"] > 0  # the other tags answered


def test_a_topic_day_no_tag_answered_is_retried_and_then_ends_with_the_cause(start, fake):  # noqa: F811
    """Every tag search of the day fails while the token endpoint works: an outage of the search
    (HTTP 500 after the quick retries), never "no new works"."""
    rt = start("production.json")
    fake.fail("/v1/search/illust", 500, {"error": {"message": "boom"}}, times=DOWN)
    fake.fail("/v1/search/novel", 500, {"error": {"message": "boom"}}, times=DOWN)
    state = fire(rt, "bot1-daily", "2026-12-01T02:00:00Z")
    got = {t: (c.status, c.terminal_reason_code, c.last_error) for t, c in state.cells.items()}
    assert {(c.status, c.terminal_reason_code) for c in state.cells.values()} == {("failed", "remote_http_error")}, got
