"""The Pixiv source end to end (issue 10): the real handlers on moto, the real client code, and
the local fake Pixiv on 127.0.0.1 (``pixivflow.local.fake_pixiv``) behind
``source: {"kind": "pixiv", "baseUrls": ...}``.

The refresh token comes from SSM below ``ROUTE_SECRETS_PATH`` through a ``${VAR}`` reference,
as in a deployment. ``sleep`` (pacing, quick retries) advances the virtual clock instead of
sleeping.
"""

from __future__ import annotations

import hashlib
import json
from urllib.parse import parse_qs, urlsplit

from pixivflow import aws
import pytest

from conftest import ms
from pixivflow.adapters.pixiv.auth import fingerprint
from pixivflow.local.fake_pixiv import DEFAULT_REFRESH_TOKEN, FakePixiv
from pixivflow.services.execution import execute_cell
from support.builders import fake_pixiv, pixiv_config, pixiv_runtime

FIRE = "2026-11-30T23:00:00Z"  # 08:00 in Tokyo
SLOT = "pixiv-morning@2026-12-01T0800"
SECRETS = "/pixivflow/routes"
PARAM = f"{SECRETS}/PIXIV_E2E_TOKEN"
RATE_LIMIT = {"error": {"user_message": "", "message": "Rate Limit", "reason": "", "user_message_details": {}}}
P0 = "/img-original/img/2026/11/29/21/15/00/91001_p0.png"

TARGETS = {
    "cats": {"id": "cats", "type": "illustration", "mode": "search", "tag": "cats", "limit": 1,
             "storageMode": "cache", "delivery": {"target": "review"}},
    "daily": {"id": "daily", "type": "illustration", "mode": "ranking", "rankingMode": "day", "rankingDate": "YESTERDAY",
              "limit": 1, "storageMode": "cache", "delivery": {"target": "review"}},
    "pinned-novel": {"id": "pinned-novel", "type": "novel", "novelId": 93001, "storageMode": "cache",
                     "delivery": {"target": "review"}},
}


fake = fake_pixiv()


@pytest.fixture
def start(make_runtime, monkeypatch):
    """``start(fake, targets)`` -> a runtime whose source is the real Pixiv client on ``fake``."""
    monkeypatch.setenv("ROUTE_SECRETS_PATH", SECRETS)
    monkeypatch.delenv("PIXIV_REFRESH_TOKEN", raising=False)

    def factory(fake: FakePixiv, targets: list[str], *, token: str = DEFAULT_REFRESH_TOKEN):
        mutate = pixiv_config(fake, [TARGETS[t] for t in targets], pixiv={"refreshToken": "${PIXIV_E2E_TOKEN}", "accountId": "main"},
                              network={"requestPacingMs": 1000, "timeoutMs": 5000})
        sleeps: list[float] = []  # pacing and quick retries pass virtual time
        rt = pixiv_runtime(make_runtime, mutate, sleeps=sleeps, ssm=True, ssm_token=(PARAM, token))  # SSM: moto, beside the twins
        rt.sleeps = sleeps
        return rt

    return factory


def cells(rt, slot_id=SLOT):
    return {c.target_id: c for c in rt.wiring.ledger.load(slot_id).snapshot_cells()}


def s3_objects(rt, prefix):
    s3 = aws.client("s3")
    bucket = rt.env["ARTIFACT_BUCKET"]
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", []))
    out = {}
    for key in keys:
        obj = s3.get_object(Bucket=bucket, Key=key)
        out[key.rsplit("/", 1)[1]] = (obj["ContentType"], obj["Metadata"], obj["Body"].read())
    return out


def fixture_bytes(fake, path):
    return fake.fixtures.files[path]


def bind_before_any_claim(rt, target_id: str, work_id: str) -> None:
    ledger, now = rt.wiring.ledger, rt.clock.now_ms()
    slot = ledger.get_slot(SLOT)
    types = {t.id: t.type for t in rt.wiring.config.targets}
    assert target_id in ledger.ensure_cells(slot, types, now)  # the cells as admission once wrote them
    assert ledger.bind_work(SLOT, target_id, work_id, "novel", now)[0]


def token_pieces(*tokens: str, width: int = 8) -> set[str]:
    return {t[i:i + width] for t in tokens for i in range(0, len(t) - width + 1)}


@pytest.mark.size("large")  # every kind of target through the fake Pixiv (tests/README.md, test sizes)
def test_search_ranking_pinned_novel_and_a_multi_page_work_are_submitted_with_their_files(start, fake, downstream, logs):
    rt = start(fake, ["cats", "daily", "pinned-novel"])
    assert rt.fire("pixiv-morning", iso=FIRE)["slot_id"] == SLOT
    # A pinned novelId cell continues its bound work (spec §5.6): bind it as the pinned-id
    # selection would, so the execution takes the locked path (get_work by id, no search). Its item
    # is written first (a cell's first claim would write it; admission writes the slot alone).
    bind_before_any_claim(rt, "pinned-novel", "93001")
    rt.settle()

    state = rt.wiring.ledger.load(SLOT)
    assert state.slot.status == "success"
    got = cells(rt)
    assert {t: (c.status, c.work_id) for t, c in got.items()} == {
        "cats": ("submitted", "91001"), "daily": ("submitted", "92001"), "pinned-novel": ("submitted", "93001")}
    # The newest "cats" work is a restricted placeholder: the shared selection rules (domain/selection)
    # pass it over before any download and count it in the report's supply, so it is never retried.
    report = got["cats"].candidate_report
    assert report["attempted"] == 1 and report["skipped"] == []
    assert {"code": "restricted", "count": 1} in report["supply"]["reasons"]

    # -- the files in S3: one object per page, right content types, SHA-256 as metadata
    day = "2026/11/29/21/15/00"
    cats = s3_objects(rt, f"{SLOT}/cats/91001/")
    assert sorted(cats) == ["91001_p0.png", "91001_p1.png", "91001_p2.png"]  # one object per page, no manifest
    for n in range(3):
        content_type, metadata, body = cats[f"91001_p{n}.png"]
        assert body == fixture_bytes(fake, f"/img-original/img/{day}/91001_p{n}.png")
        plain = {k: v for k, v in metadata.items() if k != "meta"}
        assert (content_type, plain) == ("image/png", {"sha256": hashlib.sha256(body).hexdigest(), "size": str(len(body)),
                                                       "role": "original", "width": "8", "height": "6"})
        assert json.loads(metadata["meta"])["page"] == n  # what a resumed run re-reads (issue 24)
    novel = s3_objects(rt, f"{SLOT}/pinned-novel/93001/")
    assert novel["93001.txt"][0] == "text/plain; charset=utf-8"
    assert novel["93001.txt"][2].decode("utf-8") == fake.fixtures.texts[93001]
    assert novel["93001_cover.jpg"][0] == "image/jpeg"
    assert s3_objects(rt, f"{SLOT}/daily/92001/")["92001_p0.png"][0] == "image/png"

    # -- the downstream receives the work and its stored files as protocol Assets
    bodies = {r.body["target_id"]: r.body for r in downstream.requests}
    assert len(downstream.requests) == 3 and set(bodies) == {"cats", "daily", "pinned-novel"}
    assert bodies["cats"]["work"]["id"] == "91001" and bodies["cats"]["work"]["page_count"] == 3
    assets = bodies["cats"]["assets"]
    assert [(a["type"], a["role"], a["mime"], a["width"], a["height"], a["name"]) for a in assets] == [
        ("image", "primary", "image/png", 8, 6, f"91001_p{n}.png") for n in range(3)]
    for n, asset in enumerate(assets):
        body = cats[f"91001_p{n}.png"][2]
        assert (asset["bytes"], asset["hash"]) == (len(body), f"sha256:{hashlib.sha256(body).hexdigest()}")
        assert asset["asset_id"] == f"{SLOT}/cats/91001/91001_p{n}.png" and asset["source"] == "pixiv"
        url = urlsplit(asset["locator"]["value"])
        assert asset["locator"]["kind"] == "url" and asset["locator"]["url"] == asset["locator"]["value"]
        assert rt.env["ARTIFACT_BUCKET"] in url.netloc + url.path and url.path.endswith(f"91001_p{n}.png")
        assert parse_qs(url.query)["X-Amz-Expires"] == ["43200"]  # download.assetUrlTtlSeconds
    assert [(a["type"], a["role"], a["mime"]) for a in bodies["pinned-novel"]["assets"]] == [
        ("novel", "primary", "text/plain; charset=utf-8"), ("cover", "cover", "image/jpeg")]

    # -- what the three cells cost against Pixiv (README "What a delivered cell costs Pixiv")
    log = fake.requests
    assert [r.path for r in log if r.host == "oauth"] == ["/auth/token"]  # one grant per container and hour
    api = sorted(r.path for r in log if r.host == "api")
    assert api == ["/v1/illust/ranking", "/v1/search/illust", "/v2/novel/detail", "/webview/v2/novel"]
    images = sorted(r.path.rsplit("/", 1)[1] for r in log if r.host == "image")
    assert images == ["91001_p0.png", "91001_p1.png", "91001_p2.png", "92001_p0.png", "ci93001_master1200.jpg"]
    ranking = next(r for r in log if r.path == "/v1/illust/ranking")
    assert ranking.query == {"mode": "day", "date": "2026-11-30", "filter": "for_ios"}  # YESTERDAY in Japan

    # -- never a token in a log line, not even a piece of one
    _, out = logs()
    pieces = token_pieces(DEFAULT_REFRESH_TOKEN, *fake.issued_access_tokens)
    assert not [p for p in pieces if p in out]
    assert "pixiv.token_refreshed" in out


@pytest.mark.size("large")  # a cooldown lived through on the virtual clock (tests/README.md, test sizes)
@pytest.mark.parametrize("answer", [(429, None, {"Retry-After": "30"}), (403, RATE_LIMIT, {})],
                         ids=["429-with-retry-after", "rate-limit-body-on-403"])
def test_a_rate_limited_cell_keeps_its_work_and_delivers_it_once_after_the_cooldown(start, fake, downstream, answer):
    status, body, headers = answer
    rt = start(fake, ["cats"])
    fake.fail(P0, status, body=body, headers=headers, times=2)
    rt.fire("pixiv-morning", iso=FIRE)
    rt.pump()  # the first execution: search, skip the placeholder, bind 91001, image -> rate limit
    first = cells(rt)["cats"]
    assert (first.status, first.work_id) == ("selected", "91001")  # bound, kept for the retry
    assert first.last_error.startswith("candidate scan hit a job-level outage or a transient failure: ")
    assert f"rate_limited: Pixiv answered HTTP {status} (Rate Limit)" in first.last_error
    assert [(s["code"], s["workId"], s.get("retryable", False)) for s in first.candidate_report["skipped"]] == [
        ("unavailable", "91001", True)]  # the restricted 91000 never reaches the scan (selection rules)
    gate = rt.wiring.ledger._client.get_item(  # noqa: SLF001 - the shared gate item, read raw
        TableName=rt.env["LEDGER_TABLE"], Key={"pk": {"S": "PIXIV#main"}, "sk": {"S": "GATE"}})["Item"]
    assert int(gate["penalties"]["N"]) == 1
    cooldown_until = int(gate["cooldownUntil"]["N"])

    rt.settle()
    c = cells(rt)["cats"]
    assert (c.status, c.work_id) == ("submitted", "91001")
    assert [r.body["work_id"] for r in downstream.requests] == ["91001"]  # exactly once, the same work
    assert [r.path for r in fake.requests if r.path == "/v1/search/illust"] == ["/v1/search/illust"]  # no second search
    p0 = [r for r in fake.requests if r.path == P0]
    assert len(p0) == 3  # two rate-limited answers, then the file
    assert rt.wiring.ledger.get_intent(SLOT, "cats", "review", "illustration", "91001").created_at >= cooldown_until
    gate = rt.wiring.ledger._client.get_item(  # noqa: SLF001
        TableName=rt.env["LEDGER_TABLE"], Key={"pk": {"S": "PIXIV#main"}, "sk": {"S": "GATE"}})["Item"]
    assert int(gate["penalties"]["N"]) == 0  # the first success after the cooldown cleared the penalties


class CrashOnce:
    """The ledger of an executor that dies right before recording the delivery intent."""

    def __init__(self, inner):
        self._inner = inner
        self.fired = False

    def __getattr__(self, name):
        attr = getattr(self._inner, name)
        if name != "put_intent" or self.fired:
            return attr

        def put_intent(*args, **kwargs):
            self.fired = True
            raise RuntimeError("injected crash after download, before the intent")

        return put_intent


def test_a_crash_after_download_re_uses_the_stored_files(start, fake, downstream):
    rt = start(fake, ["cats"])
    rt.fire("pixiv-morning", iso=FIRE)
    wiring = rt.wiring
    real = wiring.ledger
    wiring.ledger = CrashOnce(real)
    with pytest.raises(RuntimeError, match="injected crash"):
        execute_cell(wiring.executions, SLOT, "cats")
    wiring.ledger = real
    assert cells(rt)["cats"].work_id == "91001"
    stored = s3_objects(rt, f"{SLOT}/cats/91001/")
    assert len(stored) == 3  # the three pages (issue 25: no manifest object)

    rt.settle()  # the cell's message runs again: the locked work, its stored files
    assert (cells(rt)["cats"].status, [r.body["work_id"] for r in downstream.requests]) == ("submitted", ["91001"])
    images = [r.path.rsplit("/", 1)[1] for r in fake.requests if r.host == "image"]
    assert sorted(images) == ["91001_p0.png", "91001_p1.png", "91001_p2.png"]  # no second image download
    assert [a["bytes"] for a in downstream.requests[0].body["assets"]] == [len(stored[f"91001_p{n}.png"][2]) for n in range(3)]


def test_a_rejected_refresh_token_ends_the_cell_auth_failed_at_once(start, fake, downstream, logs):
    rt = start(fake, ["cats", "daily"])
    fake.revoke()
    rt.fire("pixiv-morning", iso=FIRE)
    rt.settle()
    got = cells(rt)
    for target in ("cats", "daily"):
        c = got[target]
        assert (c.status, c.terminal_reason_code) == ("failed", "auth_failed")
        assert c.last_error.startswith("auth_failed: ") and c.candidate_report["outages"] == ["pixiv_auth_failure"]
        assert c.attempt_count <= 1  # never retried
    assert downstream.requests == []
    assert {r.path for r in fake.requests} == {"/auth/token"}
    lines, out = logs()
    assert len([line for line in logs.all() if line.get("event") == "pixiv.auth_failed"]) == 1
    assert not [p for p in token_pieces(DEFAULT_REFRESH_TOKEN) if p in out]


def test_a_rotated_refresh_token_is_written_back_to_ssm_once_and_used_from_then_on(start, downstream):
    with FakePixiv(rotate=True) as fake:
        rt = start(fake, ["cats"])
        rt.fire("pixiv-morning", iso=FIRE)
        rt.settle()
        assert cells(rt)["cats"].status == "submitted"
        [rotated] = fake.issued_refresh_tokens
        ssm = aws.client("ssm")
        assert ssm.get_parameter(Name=PARAM, WithDecryption=True)["Parameter"]["Value"] == rotated
        item = rt.wiring.ledger._client.get_item(  # noqa: SLF001
            TableName=rt.env["LEDGER_TABLE"], Key={"pk": {"S": "PIXIV#main"}, "sk": {"S": "TOKEN"}})["Item"]
        assert item["fingerprint"]["S"] == fingerprint(rotated) and rotated not in json.dumps(item)
        # The old token is gone on Pixiv's side; the next grant (after the access token expired)
        # uses the rotated one.
        fake.revoke(DEFAULT_REFRESH_TOKEN)
        fake.expire_access_tokens()
        rt.clock.set(ms("2026-12-01T23:00:00Z"))
        rt.fire("pixiv-morning", iso="2026-12-01T23:00:00Z")
        rt.settle()
        assert cells(rt, "pixiv-morning@2026-12-02T0800")["cats"].status == "submitted"
        grants = [r.form["refresh_token"] for r in fake.requests if r.host == "oauth"]
        assert grants[0] == DEFAULT_REFRESH_TOKEN and grants[-1] == rotated


def test_pixiv_5xx_past_the_quick_retries_keeps_the_bound_work_for_a_later_run(start, fake, downstream):
    rt = start(fake, ["cats"])
    fake.fail(P0, 503, body={"error": {"message": "Service Unavailable"}}, times=3)
    rt.fire("pixiv-morning", iso=FIRE)
    rt.pump()
    first = cells(rt)["cats"]
    assert (first.status, first.work_id, first.candidate_report["outages"]) == ("selected", "91001", ["network_outage"])
    assert "download_failed: image " in first.last_error and "HTTP 503 after 3 attempt" in first.last_error
    assert rt.sleeps.count(1.0) >= 1 and 2.0 in rt.sleeps  # the quick retries, on the virtual clock
    rt.settle()
    assert (cells(rt)["cats"].status, [r.body["work_id"] for r in downstream.requests]) == ("submitted", ["91001"])
    assert len([r for r in fake.requests if r.path == P0]) == 4
    assert len([r for r in fake.requests if r.path == "/v1/search/illust"]) == 1


def test_a_locked_work_that_pixiv_no_longer_has_ends_locked_work_unavailable(start, fake, downstream):
    rt = start(fake, ["pinned-novel"])
    rt.fire("pixiv-morning", iso=FIRE)
    bind_before_any_claim(rt, "pinned-novel", "93999")
    rt.settle()
    c = cells(rt)["pinned-novel"]
    assert c.status == "failed" and c.last_error.startswith("LOCKED_WORK_UNAVAILABLE: locked work 93999 is no longer fetchable")
    assert "HTTP 404" in c.last_error
    assert [r.path for r in fake.requests if r.host == "api"] == ["/v2/novel/detail"]  # not retried, never searched
    assert downstream.requests == []
