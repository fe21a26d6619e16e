"""Issue 24: each answer of Pixiv's token endpoint leads to its documented outcome, through the real
handlers against the loopback fake Pixiv (a deterministic schedule of failures per test).

* ``invalid_grant`` / ``invalid_client`` (the OAuth ``error`` field): terminal ``auth_failed``
  naming the cause, at once (no retry, no second occurrence wasted on it).
* Anything else -- a 400 without the field (Pixiv's 1508 time/hash answer), Cloudflare's HTML
  403, 5xx, 429, a timeout, a dropped connection: retried with backoff inside the invocation;
  when that is exhausted the account cools down and the cell is retried once, at the cooldown's
  end, and succeeds. Never terminal on its own.
"""

from __future__ import annotations

import pytest

from pixivflow.local.fake_pixiv import DEFAULT_REFRESH_TOKEN
from pixivflow.adapters.pixiv.gate import BASE_COOLDOWN_MS
from support.builders import fake_pixiv, pixiv_config, pixiv_runtime

FIRE = "2026-11-30T23:00:00Z"
SLOT = "pixiv-morning@2026-12-01T0800"
TOKEN = "/auth/token"
TARGET = {"id": "daily", "type": "illustration", "mode": "ranking", "rankingMode": "day", "rankingDate": "YESTERDAY",
          "limit": 1, "storageMode": "persistent"}
BAD_1508 = {"has_error": True, "errors": {"system": {"message": "access_denied", "code": 1508}}}
CLOUDFLARE = "<!DOCTYPE html><html><head><title>Just a moment...</title></head><body>cf-challenge</body></html>"
RETRIES = 1  # network.retries: two tries per invocation


fake = fake_pixiv()


@pytest.fixture
def rt(make_runtime, monkeypatch, fake):
    monkeypatch.setenv("PIXIV_REFRESH_TOKEN", DEFAULT_REFRESH_TOKEN)
    return pixiv_runtime(make_runtime, pixiv_config(
        fake, [TARGET], pixiv={"accountId": "main"}, network={"requestPacingMs": 0, "timeoutMs": 1000, "retries": RETRIES},
        download={"requestDelay": 0}))


def grants(fake):
    return [r for r in fake.requests if r.path == TOKEN]


@pytest.mark.parametrize("code, cause", [
    ("invalid_grant", "the refresh token is invalid, expired or revoked"),
    ("invalid_client", "client id/secret were refused"),
])
def test_invalid_grant_and_invalid_client_are_terminal_auth_failed_with_the_cause(rt, fake, logs, code, cause):
    fake.fail(TOKEN, 400, {"has_error": True, "errors": {"system": {"message": "Invalid", "code": 1508}}, "error": code},
              times=99)
    rt.fire("pixiv-morning", iso=FIRE)
    rt.settle()
    cell = rt.wiring.ledger.get_cell(SLOT, "daily")
    assert cell.status == "failed"
    assert cell.last_error.startswith(f"auth_failed: Pixiv OAuth answered HTTP 400 {code}") and cause in cell.last_error
    assert cell.attempt_count == 1 and len(grants(fake)) == 1  # no retry of any kind
    assert rt.wiring.ledger.load(SLOT).slot.status == "failed"
    assert DEFAULT_REFRESH_TOKEN not in cell.last_error
    assert not any(DEFAULT_REFRESH_TOKEN in str(line) for line in logs.all())


def fail_token(fake, answer, times):
    kind = answer[0]
    if kind == "stall":
        fake.interruptions.stall(TOKEN, 1.5, times=times)  # past timeoutMs (1 s)
    elif kind == "drop":
        fake.interruptions.drop(TOKEN, times=times)
    else:
        fake.fail(TOKEN, answer[1], answer[2], answer[3] if len(answer) > 3 else None, times=times)


TRANSIENT = {
    "400-1508-time-hash": ("fail", 400, BAD_1508),
    "403-cloudflare-html": ("fail", 403, CLOUDFLARE),
    "500": ("fail", 500, {"error": "server_error"}),
    "503-html": ("fail", 503, "<html>Service Unavailable</html>"),
    "timeout": ("stall",),
    "dropped-connection": ("drop",),
}


@pytest.mark.parametrize("name", sorted(TRANSIENT))
def test_a_single_blip_is_retried_inside_the_invocation(rt, fake, name):
    fail_token(fake, TRANSIENT[name], times=1)
    rt.fire("pixiv-morning", iso=FIRE)
    rt.settle()
    cell = rt.wiring.ledger.get_cell(SLOT, "daily")
    assert (cell.status, cell.attempt_count) == ("submitted", 1)
    assert len(grants(fake)) == 2
    assert rt.wiring.source.governor.cooldown_until() == 0  # a blip that healed costs no cooldown


@pytest.mark.parametrize("name", sorted(TRANSIENT))
def test_a_lasting_failure_cools_the_account_and_the_cell_retries_once_at_the_cooldowns_end(rt, fake, logs, name):
    fail_token(fake, TRANSIENT[name], times=RETRIES + 1)
    start = rt.clock.now_ms()
    rt.fire("pixiv-morning", iso=FIRE)
    rt.pump()
    cell = rt.wiring.ledger.get_cell(SLOT, "daily")
    assert cell.status != "failed" and not cell.last_error.startswith("auth_failed")
    assert "Pixiv OAuth endpoint" in cell.last_error
    cooldown_end = rt.wiring.source.governor.cooldown_until()
    assert cooldown_end >= start + BASE_COOLDOWN_MS
    rt.settle()
    cell = rt.wiring.ledger.get_cell(SLOT, "daily")
    assert (cell.status, cell.attempt_count) == ("submitted", 2)
    assert len(grants(fake)) == RETRIES + 2
    retry = logs.events("cell.retry_scheduled")
    assert len(retry) == 1 and retry[0]["delay_s"] * 1000 >= cooldown_end - start - 2_000


def test_a_429_from_the_token_endpoint_honours_retry_after_and_is_retried_once(rt, fake):
    fake.fail(TOKEN, 429, {"error": "rate_limited"}, {"Retry-After": "120"})
    start = rt.clock.now_ms()
    rt.fire("pixiv-morning", iso=FIRE)
    rt.pump()
    assert rt.wiring.source.governor.cooldown_until() >= start + 120_000
    rt.settle()
    cell = rt.wiring.ledger.get_cell(SLOT, "daily")
    assert (cell.status, cell.attempt_count) == ("submitted", 2)
    assert len(grants(fake)) == 2  # a rate limit is not hammered with quick retries

