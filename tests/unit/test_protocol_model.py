"""The protocol check (``make check-protocol``) on its smallest scope, in make test: the rule in the
code holds in every state of a cancelled job against a recovering cell, and the rule it replaced
is found wrong there, with a trace ending in the false report."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from pixivflow.domain import reservation

_SPEC = importlib.util.spec_from_file_location("check_protocol", Path(__file__).resolve().parents[1] / "protocol" / "check_protocol.py")
check_protocol = importlib.util.module_from_spec(_SPEC)
sys.modules.setdefault("check_protocol", check_protocol)  # its dataclasses look their module up
_SPEC.loader.exec_module(check_protocol)


def test_the_rule_holds_in_every_state_of_a_cancelled_job_against_a_recovering_cell() -> None:
    initial, jobs = check_protocol.scenarios()["cancelled job vs a recovering cell"]
    states, trace, problem = check_protocol.explore(initial, jobs, reservation.holder_verdict)
    assert (problem, trace) == (None, None) and states > 1_000


def test_the_rule_that_trusted_every_holder_is_found_wrong_with_its_trace() -> None:
    initial, jobs = check_protocol.scenarios()["cancelled job vs a recovering cell"]
    states, trace, problem = check_protocol.explore(initial, jobs, lambda cell, row: reservation.HOLDS)
    assert problem is not None and "never received the work" in problem
    assert trace[0] == "start" and "cancel job" in trace
