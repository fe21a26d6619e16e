"""UiSessions (``pixivflow.ports.UiSessions``): the operator page's session epoch: a /ui cookie names the epoch
it was issued under and works only while that epoch is current.

The role's part of the ledger's contract suite (``ledger_env.py``: both backends, every test)."""

from __future__ import annotations

import ledger_env
from ledger_env import T0, Env

env = ledger_env.env


def test_a_logout_ends_the_epoch_it_saw_once_however_many_race(env: Env) -> None:
    assert env.ledger.ui_session_epoch() == 0  # before any logout
    assert env.ledger.end_ui_sessions(1, T0) == 0  # a cookie of an epoch never current ends nothing
    assert env.ledger.ui_session_epoch() == 0
    assert env.ledger.end_ui_sessions(0, T0 + 1) == 1
    assert env.ledger.end_ui_sessions(0, T0 + 2) == 1  # a racing logout of the same epoch: already over, not advanced twice
    assert env.ledger.ui_session_epoch() == 1
    assert env.ledger.end_ui_sessions(1, T0 + 3) == 2
    assert env.ledger.end_ui_sessions(5, T0 + 4) == 2
    assert env.ledger.ui_session_epoch() == 2


def test_wrong_logins_are_counted_per_address_and_minute_and_never_past_the_limit(env: Env) -> None:
    minute = T0 // 60_000
    assert env.ledger.login_failures("198.51.100.7", minute) == 0
    assert [env.ledger.count_login_failure("198.51.100.7", minute, 2, T0) for _ in range(3)] == [True, True, False]
    assert env.ledger.login_failures("198.51.100.7", minute) == 2
    assert env.ledger.login_failures("198.51.100.7", minute + 1) == 0  # the next minute starts afresh
    assert env.ledger.login_failures("203.0.113.9", minute) == 0  # another address is its own count
