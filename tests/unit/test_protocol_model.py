"""The protocol check (``make check-protocol``) on its smallest scope, in make test: the rule in the
code holds in every state of a cancelled job against a recovering cell, and the rule it replaced
is found wrong there, with a trace ending in the false report."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


_SPEC = importlib.util.spec_from_file_location("check_protocol", Path(__file__).resolve().parents[1] / "protocol" / "check_protocol.py")
check_protocol = importlib.util.module_from_spec(_SPEC)
sys.modules.setdefault("check_protocol", check_protocol)  # its dataclasses look their module up
_SPEC.loader.exec_module(check_protocol)


def test_the_rule_holds_in_every_state_of_a_cancelled_job_against_a_recovering_cell() -> None:
    initial, jobs = check_protocol.scenarios()["cancelled job vs a recovering cell"]
    states, trace, problem = check_protocol.explore(initial, jobs, check_protocol.RULES["code"])
    assert (problem, trace) == (None, None) and states > 1_000


def test_the_rule_that_trusted_every_holder_is_found_wrong_with_its_trace() -> None:
    initial, jobs = check_protocol.scenarios()["cancelled job vs a recovering cell"]
    states, trace, problem = check_protocol.explore(initial, jobs, check_protocol.RULES["trust-every-holder"])
    assert problem is not None and "never received the work" in problem
    assert trace[0] == "start" and "cancel job" in trace


def test_trusting_a_holders_row_still_in_flight_is_found_wrong() -> None:
    """A job's row a worker is posting may be cancelled and its post never land: a cell that had
    trusted it would report a delivery nobody made."""
    initial, jobs = check_protocol.scenarios()["cancelled job vs a recovering cell"]
    states, trace, problem = check_protocol.explore(initial, jobs, check_protocol.RULES["trust-rows-in-flight"])
    assert problem is not None and "never received the work" in problem
    assert trace[-2:] == ["cancel job", "deliver job/r2: the post under way never lands"]


def test_a_deferral_that_forgets_an_earlier_workers_claim_is_found_wrong() -> None:
    """A worker posts and dies; the next one takes the lapsed claim over and defers (the route not
    ready); the job is cancelled. Forgetting the first claim frees the work, and another cell sends
    it again."""
    initial, jobs = check_protocol.scenarios()["cancelled job vs a recovering cell"]
    states, trace, problem = check_protocol.explore(initial, jobs, check_protocol.RULES["deferral-forgets-the-claim"])
    assert problem == "route r2 received the work from ['job', 'late']"
    assert "deliver job/r2: sent, died before the ACK" in trace and "deliver job/r2: route not ready, deferred" in trace
