"""The Pixiv world of the simulation (world_pixiv) and the bug it found (issue 24).

The rotation guard records each refresh-token rotation before the token is written to SSM. When
that PutParameter failed and the container that rotated was gone (Lambda recycles containers), SSM
kept the replaced token and the guard named one nobody held any more: every later rotation, made
from SSM's token, lost the guard's condition, so no rotation was ever persisted again (issue 24's
"the rotation guard never recovers", across containers). A rotation from SSM's token now replaces
the lost one while the guard is still exactly that. Seed 4064 found the same dead end for a warm
container whose own rotation had lost the race to the lost one: it rotates from a token SSM never
held, so the replacement is conditional on the guard as read, not on the rotation's start.
"""

from __future__ import annotations

import pytest

from conftest import write_config
from world_pixiv import SECRETS_PATH, TOKEN_PARAMETER, SsmTwin, pixiv_config

from pixivflow.adapters.pixiv import MemoryPixivAccounts, build_source
from pixivflow.adapters.pixiv.auth import LOST_ROTATION_MS, fingerprint
from pixivflow.adapters.pixiv.secrets import SecretResolver
from pixivflow.clock import VirtualClock
from pixivflow.config import load_config
from pixivflow.local.fake_pixiv import DEFAULT_REFRESH_TOKEN, FakePixiv


@pytest.fixture
def account(tmp_path, monkeypatch):
    """``(fake, ssm, store, container)``: ``container()`` is a new Lambda container's Pixiv source."""
    monkeypatch.delenv("PIXIV_REFRESH_TOKEN", raising=False)
    with FakePixiv(rotate=True) as fake:
        config = load_config(str(write_config(tmp_path, "http://127.0.0.1:9/review", pixiv_config(fake.url))))
        throttled = [False]
        ssm = SsmTwin(lambda: throttled[0])
        ssm.values[TOKEN_PARAMETER] = (DEFAULT_REFRESH_TOKEN, 1)
        store, clock = MemoryPixivAccounts(), VirtualClock(1_764_543_600_000)

        def container(log=None):
            return build_source(config, now_ms=clock.now_ms, uniform=lambda: 0.5, store=store, sleep=lambda s: None,
                                resolver=SecretResolver(SECRETS_PATH, ssm=ssm, sleep=lambda s: None), log=log)

        yield fake, ssm, store, container, throttled, clock


def refresh(source) -> None:
    source._client._auth.bearer()  # noqa: SLF001 - the container's first request refreshes


def test_a_rotation_lost_with_its_container_is_replaced_by_the_next_containers_rotation(account):
    fake, ssm, store, container, throttled, clock = account
    throttled[0] = True  # the first container's PutParameter is refused, then the container is gone
    refresh(container())
    [lost] = fake.issued_refresh_tokens
    assert ssm.values[TOKEN_PARAMETER][0] == DEFAULT_REFRESH_TOKEN and store.token_guard("main")[0] == fingerprint(lost)
    throttled[0] = False
    clock.advance(LOST_ROTATION_MS)  # long after: that container is gone (a live one writes SSM at once)
    refresh(container())  # a new container starts from SSM's token
    newest = fake.issued_refresh_tokens[-1]
    assert newest != lost
    assert ssm.values[TOKEN_PARAMETER][0] == newest  # persisted: the chain goes on from SSM
    assert store.token_guard("main") == (fingerprint(newest), fingerprint(DEFAULT_REFRESH_TOKEN))
    fake.expire_access_tokens()
    refresh(container())  # and the next rotation is recorded as usual
    assert ssm.values[TOKEN_PARAMETER][0] == fake.issued_refresh_tokens[-1] != newest
    assert store.token_guard("main")[0] == fingerprint(fake.issued_refresh_tokens[-1])


def test_a_warm_container_whose_own_rotation_lost_the_race_replaces_a_lost_rotation(account):
    # make sim seed 4064: container A rotates rt-0 -> rt-1 and records it in the guard, but its
    # PutParameter is throttled and A is gone. Container B, seconds later, still reads rt-0 from SSM,
    # rotates it to rt-2 and loses the guard's race (rt-1 is young); B stays warm on rt-2, a token
    # neither SSM nor the guard names. Long after, B's next refresh judges rt-1 lost, but its rotation
    # starts from rt-2, not from SSM's rt-0: it must still replace the lost one (the guard being exactly
    # as read), or B, the one container Lambda keeps reusing, never persists a rotation again.
    fake, ssm, store, container, throttled, clock = account
    throttled[0] = True
    refresh(container())
    throttled[0] = False
    lines = []
    warm = container(log=lambda level, message, **fields: lines.append((level, fields)))
    refresh(warm)
    lost, held = fake.issued_refresh_tokens
    assert ssm.values[TOKEN_PARAMETER][0] == DEFAULT_REFRESH_TOKEN
    assert store.token_guard("main") == (fingerprint(lost), fingerprint(DEFAULT_REFRESH_TOKEN))
    clock.advance(max(LOST_ROTATION_MS, fake.expires_in * 1000))  # B's access token runs out an hour later
    fake.revoke(DEFAULT_REFRESH_TOKEN)  # should Pixiv stop honouring SSM's stale token, the account still lives
    refresh(warm)
    newest = fake.issued_refresh_tokens[-1]
    assert ssm.values[TOKEN_PARAMETER][0] == newest  # persisted: a cold start reads the live chain
    assert store.token_guard("main") == (fingerprint(newest), fingerprint(held))
    healed = [(level, fields["cause"]) for level, fields in lines if fields.get("event") == "pixiv.token_healed"]
    assert healed == [("warning", "rotation_lost")]  # the operator's one line, and no token in any line
    assert not any(token in repr(lines) for token in (DEFAULT_REFRESH_TOKEN, *fake.issued_refresh_tokens))
    fake.expire_access_tokens()
    refresh(container())  # a cold container goes on from SSM's token, and its rotation is recorded
    assert ssm.values[TOKEN_PARAMETER][0] == fake.issued_refresh_tokens[-1] != newest
    assert store.token_guard("main")[0] == fingerprint(fake.issued_refresh_tokens[-1])


def test_a_rotation_whose_container_lives_is_not_replaced_by_a_sibling(account):
    # The guard's first-rotation-wins rule still holds while the rotation is young: a container on
    # the replaced token (read before the rotation) heals onto SSM's token, never over it.
    fake, ssm, store, container, _, clock = account
    stale = container()
    stale._client._auth._token.current()  # noqa: SLF001 - it read SSM's token before the rotation
    refresh(container())
    [rotated] = fake.issued_refresh_tokens
    assert ssm.values[TOKEN_PARAMETER][0] == rotated
    refresh(stale)  # heals onto SSM's token (the guard's), then rotates from it
    assert ssm.values[TOKEN_PARAMETER][0] == fake.issued_refresh_tokens[-1]
    assert store.token_guard("main")[0] == fingerprint(fake.issued_refresh_tokens[-1])
    assert len(ssm.writes) == 2


@pytest.fixture(params=["memory", "dynamo"])
def accounts(request):
    if request.param == "memory":
        yield MemoryPixivAccounts()
        return
    import boto3
    from moto import mock_aws

    from pixivflow.adapters.pixiv.account_store import DynamoPixivAccounts
    from pixivflow.local.provision import provision

    with mock_aws():
        yield DynamoPixivAccounts(boto3.client("dynamodb"), provision()["LEDGER_TABLE"])


def test_a_lost_rotation_is_replaced_once_and_only_while_the_guard_still_names_it(accounts):
    t0, t1, t2, t3, t4, t5 = (fingerprint(t) for t in ("rt-0", "rt-1", "rt-2", "rt-3", "rt-4", "rt-5"))
    assert accounts.rotate_token("main", t0, t1, 1)  # rotated, but rt-1 never reached SSM
    assert not accounts.rotate_token("main", t0, t3, 2)  # without lost=: the first rotation wins
    assert not accounts.rotate_token("main", t0, t3, 2, lost=(t1, t2))  # the guard is no longer as that reader saw it
    assert accounts.rotate_token("main", t0, t3, 3, lost=(t1, t0))  # rt-1 is lost: a rotation from SSM's rt-0 replaces it
    assert accounts.token_guard("main") == (t3, t0) and accounts.token_rotated_at("main") == 3
    assert not accounts.rotate_token("main", t0, t4, 4, lost=(t1, t0))  # a second container that saw rt-1 lost: too late
    assert accounts.token_guard("main") == (t3, t0)
    # Seed 4064: the rotation replacing a lost one may start from a token SSM never held (a warm
    # container's own rotation that lost the guard's race), as long as the guard is still as read.
    assert accounts.rotate_token("main", t2, t5, 5, lost=(t3, t0))
    assert accounts.token_guard("main") == (t5, t2)
