"""The one builder of what the tests make up: catalogue works, configs, and the fake Pixiv.

* ``work`` is a work as the catalogue source (and Pixiv's App API lists) carry it; its keyword
  arguments cover every shape a test needs (an App API illustration passes the extra fields).
  ``cats_catalogue`` is the small catalogue most end-to-end tests run on.
* ``schedule``, ``only``, ``with_target``, ``both`` and ``published`` build or edit the config the
  embedded runtime is started with (``make_runtime``'s ``mutate``).
* ``fake_pixiv`` makes the ``fake`` fixture (the loopback ``FakePixiv``), ``pixiv_config`` a config
  whose source is it, ``pixiv_runtime`` the runtime on that config with the client's sleeps on the
  virtual clock.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

PUBLISHED = Path(__file__).resolve().parents[1] / "fixtures" / "pixivflow_configs"
_LARGE = object()  # image_urls' default: one "large" URL on example.invalid

# -- works ---------------------------------------------------------------------------------------


def work(work_id: int | str, created: str, tags: tuple[str, ...] = ("cats",), *, title: str | None = None,
         kind: str | None = None, user: tuple[int, str] = (7, "artist"), bookmarks: int = 10, pages: int = 1,
         image_urls: Any = _LARGE, fault: str | None = None, **extra: Any) -> dict[str, Any]:
    """A work as listed: ``title`` (default ``work <id>``), ``kind`` (the ``type`` field, absent by
    default), ``image_urls`` (default one ``large`` URL; None leaves the field out), ``fault`` (the
    catalogue source's ``x_fault``: gone, transient, download_error...), any other field in ``extra``."""
    raw: dict[str, Any] = {"id": int(work_id), "title": f"work {work_id}" if title is None else title}
    if kind is not None:
        raw["type"] = kind
    raw.update({"tags": [{"name": t} for t in tags], "user": {"id": user[0], "name": user[1]}, "create_date": created,
                "total_bookmarks": bookmarks, "page_count": pages})
    if image_urls is _LARGE:
        raw["image_urls"] = {"large": f"https://example.invalid/{work_id}.png"}
    elif image_urls is not None:
        raw["image_urls"] = image_urls
    if fault:
        raw["x_fault"] = fault
    raw.update(extra)
    return raw


def cats_catalogue(*, tagged: bool = True, novels: bool = True) -> dict[str, Any]:
    """Three "cats" works, 501 the newest (a search with no other constraint binds it first), and a
    newer "dogs" work, 900. ``tagged``: 501 is also "cute" and 503 "sleepy"; ``novels``: an empty
    novel list beside them."""
    extra = {"501": ("cute",), "503": ("sleepy",)} if tagged else {}
    catalogue: dict[str, Any] = {"illusts": [
        *(work(i, created, ("cats", *extra.get(i, ()))) for i, created in
          (("501", "2026-11-20T10:00:00+09:00"), ("502", "2026-11-10T10:00:00+09:00"), ("503", "2026-11-05T10:00:00+09:00"))),
        work("900", "2026-11-25T10:00:00+09:00", ("dogs",)),
    ]}
    if novels:
        catalogue["novels"] = []
    return catalogue


# -- configs -------------------------------------------------------------------------------------

Mutate = Callable[[dict], None]


def schedule(schedule_id: str, targets, cron: str = "0 8 * * *", timezone: str = "Asia/Tokyo", **extra: Any) -> dict:
    """A schedule of the config (default: daily at 08:00 Asia/Tokyo) running ``targets``."""
    return {"id": schedule_id, "cron": cron, "timezone": timezone, "targetIds": list(targets), **extra}


def only(*schedules: dict, targets=()) -> Mutate:
    """The demo config with its own schedules disabled (a disabled schedule is never 'missed') plus these."""
    def mutate(cfg):
        for s in cfg["schedules"]:
            s["enabled"] = False
        cfg["targets"].extend(targets)
        cfg["schedules"].extend(schedules)

    return mutate


def with_target(target: dict, schedule_id: str) -> Mutate:
    """The demo config plus ``target`` on a schedule of its own (``schedule``'s default time)."""
    def mutate(cfg):
        cfg["targets"].append(target)
        cfg["schedules"].append(schedule(schedule_id, [target["id"]]))

    return mutate


def both(*mutators: Mutate) -> Mutate:
    """Every mutator, in order."""
    def apply(cfg):
        for m in mutators:
            m(cfg)
    return apply


def published(name: str) -> dict:
    """One of the published PixivFlow configs (the copies in tests/fixtures/pixivflow_configs/)."""
    return json.loads((PUBLISHED / name).read_text(encoding="utf-8"))


# -- the fake Pixiv ------------------------------------------------------------------------------

PIXIV_SCHEDULE = "pixiv-morning"  # pixiv_config's one schedule: 08:00 Asia/Tokyo
PIXIV_START = "2026-11-30T22:59:00Z"  # a minute before its first fire


def fake_pixiv(fixtures: Callable[[], Any] | None = None, *, scope: str = "function", **options: Any):
    """The ``fake`` fixture: ``fake = fake_pixiv()`` at a test module's top level gives its tests a
    loopback ``FakePixiv`` (a fresh one per test, or per ``scope``). ``fixtures`` makes its fixtures
    (called for each fake; default: the fake's own), ``options`` are FakePixiv's (rotate, page_size...)."""
    from pixivflow.local.fake_pixiv import FakePixiv

    @pytest.fixture(name="fake", scope=scope)
    def fake():
        with FakePixiv(*(() if fixtures is None else (fixtures(),)), **options) as f:
            yield f

    return fake


def pixiv_config(fake, targets: list[dict], *, schedules: list[dict] | None = None, **blocks: Any) -> Mutate:
    """A config whose source is ``fake``: the given top-level ``blocks`` (pixiv, network, download,
    storage, delivery...) as given, ``targets``, and ``schedules`` (default: one ``pixiv-morning``
    schedule running every target)."""
    def mutate(cfg):
        cfg["source"] = {"kind": "pixiv", "baseUrls": fake.base_urls}
        cfg.update(blocks)
        cfg["targets"] = targets
        cfg["schedules"] = schedules if schedules is not None else [schedule(PIXIV_SCHEDULE, [t["id"] for t in targets])]

    return mutate


def pixiv_runtime(make_runtime, mutate: Mutate, *, start: str = PIXIV_START, backend: str = "twin",
                  virtual_sleep: bool = True, sleeps: list[float] | None = None,
                  ssm_token: tuple[str, str] | None = None, overrides: dict | None = None, **options: Any):
    """``make_runtime`` on a fake-Pixiv config. ``virtual_sleep``: the client's sleeps (pacing, quick
    retries) advance the virtual clock instead of sleeping, each appended to ``sleeps`` if given;
    ``ssm_token``: (parameter, value) written to SSM once the runtime is up (pass ``ssm=True``)."""
    clock: list = []
    overrides = dict(overrides or {})
    if virtual_sleep:
        def sleep(seconds: float) -> None:
            if sleeps is not None:
                sleeps.append(seconds)
            clock[0].advance(int(seconds * 1000))

        overrides["sleep"] = sleep
    rt = make_runtime(start, mutate=mutate, backend=backend, overrides=overrides or None, **options)
    clock.append(rt.clock)
    if ssm_token is not None:
        from pixivflow import aws

        aws.client("ssm").put_parameter(Name=ssm_token[0], Value=ssm_token[1], Type="SecureString")
    return rt


def fan_out_with_a_dead_second_route(downstream) -> Mutate:
    """Schedule ``fan`` with one target ``both`` on two routes: ``review`` (the downstream as it is)
    and ``second``, which answers 404, so that route's row dead-letters and the cell fails."""
    def mutate(cfg):
        cfg["delivery"]["targets"]["second"] = {"kind": "webhook", "url": downstream.url.replace("/review", "/second")}
        cfg["schedules"].append({"id": "fan", "cron": "0 8 * * *", "timezone": "Asia/Tokyo", "targetIds": ["both"]})
        cfg["targets"].append({"id": "both", "type": "illustration", "mode": "search", "tag": "cats", "limit": 1,
                               "storageMode": "cache", "delivery": {"targets": ["review", "second"]}})

    downstream.state.responder = lambda req: (404, {"error": "no such board"}) if req.path.endswith("/second") else None
    return mutate


def emf_blobs(raw: str) -> list[dict]:
    """The CloudWatch embedded-metric blobs among printed lines (JSON objects carrying ``_aws``)."""
    blobs = []
    for line in raw.splitlines():
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and "_aws" in data:
            blobs.append(data)
    return blobs


SUMMARY_NOTICE = "notification:morning-tokyo@2026-12-01T0800:summary"


def dead_notification(rt, key: str = SUMMARY_NOTICE) -> int:
    """A notification row that died (its route answered 410) at the runtime's now; returns that time."""
    from pixivflow.domain.outbox import OutboxRow

    rows, at = rt.wiring.outbox_rows, rt.clock.now_ms()
    rows.enqueue(OutboxRow(kind="notification", key=key, target="review", payload={"text": "summary"},
                           next_attempt_at=at, created_at=at, updated_at=at, max_attempts=3))
    rows.settle(rows.claim(rows.get("notification", key), "w1", at, 120_000), "w1", at, status="dead",
                error="remote_4xx: HTTP 410")
    return at
