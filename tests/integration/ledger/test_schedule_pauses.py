"""SchedulePauses (``pixivflow.ports.SchedulePauses``): an operator's pause of a schedule (``SchedulePause``),
flipped by conditional writes.

The role's part of the ledger's contract suite (``ledger_env.py``: both backends, every test)."""

from __future__ import annotations

import ledger_env
from ledger_env import T0, Env

from pixivflow.domain.pause import SchedulePause

env = ledger_env.env


def test_a_pause_flips_once_and_a_resume_only_flips_a_paused_schedule(env: Env) -> None:
    sid = "morning-tokyo"
    assert env.ledger.schedule_pause(sid) is None
    assert env.ledger.resume_schedule(sid, "alice", T0) is None  # never paused: nothing to resume
    assert env.ledger.schedule_pause(sid) is None  # and the refused flip wrote nothing
    paused = env.ledger.pause_schedule(sid, "alice", T0 + 1)
    assert paused == SchedulePause(sid, True, paused_at=T0 + 1, resumed_at=None, by="alice")
    assert env.ledger.pause_schedule(sid, "bob", T0 + 2) is None  # two operators racing: the second is told it is done
    assert env.ledger.schedule_pause(sid) == paused
    resumed = env.ledger.resume_schedule(sid, None, T0 + 3)
    assert resumed == SchedulePause(sid, False, paused_at=T0 + 1, resumed_at=T0 + 3, by=None)
    assert env.ledger.resume_schedule(sid, "bob", T0 + 4) is None
    assert env.ledger.schedule_pause(sid) == resumed
    assert env.ledger.pause_schedule(sid, "bob", T0 + 5) == SchedulePause(sid, True, paused_at=T0 + 5, resumed_at=T0 + 3, by="bob")
    assert env.ledger.schedule_pause("evening-berlin") is None  # one item per schedule
