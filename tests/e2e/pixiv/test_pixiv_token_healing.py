"""Issue 24: the rotation guard heals. Through the real handlers on moto (SSM included) and the
loopback fake Pixiv: a rotation whose PutParameter failed, and a token pasted into SSM by hand,
are both picked up at the next refresh, with one warning line naming what happened and never the
token."""

from __future__ import annotations

import pytest

from pixivflow import aws, runtime
from pixivflow.adapters.pixiv.auth import fingerprint
from pixivflow.local.fake_pixiv import DEFAULT_REFRESH_TOKEN, FakePixiv

from conftest import ms
from test_pixiv_source import FIRE, PARAM, cells, fake, start, token_pieces  # noqa: F401 - fixtures

NEXT_FIRE = "2026-12-01T23:00:00Z"
NEXT_SLOT = "pixiv-morning@2026-12-02T0800"


def ssm_value() -> str:
    return aws.client("ssm").get_parameter(Name=PARAM, WithDecryption=True)["Parameter"]["Value"]


def guard(rt) -> dict:
    return rt.wiring.ledger._client.get_item(  # noqa: SLF001
        TableName=rt.env["LEDGER_TABLE"], Key={"pk": {"S": "PIXIV#main"}, "sk": {"S": "TOKEN"}}).get("Item") or {}


def next_refresh(rt, pixiv) -> None:
    """The access token ran out: the next occurrence's first request refreshes."""
    pixiv.expire_access_tokens()
    rt.clock.set(ms(NEXT_FIRE))
    rt.fire("pixiv-morning", iso=NEXT_FIRE)
    rt.settle()


def grants(pixiv) -> list[str]:
    return [r.form["refresh_token"] for r in pixiv.requests if r.host == "oauth"]


class FailingPuts:
    """SSM whose PutParameter fails ``times`` times (throttled), then works: the outside service down."""

    def __init__(self, times: int) -> None:
        self.times = times
        self._ssm = aws.client("ssm")

    def __getattr__(self, name):
        return getattr(self._ssm, name)

    def put_parameter(self, **kwargs):
        if self.times:
            from botocore.exceptions import ClientError

            self.times -= 1
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "PutParameter")
        return self._ssm.put_parameter(**kwargs)


def test_a_rotation_whose_put_parameter_failed_is_written_again_at_the_next_refresh(start, downstream, logs, monkeypatch):  # noqa: F811 - fixtures of test_pixiv_source
    ssm = []
    monkeypatch.setattr(runtime, "_ssm_client", lambda: ssm[0])
    with FakePixiv(rotate=True) as fake:  # noqa: F811 - its own fake, rotating
        rt = start(fake, ["cats"])
        ssm.append(FailingPuts(times=1))
        rt.fire("pixiv-morning", iso=FIRE)
        rt.settle()
        assert cells(rt)["cats"].status == "submitted"
        [rotated] = fake.issued_refresh_tokens
        assert ssm_value() == DEFAULT_REFRESH_TOKEN  # the write failed: SSM still has the replaced token
        assert guard(rt)["fingerprint"]["S"] == fingerprint(rotated)
        assert len(logs.events("pixiv.token_persist_failed")) == 1
        fake.rotate = False
        fake.revoke(DEFAULT_REFRESH_TOKEN)  # Pixiv no longer honours the replaced one
        next_refresh(rt, fake)
        assert cells(rt, NEXT_SLOT)["cats"].status == "submitted"
        assert ssm_value() == rotated  # healed
        healed = logs.events("pixiv.token_healed")
        assert [h["cause"] for h in healed] == ["put_parameter_failed"]
        assert grants(fake) == [DEFAULT_REFRESH_TOKEN, rotated]
        _, out = logs()
        assert not [p for p in token_pieces(DEFAULT_REFRESH_TOKEN, rotated) if p in out]


def test_a_token_pasted_into_ssm_by_hand_is_used_and_recorded_at_the_next_refresh(start, fake, downstream, logs):  # noqa: F811 - fixtures of test_pixiv_source
    rt = start(fake, ["cats"])
    rt.fire("pixiv-morning", iso=FIRE)
    rt.settle()
    pasted = "operator-pasted-token-8d2e41f0"
    aws.client("ssm").put_parameter(Name=PARAM, Value=pasted, Type="SecureString", Overwrite=True)
    fake.accept(pasted)
    fake.revoke(DEFAULT_REFRESH_TOKEN)
    next_refresh(rt, fake)
    assert cells(rt, NEXT_SLOT)["cats"].status == "submitted"
    assert grants(fake) == [DEFAULT_REFRESH_TOKEN, pasted]  # the refused token was never sent again
    assert guard(rt)["fingerprint"]["S"] == fingerprint(pasted)
    assert [h["cause"] for h in logs.events("pixiv.token_healed")] == ["pasted_by_hand"]
    _, out = logs()
    assert not [p for p in token_pieces(DEFAULT_REFRESH_TOKEN, pasted) if p in out]


@pytest.mark.size("large")  # three refreshes across occurrences (tests/README.md, test sizes)
def test_a_token_pasted_by_hand_after_a_rotation_wins_over_the_rotated_one(start, downstream, logs):  # noqa: F811 - fixtures of test_pixiv_source
    with FakePixiv(rotate=True) as fake:  # noqa: F811 - its own fake, rotating
        rt = start(fake, ["cats"])
        rt.fire("pixiv-morning", iso=FIRE)
        rt.settle()
        [rotated] = fake.issued_refresh_tokens
        assert ssm_value() == rotated
        fake.rotate = False
        pasted = "operator-pasted-token-after-rotation-1c"
        aws.client("ssm").put_parameter(Name=PARAM, Value=pasted, Type="SecureString", Overwrite=True)
        fake.accept(pasted)
        next_refresh(rt, fake)
        assert grants(fake) == [DEFAULT_REFRESH_TOKEN, pasted]
        assert guard(rt)["fingerprint"]["S"] == fingerprint(pasted)
        assert [h["cause"] for h in logs.events("pixiv.token_healed")] == ["pasted_by_hand"]
