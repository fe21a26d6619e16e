"""Deterministic scenario tests of what make sim's routes world found (issues 20, 23), one per
bug, each driving its interleaving explicitly (seed replays drift with the call order).

* seed 178: an invocation whose Lambda timeout passed while it waited for the baton (other
  invocations ran, the clock ran on) still sent its next call: a deliverer resumed minutes after
  its 60 s deadline, outlived its 120 s claim and recorded a Telegram review ``pending`` over the
  ``uncertain`` record of the row's next claimer. No real invocation does that (the claim outlives
  the function's timeout by design, DESIGN §5); the harness now kills it before the call.

The product-side bugs of the same world (seeds 739, 1006, 1357, 1633: a review posted, its record
refused, then a consumer's cancel) are tests/e2e/delivery/test_telegram_unrecorded_posts.py; the orphaned
outcome record re-logged twice (seed 31) is tests/e2e/sweep/test_outcome_recovery.py.
"""

from __future__ import annotations

import random

from baton import Baton, SteppedClient
from test_concurrent_sim import _Twin


def test_an_invocation_whose_timeout_passed_while_it_waited_for_the_baton_dies_before_its_call():
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
