"""Configuration validation and loading (DESIGN §7; spec §1.1).

A bad config fails fast with a ConfigError whose message names the field path
(config.py's contract: ``schedules[1].cron: ...``).
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
import yaml

from pixivflow.config import (
    DEFAULT_QUEUED_TIMEOUT_MS,
    DEFAULT_STALL_TIMEOUT_MS,
    load_config,
    parse_config,
    parse_text,
)
from pixivflow.domain.errors import ConfigError

DEMO = Path(__file__).resolve().parents[2] / "events" / "demo"


@pytest.fixture
def cfg() -> dict:
    return yaml.safe_load((DEMO / "config.yaml").read_text())


def error_of(data: dict) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    message = str(info.value)
    assert message.startswith("invalid configuration: ")
    return message


# -- schedules -------------------------------------------------------------------------------------


def test_bad_schedule_id_pattern_names_schedules_0_id(cfg: dict) -> None:
    cfg["schedules"][0]["id"] = "-bad id"
    message = error_of(cfg)
    assert "schedules[0].id:" in message
    assert "^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$" in message


def test_schedule_id_longer_than_64_characters_is_refused(cfg: dict) -> None:
    cfg["schedules"][1]["id"] = "a" * 65
    assert "schedules[1].id:" in error_of(cfg)


def test_duplicate_schedule_ids_name_the_second_occurrence(cfg: dict) -> None:
    cfg["schedules"][1]["id"] = "morning-tokyo"
    assert error_of(cfg) == "invalid configuration: schedules[1].id: duplicate id 'morning-tokyo'"


def test_duplicate_target_ids_are_refused(cfg: dict) -> None:
    cfg["targets"][3]["id"] = "cats"
    assert "targets[3].id: duplicate id 'cats'" in error_of(cfg)


def test_unknown_target_id_in_a_schedule(cfg: dict) -> None:
    cfg["schedules"][1]["targetIds"].append("ghost")
    assert error_of(cfg) == "invalid configuration: schedules[1].targetIds: unknown target 'ghost'"


def test_enabled_schedule_without_cron_names_its_cron_field(cfg: dict) -> None:
    del cfg["schedules"][1]["cron"]
    message = error_of(cfg)
    assert "schedules[1]" in message and "cron: required when the schedule is enabled" in message


def test_disabled_schedule_may_omit_cron(cfg: dict) -> None:
    del cfg["schedules"][1]["cron"]
    cfg["schedules"][1]["enabled"] = False
    config = parse_config(cfg)
    assert config.schedule("evening-berlin").enabled is False
    assert config.schedule("evening-berlin").cron is None


@pytest.mark.parametrize("cron, fragment", [
    ("61 8 * * *", "out of range"),
    ("0 8 * *", "exactly 5 fields"),
    ("every morning", "exactly 5 fields"),
])
def test_bad_cron_names_its_field(cfg: dict, cron: str, fragment: str) -> None:
    cfg["schedules"][0]["cron"] = cron
    message = error_of(cfg)
    assert "schedules[0]" in message and "cron: " in message
    assert fragment in message
    assert "schedules[1]" not in message


def test_cron_restricting_both_day_of_month_and_day_of_week_is_refused(cfg: dict) -> None:
    cfg["schedules"][1]["cron"] = "0 8 1 * 1"
    message = error_of(cfg)
    assert "schedules[1]" in message and "cron: '0 8 1 * 1'" in message
    assert "restricts both day-of-month and day-of-week" in message
    assert "EventBridge cannot express" in message


def test_cron_restricting_only_one_day_field_is_accepted(cfg: dict) -> None:
    cfg["schedules"][0]["cron"] = "0 8 * * 1-5"
    cfg["schedules"][1]["cron"] = "30 19 1,15 * *"
    config = parse_config(cfg)
    assert config.schedule("morning-tokyo").cron == "0 8 * * 1-5"
    assert config.schedule("evening-berlin").cron == "30 19 1,15 * *"


def test_unknown_iana_zone(cfg: dict) -> None:
    cfg["schedules"][1]["timezone"] = "Mars/Olympus"
    assert error_of(cfg) == "invalid configuration: schedules[1].timezone: unknown IANA time zone 'Mars/Olympus'"


def test_blank_time_zone_means_utc(cfg: dict) -> None:
    cfg["schedules"][1]["timezone"] = "  "
    assert parse_config(cfg).schedule("evening-berlin").timezone == "UTC"


def test_more_than_90_targets_in_a_schedule(cfg: dict) -> None:
    cfg["targets"] += [{"id": f"t{i}", "mode": "search", "tag": "x"} for i in range(91)]
    cfg["schedules"][0]["targetIds"] = [f"t{i}" for i in range(91)]
    assert error_of(cfg) == "invalid configuration: schedules[0].targetIds: 91 targets; at most 90 per schedule"


def test_exactly_90_targets_in_a_schedule_is_accepted(cfg: dict) -> None:
    cfg["targets"] += [{"id": f"t{i}", "mode": "search", "tag": "x"} for i in range(90)]
    cfg["schedules"][0]["targetIds"] = [f"t{i}" for i in range(90)]
    assert len(parse_config(cfg).targets_for(parse_config(cfg).schedules[0])) == 90


def test_a_schedule_without_target_ids_counts_every_target(cfg: dict) -> None:
    cfg["targets"] += [{"id": f"t{i}", "mode": "search", "tag": "x"} for i in range(91 - len(cfg["targets"]))]
    del cfg["schedules"][1]["targetIds"]
    assert "schedules[1].targetIds: 91 targets; at most 90" in error_of(cfg)


# -- targets and routes ----------------------------------------------------------------------------


def test_cache_mode_without_a_route_is_a_dry_run(cfg: dict) -> None:
    # pixivflow.shadow.json (issue 23): accepted, and the load says what it means.
    del cfg["targets"][2]["delivery"]
    config = parse_config(cfg)
    assert config.targets[2].routes() == [] and config.targets[2].dry_run
    assert [w for w in config.warnings if "DRY RUN" in w] == [
        "targets[2].delivery: storageMode cache with no delivery route: DRY RUN (selects and stores each work and "
        "records what it would deliver; posts nothing, sends no notification)"]


def test_unknown_route_name(cfg: dict) -> None:
    cfg["targets"][2]["delivery"] = {"target": "nope"}
    assert error_of(cfg) == "invalid configuration: targets[2].delivery: unknown route 'nope'"


def test_more_than_three_routes_on_a_target(cfg: dict) -> None:
    for name in "abcd":
        cfg["delivery"]["targets"][name] = {"kind": "webhook", "url": f"http://127.0.0.1:9/{name}"}
    cfg["targets"][1]["delivery"] = {"targets": list("abcd")}
    assert error_of(cfg) == "invalid configuration: targets[1].delivery: at most 3 routes per target"


def test_three_routes_on_a_target_are_accepted(cfg: dict) -> None:
    for name in "abc":
        cfg["delivery"]["targets"][name] = {"kind": "webhook", "url": f"http://127.0.0.1:9/{name}"}
    cfg["targets"][1]["delivery"] = {"targets": ["a", "b", "c", "a"]}
    assert parse_config(cfg).target("landscape").routes() == ["a", "b", "c"]


def test_route_url_must_be_http(cfg: dict) -> None:
    cfg["delivery"]["targets"]["review"]["url"] = "ftp://example.com/review"
    assert "delivery.targets.review.url: must be an http(s) URL" in error_of(cfg)


def test_catalog_source_without_path_names_source_path(cfg: dict) -> None:
    del cfg["source"]["path"]
    message = error_of(cfg)
    assert "source" in message and "path: required for a catalog source" in message


@pytest.mark.parametrize("edit, path", [
    pytest.param(lambda c: c["schedules"][1].pop("cron"), "schedules[1].cron: ", id="missing-cron"),
    pytest.param(lambda c: c["schedules"][0].update(cron="61 8 * * *"), "schedules[0].cron: ", id="bad-cron"),
    pytest.param(lambda c: c["schedules"][1].update(cron="0 8 1 * 1"), "schedules[1].cron: ", id="dom-and-dow"),
    pytest.param(lambda c: c["source"].pop("path"), "source.path: ", id="catalog-without-path"),
])
def test_model_level_errors_name_the_dotted_field_path(cfg: dict, edit, path: str) -> None:
    """config.py promises ``schedules[1].cron: ...``. Errors raised by a model validator come out
    as ``schedules[1]: cron: ...`` / ``source: path: ...`` (the field is a message prefix, not part of
    the path), so a tool that greps for the field path misses them."""
    edit(cfg)
    assert path in error_of(cfg)


def test_document_that_is_not_a_mapping() -> None:
    with pytest.raises(ConfigError, match="the document must be a mapping"):
        parse_text("- just\n- a list\n")


def test_unparsable_yaml() -> None:
    with pytest.raises(ConfigError, match="not YAML/JSON"):
        parse_text("schedules: [unclosed")


# -- liveness budgets ------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [59_999, 0, -5, math.nan, math.inf, -math.inf, None])
def test_liveness_budgets_below_a_minute_or_not_finite_use_the_defaults(cfg: dict, value) -> None:
    cfg["schedulerRuntime"]["queuedTimeoutMs"] = value
    cfg["schedulerRuntime"]["stallTimeoutMs"] = value
    runtime = parse_config(cfg).schedulerRuntime
    assert runtime.queued_timeout_ms == DEFAULT_QUEUED_TIMEOUT_MS == 1_800_000
    assert runtime.stall_timeout_ms == DEFAULT_STALL_TIMEOUT_MS == 900_000


def test_liveness_budgets_of_a_minute_or_more_are_used(cfg: dict) -> None:
    cfg["schedulerRuntime"]["queuedTimeoutMs"] = 60_000
    cfg["schedulerRuntime"]["stallTimeoutMs"] = 120_000
    runtime = parse_config(cfg).schedulerRuntime
    assert (runtime.queued_timeout_ms, runtime.stall_timeout_ms) == (60_000, 120_000)


def test_yaml_infinity_budget_falls_back(cfg: dict) -> None:
    text = yaml.safe_dump(cfg).replace("stallTimeoutMs: 900000", "stallTimeoutMs: .inf")
    assert "stallTimeoutMs: .inf" in text
    assert parse_text(text).schedulerRuntime.stall_timeout_ms == 900_000


# -- loading ---------------------------------------------------------------------------------------


def test_demo_config_loads_and_its_catalogue_resolves_next_to_the_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIXIVFLOW_CONFIG", str(DEMO / "config.yaml"))
    config = load_config()
    assert {"morning-tokyo", "evening-berlin"} <= {s.id for s in config.schedules}
    assert config.schedule("evening-berlin").timezone == "Europe/Berlin"
    assert [t.id for t in config.targets_for(config.schedule("morning-tokyo"))] == ["cats", "landscape", "ranking-daily"]
    assert config.route("review") is not None
    assert config.source.path == str((DEMO / "catalog.json").resolve())
    assert Path(config.source.path).is_file()


def test_relative_catalogue_path_resolves_next_to_a_copied_config(tmp_path: Path, cfg: dict) -> None:
    (tmp_path / "data").mkdir()
    cfg["source"]["path"] = "data/catalog.json"
    path = tmp_path / "conf.json"
    path.write_text(json.dumps(cfg))  # JSON is accepted as well as YAML
    config = load_config(str(path))
    assert config.source.path == str((tmp_path / "data" / "catalog.json").resolve())


def test_absolute_catalogue_path_is_kept(tmp_path: Path, cfg: dict) -> None:
    cfg["source"]["path"] = "/srv/catalog.json"
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    assert load_config(str(path)).source.path == "/srv/catalog.json"


def test_missing_config_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as info:
        load_config(str(missing))
    assert str(info.value) == f"cannot read PIXIVFLOW_CONFIG {str(missing)!r}: No such file or directory"


def test_config_from_ssm_with_an_injected_reader(monkeypatch: pytest.MonkeyPatch, cfg: dict) -> None:
    calls: list[str] = []
    cfg["source"]["path"] = "/opt/catalog.json"

    def reader(name: str) -> str:
        calls.append(name)
        return yaml.safe_dump(cfg)

    monkeypatch.setenv("PIXIVFLOW_CONFIG", "ssm:/pixivflow/prod/config")
    config = load_config(ssm_reader=reader)
    assert calls == ["/pixivflow/prod/config"]
    assert config.schedule("morning-tokyo").timezone == "Asia/Tokyo"
    assert config.source.path == "/opt/catalog.json"


def test_config_from_ssm_is_validated_too(cfg: dict) -> None:
    cfg["schedules"][0]["timezone"] = "Nowhere/City"
    with pytest.raises(ConfigError, match=r"schedules\[0\]\.timezone: unknown IANA time zone"):
        load_config("ssm:/cfg", ssm_reader=lambda name: yaml.safe_dump(cfg))


def test_ssm_location_without_a_reader() -> None:
    with pytest.raises(ConfigError, match="names an SSM parameter but no SSM reader is available"):
        load_config("ssm:/pixivflow/config")


def test_unset_pixivflow_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PIXIVFLOW_CONFIG", raising=False)
    with pytest.raises(ConfigError) as info:
        load_config()
    assert str(info.value) == "PIXIVFLOW_CONFIG is not set (a file path or ssm:<parameter name>)"


def test_the_demo_config_is_not_mutated_by_validation(cfg: dict) -> None:
    before = copy.deepcopy(cfg)
    parse_config(cfg)
    assert cfg == before


# -- warn and default (spec §1.1, §6.1, §7.2) --------------------------------------------------------


@pytest.mark.parametrize("knob, default", [("queuedTimeoutMs", 1_800_000), ("stallTimeoutMs", 900_000)])
@pytest.mark.parametrize("value, why", [
    ("nonsense", "is not an integer number of milliseconds"),
    (59_999, "is below the 60000 ms floor"),
    (90_000.5, "is not an integer number of milliseconds"),
    (True, "is not an integer number of milliseconds"),
    (math.nan, "is not an integer number of milliseconds"),
])
def test_a_malformed_budget_warns_naming_its_field_and_uses_the_default(cfg: dict, knob, default, value, why) -> None:
    cfg["schedulerRuntime"][knob] = value
    config = parse_config(cfg)
    attr = "queued_timeout_ms" if knob == "queuedTimeoutMs" else "stall_timeout_ms"
    assert getattr(config.schedulerRuntime, attr) == default
    assert config.warnings == (f"schedulerRuntime.{knob}: {value!r} {why}; the default {default} is used",)


def test_a_good_budget_and_an_integral_float_budget_warn_nothing(cfg: dict) -> None:
    cfg["schedulerRuntime"]["queuedTimeoutMs"] = 120_000.0
    config = parse_config(cfg)
    assert config.schedulerRuntime.queued_timeout_ms == 120_000 and config.warnings == ()


@pytest.mark.parametrize("value, used, message", [
    (0, 1, "targets[0].candidateScanLimit: 0 is below 1; 1 is used"),
    (-3, 1, "targets[0].candidateScanLimit: -3 is below 1; 1 is used"),
    (500, 100, "targets[0].candidateScanLimit: 500 is above 100; 100 is used"),
    ("many", None, "targets[0].candidateScanLimit: 'many' is not an integer; ignored (download.candidateScanLimit or the default is used)"),
])
def test_target_scan_limit_is_clamped_with_a_warning(cfg: dict, value, used, message) -> None:
    cfg["targets"][0]["candidateScanLimit"] = value
    config = parse_config(cfg)
    assert config.target("cats").candidateScanLimit == used
    assert config.warnings == (message,)


def test_global_scan_limit_is_clamped_with_a_warning(cfg: dict) -> None:
    cfg["download"] = {"candidateScanLimit": 1000}
    config = parse_config(cfg)
    assert config.download.candidateScanLimit == 100
    assert config.warnings == ("download.candidateScanLimit: 1000 is above 100; 100 is used",)
    cfg["download"] = {"candidateScanLimit": 2.5}
    assert parse_config(cfg).warnings == ("download.candidateScanLimit: 2.5 is not an integer; ignored (the default 5 is used)",)


def test_a_limit_above_1000_warns_and_is_kept(cfg: dict) -> None:
    cfg["targets"][0]["limit"] = 1500
    config = parse_config(cfg)
    assert config.target("cats").limit == 1500
    assert config.warnings == ("targets[0].limit: 1500 is above 1000; one run may page and scan for a long time",)


def test_topic_language_and_no_match_keys_are_typed_with_pixivflows_defaults(cfg: dict) -> None:
    cfg["targets"][4]["noMatchPolicy"] = {"lookbackDays": 3}
    cfg["targets"][4]["topicDiscovery"] = {"maxTags": 5, "includeR18": True}
    cfg["targets"][5].update(languageFilter="chinese", strictLanguageFilter=True)
    config = parse_config(cfg)
    assert config.warnings == ()
    topic, novel = config.targets[4], config.targets[5]
    assert (topic.noMatchPolicy.lookbackDays, topic.noMatchPolicy.notify) == (3, False)
    assert (topic.topicDiscovery.maxTags, topic.topicDiscovery.includeR18, topic.topicDiscovery.sampleWorks,
            topic.topicDiscovery.cacheDays, topic.topicDiscovery.minScore, topic.topicDiscovery.relatedTags) == (
        5, True, 100, 7, 0.22, "always")
    assert (topic.candidateCollection.maxPerTag, topic.candidateCollection.maxCandidates,
            topic.candidateCollection.minMetadataScore) == (40, 250, 0.35)
    assert (novel.languageFilter, novel.languageCandidateLimit, novel.strictLanguageFilter, novel.detectLanguage) == (
        "chinese", 20, True, True)


def test_an_inverted_date_window_is_a_warning(cfg: dict) -> None:
    cfg["targets"][0].update(startDate="2026-11-20", endDate="2026-11-10")
    assert parse_config(cfg).warnings == (
        "targets[0].startDate: 2026-11-20 is after endDate 2026-11-10; the target can never select a work",)


def test_warnings_gathered_before_a_fatal_error_travel_with_it(cfg: dict) -> None:
    cfg["schedulerRuntime"]["stallTimeoutMs"] = "nonsense"
    cfg["targets"][0]["minBookmarks"] = "lots"
    with pytest.raises(ConfigError) as info:
        parse_config(cfg)
    assert info.value.warnings == ("schedulerRuntime.stallTimeoutMs: 'nonsense' is not an integer number of milliseconds; "
                                   "the default 900000 is used",)
    assert len(info.value.errors) == 1 and info.value.errors[0].startswith("targets[0].minBookmarks: ")


# -- target selection keys (spec §6.1): a bad value is fatal and names its field ----------------------


@pytest.mark.parametrize("index, edit, expected", [
    (0, {"minBookmarks": "lots"}, "targets[0].minBookmarks: "),
    (0, {"minBookmarks": -1}, "targets[0].minBookmarks: "),
    (0, {"maxPageCount": -1}, "targets[0].maxPageCount: "),
    (0, {"startDate": "2026/11/01"}, "targets[0].startDate: '2026/11/01' is not a date (YYYY-MM-DD)"),
    (0, {"endDate": "2026-02-30"}, "targets[0].endDate: '2026-02-30' is not a date (YYYY-MM-DD)"),
    (2, {"rankingDate": "last week"}, "targets[2].rankingDate: 'last week' is not a date (YYYY-MM-DD, TODAY or YESTERDAY)"),
    (4, {"date": "tomorrow"}, "targets[4].date: 'tomorrow' is not a date (YYYY-MM-DD, TODAY or YESTERDAY)"),
    (2, {"rankingMode": "day_ai"}, "targets[2].rankingMode: 'day_ai' is not a illustration ranking"),
    (5, {"rankingMode": "week_r18g", "mode": "ranking"}, None),
    (0, {"searchTarget": "text"}, "targets[0].searchTarget: must be one of partial_match_for_tags, exact_match_for_tags, title_and_caption"),
    (0, {"sort": "random"}, "targets[0].sort: "),
    (0, {"tagRelation": "xor"}, "targets[0].tagRelation: "),
    (0, {"excludeAI": "perhaps"}, "targets[0].excludeAI: "),
    (0, {"illustId": "abc"}, "targets[0].illustId: 'abc' is not a Pixiv id (a positive integer)"),
    (0, {"illustId": 0}, "targets[0].illustId: 0 is not a Pixiv id (a positive integer)"),
    (0, {"illustId": "\u0663"}, "targets[0].illustId: '\u0663' is not a Pixiv id (a positive integer)"),  # Arabic-Indic 3
    (0, {"illustId": "\u00b2"}, "targets[0].illustId: '\u00b2' is not a Pixiv id (a positive integer)"),
    (0, {"novelId": 5}, "targets[0].novelId: only for novel targets"),
    (5, {"illustId": 5}, "targets[5].illustId: only for illustration targets"),
    (5, {"seriesId": 14690617}, "targets[5].seriesId: novel series targets are not supported"),
    (5, {"languageFilter": "japanese"}, "targets[5].languageFilter: "),
    (5, {"languageCandidateLimit": 101}, "targets[5].languageCandidateLimit: "),
    (4, {"noMatchPolicy": {"lookbackDays": 8}}, "targets[4].noMatchPolicy.lookbackDays: "),
    (4, {"topicDiscovery": {"maxTags": 41}}, "targets[4].topicDiscovery.maxTags: "),
    (4, {"topicDiscovery": {"minScore": 1.5}}, "targets[4].topicDiscovery.minScore: "),
    (4, {"candidateCollection": {"maxPerTag": 4}}, "targets[4].candidateCollection.maxPerTag: "),
    (0, {"limit": 0}, "targets[0].limit: "),
])
def test_bad_selection_keys_are_fatal_and_name_their_field(cfg: dict, index, edit, expected) -> None:
    cfg["targets"][index].update(edit)
    if expected is None:
        parse_config(cfg)  # a valid novel ranking mode
        return
    assert expected in error_of(cfg)


def test_every_selection_key_reaches_the_domain_criteria(cfg: dict) -> None:
    cfg["targets"][0].update(tag="cat dog", tagRelation="or", sort="date_asc", searchTarget="exact_match_for_tags",
                             startDate="2026-11-01", endDate="2026-11-30", minBookmarks=150, excludeAI=True, r18=True,
                             maxPageCount=0, random=True, limit=2)
    criteria = parse_config(cfg).target("cats").criteria()
    assert (criteria.words, criteria.tag_relation, criteria.sort, criteria.search_target) == (
        ["cat", "dog"], "or", "date_asc", "exact_match_for_tags")
    assert (criteria.start_date, criteria.end_date, criteria.min_bookmarks) == ("2026-11-01", "2026-11-30", 150)
    assert (criteria.exclude_ai, criteria.r18, criteria.max_page_count, criteria.random, criteria.limit) == (
        True, True, None, True, 2)  # maxPageCount 0 means no cap


def test_pinned_ids_and_user_ids(cfg: dict) -> None:
    cfg["targets"].append({"id": "pinned", "type": "illustration", "illustId": 105, "storageMode": "cache",
                           "delivery": {"target": "review"}})
    cfg["targets"][5] = {"id": "fantasy-novels", "type": "novel", "novelId": "23017", "storageMode": "cache",
                         "delivery": {"target": "review"}}
    cfg["targets"].append({"id": "artist", "userId": 9000, "limit": 1})
    config = parse_config(cfg)
    assert config.target("pinned").criteria().pinned_id == "105" and config.target("pinned").single_work
    assert config.target("fantasy-novels").criteria().pinned_id == "23017"
    assert config.target("artist").criteria().user_id == "9000"


def test_a_novel_weekly_original_ranking_is_read_as_the_weekly_ranking(cfg: dict) -> None:
    cfg["targets"][5].update(mode="ranking", rankingMode="week_rookie")
    assert parse_config(cfg).target("fantasy-novels").criteria().ranking_mode == "week"
