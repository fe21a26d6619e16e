"""The simulation's baton kills an invocation at its Lambda timeout, as Lambda would (issue 20): the
product's "its writer is dead by now" rules (an outcome record still open after a minute is
orphaned, spec §13.18; no executor outlives its lease; a claim outlives the function's timeout by
design, DESIGN §5) rest on it, so a simulated invocation that outlived its timeout made the
simulation report violations no deployment can have.

Histories ``make sim`` found in the harness itself, each driven explicitly (seed replays drift with
the call order): seeds 158 and 738 of the demo world (an invocation frozen past its timeout carried
on) and seed 178 of the routes world (one whose timeout passed while it waited for the baton still
sent its next call). The product-side bugs of the routes world (seeds 739, 1006, 1357, 1633: a
review posted, its record refused, then a consumer's cancel) are
tests/e2e/delivery/test_telegram_unrecorded_posts.py; the orphaned outcome record re-logged twice
(seed 31) is tests/e2e/sweep/test_outcome_recovery.py.
"""

from __future__ import annotations

import random

from baton import Baton, SteppedClient
from test_concurrent_sim import _Twin


def test_an_invocation_frozen_past_its_function_timeout_dies_at_its_next_step():
    """Seeds 158 and 738 (make sim, 1,000 seeds): a sweep froze for 162 s between logging a slot's
    ``schedule.outcome`` and closing the slot, and an executor for 210 s between storing a work and
    writing its delivery row; both then carried on. The product's "its writer is dead by now" rules
    (an outcome record still open after a minute is orphaned, spec §13.18; no executor outlives its
    lease) rest on Lambda killing an invocation at its timeout (60 s here), so the deliverer that
    logged the record again and the cancel that closed the slot were right. The baton now kills
    an invocation at the first step past its deadline, as Lambda would: nothing after it runs."""
    from world import FUNCTION_TIMEOUT_MS

    from pixivflow.clock import VirtualClock

    clock = VirtualClock(0)
    twin = _Twin()
    client = SteppedClient(twin, "dynamodb")
    baton = Baton(clock, random.Random(1), switch=0.0, timeouts=FUNCTION_TIMEOUT_MS)
    ran: list[str] = []

    def sweep():
        client.put_item(n=1)  # the outcome record (its creator logs it)
        clock.advance(FUNCTION_TIMEOUT_MS["sweep"])  # the container freezes for the rest of its time
        client.put_item(n=2)  # the close: Lambda killed the invocation before it
        ran.append("after the close")

    fast = baton.spawn("sweep", lambda: client.put_item(n=0))  # well within its time: runs to its end
    baton.drain()
    frozen = baton.spawn("sweep", sweep)
    baton.drain()
    assert (fast.state, frozen.state) == ("done", "dead")
    assert twin.calls == ["put 0", "put 1"] and ran == []
    assert baton.counts["timeout"] == 1 and baton.deaths[-1].endswith("in sweep (function timeout)"), baton.deaths
    baton.release_dead()


def test_the_simulated_function_timeouts_are_the_templates():
    """The kill above is only as true as its numbers: they are template.yaml's."""
    from world import FUNCTION_TIMEOUT_MS

    from pixivflow.local.template import default_template_path, load_template

    tpl = load_template(default_template_path())
    logical = {"execute": "ExecuteFunction", "deliver": "DeliverFunction", "sweep": "StallSweepFunction",
               "trigger": "TriggerFunction", "job_events": "JobEventsFunction"}
    for name, logical_id in logical.items():
        own = tpl["Resources"][logical_id]["Properties"].get("Timeout")
        seconds = int(own if own is not None else tpl["Globals"]["Function"]["Timeout"])
        assert FUNCTION_TIMEOUT_MS[name] == seconds * 1000, name


def test_an_invocation_whose_timeout_passed_while_it_waited_for_the_baton_dies_before_its_call():
    """Seed 178 of the routes world: an invocation whose Lambda timeout passed while it waited for the
    baton (other invocations ran, the clock ran on) still sent its next call: a deliverer resumed
    minutes after its 60 s deadline, outlived its 120 s claim and recorded a Telegram review
    ``pending`` over the ``uncertain`` record of the row's next claimer. The harness now kills it
    before the call."""
    from pixivflow.clock import VirtualClock

    clock = VirtualClock(0)
    twin = _Twin()
    client = SteppedClient(twin, "dynamodb")
    baton = Baton(clock, random.Random(1), switch=1.0, timeouts={"deliver": 60_000})
    ran: list[str] = []

    def deliver():
        client.put_item(n=1)
        ran.append("after the call")

    inv = baton.spawn("deliver", deliver)
    assert baton.run_one() is inv and inv.state == "runnable"  # it reached its step and handed the baton back
    assert twin.calls == []
    clock.advance(200_000)  # others run meanwhile: its 60 s pass
    baton.drain()
    assert inv.state == "dead" and twin.calls == [] and ran == []  # dead before the request went out
    assert baton.deaths == [f"t={clock.now_ms()} before dynamodb.put_item in deliver (function timeout)"]
    baton.release_dead()
