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
