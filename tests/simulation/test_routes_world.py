"""The routes and Pixiv worlds of the simulation (issues 20, 23, 24): their oracles notice what they
claim to, and one seed of each world runs clean while exercising its routes and faults.

The oracle tests hand ``oracle_routes`` a world whose fakes hold a hand-made history (no run), so
each check is seen failing on exactly the record that breaks it.
"""

from __future__ import annotations

import pytest

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

from oracle_routes import check_pixiv, check_routes
from world_pixiv import AccountDoor, SsmTwin, TOKEN_PARAMETER
from world_routes import RouteFakes

from pixivflow.domain.review import review_id
from pixivflow.local.route_fakes import BotCall, Part

SIM = Path(__file__).resolve().parent / "sim.py"
CHAT = "-1004318193445"


class _NoSlots:
    def slot_ids(self) -> list[str]:
        return []


def routes_world(fakes: RouteFakes) -> SimpleNamespace:
    rt = SimpleNamespace(wiring=SimpleNamespace(ledger=_NoSlots()))
    return SimpleNamespace(fakes=fakes, rt=rt, clock=SimpleNamespace(now_ms=lambda: 0), counts=Counter())


def page_post(work_id: str, page: int) -> BotCall:
    return BotCall("sendPhoto", "7012345678:token", {"chat_id": CHAT},
                   {"photo": Part("photo", f"{work_id}_p{page}.png", "image/png", b"\x89PNG")}, ok=True, message_ids=[1])


def card(rid: str) -> BotCall:
    return BotCall("sendMessage", "7012345678:token", {"chat_id": CHAT, "text": f"🧾 审核 {rid}\nslot"}, {}, ok=True)


def test_a_page_or_a_card_in_the_review_chat_twice_is_a_violation():
    fakes = RouteFakes()
    rid = review_id("cats", "illustration", "111")
    fakes.control.reviews[rid] = {"review_id": rid, "work_id": "111", "status": "pending", "slot_id": "s"}
    fakes.telegram.calls += [page_post("111", 0), card(rid)]
    assert check_routes(routes_world(fakes)) == []
    fakes.telegram.calls += [page_post("111", 0), card(rid)]  # the re-claimed row posted again
    problems = check_routes(routes_world(fakes))
    assert problems == ["[R1] telegram: page 111_p0.png is in the review chat 2 times",
                        f"[R1] telegram: review {rid} has 2 control cards"]
    fakes.close()


def test_a_post_without_a_review_record_is_a_violation_and_an_uncertain_record_covers_it():
    fakes = RouteFakes()
    fakes.telegram.calls.append(page_post("222", 0))  # posted, then the invocation died
    assert check_routes(routes_world(fakes)) == [
        "[R2] telegram: work 222 is in the review chat with no review record at the control plane"]
    rid = review_id("cats", "illustration", "222")
    fakes.control.reviews[rid] = {"review_id": rid, "work_id": "222", "status": "uncertain", "slot_id": "s"}
    assert check_routes(routes_world(fakes)) == []  # the next attempt said so at the control plane
    fakes.close()


def test_a_notice_repeated_is_counted_and_two_different_notices_under_one_key_are_a_violation():
    fakes = RouteFakes()
    body = {"text": "❌ PixivFlow 本次处理失败", "idempotency_key": "notification:s:cats:failed"}
    fakes.telepost.notices += [("/api/bot1/v1/notifications", body)] * 2
    fakes.ambiguous["notification:s:cats:failed"] += 1
    world = routes_world(fakes)
    assert check_routes(world) == []  # at least once: the receiver dedupes the repeat by its key
    assert (world.counts["notice.repeats"], world.counts["notice.repeats_after_lost_answer"]) == (1, 1)
    outcome = {"schedule_id": "m", "slot_id": "m@1", "status": "success", "targets": []}
    fakes.telepost.notices += [("/api/bot1/v1/schedule/outcomes", outcome),
                               ("/api/bot1/v1/schedule/outcomes", {**outcome, "status": "partial"})]
    assert check_routes(routes_world(fakes)) == ["[R3] notice schedule/outcomes|m@1 was sent with 2 different bodies"]
    fakes.close()


def test_a_receiver_refusal_is_a_violation():
    fakes = RouteFakes()
    fakes.telepost.rejections.append(("/api/bot1/v1/submissions", "invalid_previews"))
    fakes.gateway.rejections.append("bad signature")
    assert check_routes(routes_world(fakes)) == [
        "[R4] TelePost refused a submission to /api/bot1/v1/submissions: invalid_previews",
        "[R4] the gateway refused a message: bad signature"]
    fakes.close()


def test_the_pixiv_oracle_sees_the_account_over_its_bound_a_stuck_guard_and_an_early_redispatch():
    from pixivflow.adapters.pixiv.auth import fingerprint

    door = AccountDoor()  # the account's bound: MAX_CONCURRENCY = 1
    a, b = (SimpleNamespace(name=n, state="runnable") for n in ("execute", "sweep"))
    door.enter(a, 5, "GET /v1/search/illust")
    assert door.over == []
    door.enter(b, 6, "GET /v1/illust/detail")
    assert door.over == ["[P1] t=6 2 Pixiv requests in flight (GET /v1/illust/detail): execute, sweep"]
    door.leave(b)
    a.state = "dead"  # a dead invocation's request ended with it
    door.enter(b, 7, "GET /img")
    assert len(door.over) == 1 and door.peak == 2

    ssm = SsmTwin(lambda: False)
    ssm.values[TOKEN_PARAMETER] = ("t0", 1)
    guard = {"fp": fingerprint("t1")}
    calls: list[str] = []  # the oracle's refresh is a real one: the cached access token dropped first
    auth = SimpleNamespace(bearer=lambda: calls.append("refresh"), invalidate=lambda access: calls.append(f"drop {access}"),
                           _access="a1", _store=SimpleNamespace(token_guard=lambda acct: (guard["fp"], None)))
    container = SimpleNamespace(_client=SimpleNamespace(_auth=auth))
    world = SimpleNamespace(door=AccountDoor(), ssm=ssm, counts=Counter(), initial_token="t0", early=["[P3] early"],
                            fake=SimpleNamespace(issued_refresh_tokens=["t1"], expire_access_tokens=lambda: None),
                            containers=SimpleNamespace(fresh=lambda: container))
    assert check_pixiv(world) == ["[P2] after a fresh refresh SSM holds token #0 but the rotation guard names #1 of 1 issued "
                                  "(0 PutParameter writes)", "[P3] early"]
    assert calls == ["drop a1", "refresh"]
    guard["fp"] = fingerprint("t0")
    world.early = []
    assert check_pixiv(world) == []


@pytest.mark.size("large")  # one seed of each of the three worlds (tests/README.md, test sizes)
def test_one_seed_of_each_world_runs_clean_and_meets_its_routes_and_faults():
    # seed 1: the routes world, seed 2: the Pixiv world (sim.variant: seed % 3)
    done = subprocess.run([sys.executable, str(SIM), "--replay", "1,2", "--jobs", "1"], capture_output=True, text=True,
                          timeout=600, env={k: v for k, v in os.environ.items()
                                            if not k.startswith(("POWERTOOLS_", "LOG_LEVEL", "AWS_", "PIXIV", "SIM_"))})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = next(line for line in done.stdout.splitlines() if line.startswith("sim: seeds="))
    assert "seeds=2 " in summary and "violations=0" in summary
    faults = dict(re.findall(r"([\w./-]+)=(\d+)", summary.split("|", 1)[1]))
    for route in ("bot1-review", "bot1-submit", "qq-main"):
        assert int(faults.get(f"intent.{route}.delivered/done", 0)) > 0, (route, summary)
    assert int(faults["route.lost"]) > 0 and int(faults["route.429"]) > 0
    assert int(faults["pixiv.rotations"]) > 0 and int(faults["pixiv.deferred"]) > 0
    assert int(faults["pixiv.peak_in_flight"]) == 1  # maxConcurrency: 1
