"""Running the `pixivflow` command in-process against the embedded runtime (issue 12 tests).

The operator commands make their clients with ``pixivflow.aws``, so against a runtime on the
twins (or on moto) they read exactly the ledger the handlers wrote. ``LEDGER_TABLE`` and
``OUTBOX_QUEUE_URL`` are in the environment the runtime set, as they would be in an operator's
shell pointed at a stack."""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass

from pixivflow.cli import main
from support.queues import take


@dataclass
class Run:
    code: int
    out: str
    err: str


def pixivflow(*argv: str, now: int) -> Run:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv), now_ms=lambda: now)
    return Run(code, out.getvalue(), err.getvalue())


# -- one known ledger: a success, a partial and a stalled occurrence -------------------------------------

T0_ISO = "2026-11-30T23:00:00Z"  # 08:00 in Tokyo on 2026-12-01: a fire of "0 8 * * *"
SECOND = 1000
MINUTE = 60_000
SUCCESS = "morning-tokyo@2026-12-01T0800"
PARTIAL = "mixed@2026-12-01T0800"
STALLED = "solo@2026-12-01T0800"
GHOST = "exec-ghost-that-died"


def known_config(cfg: dict) -> None:
    """The demo config plus ``mixed`` (cats + a tag nothing carries) and ``solo`` (cats alone)."""
    cfg["schedules"].append({"id": "mixed", "cron": "0 8 * * *", "timezone": "Asia/Tokyo", "targetIds": ["cats", "nothing"]})
    cfg["schedules"].append({"id": "solo", "cron": "0 8 * * *", "timezone": "Asia/Tokyo", "targetIds": ["cats"]})
    cfg["targets"].append({"id": "nothing", "type": "illustration", "mode": "search", "tag": "no-such-tag", "limit": 1,
                           "storageMode": "cache", "delivery": {"target": "review"}})


def drop_execution_messages(rt) -> int:
    return len(take(rt, "EXECUTION_QUEUE_URL", visibility_s=30))


def execute_in_order(rt, slot_id: str, targets: list[str]) -> None:
    """Execute the slot's cells one by one in this order, then deliver: the same works are bound and the
    same ledger written whichever order a backend's queue would have handed the messages over in."""
    from pixivflow.domain.outbox import OutgoingMessage
    from pixivflow.services.messages import execution_body

    drop_execution_messages(rt)
    for target_id in targets:
        rt.wiring.queues.send_execution([OutgoingMessage(execution_body(slot_id, target_id))])
        assert rt.pumps["execute"].poll() == 1
    rt.pump()


def review_ids_by_target(downstream) -> None:
    """The loopback review endpoint names each review after its target (not after arrival order)."""
    downstream.state.responder = lambda req: (200, {"data": {"review_id": f"r-{req.body['target_id']}",
                                                             "status": "pending_review", "reused": False}})


def known_ledger(make_runtime, downstream, **runtime):
    """Writes the three occurrences through the real handlers and returns the runtime with its clock
    left at T0 + 10 min: ``solo`` is then running on an expired lease (call :func:`stall` to end it)."""
    from conftest import ms

    t0 = ms(T0_ISO)
    review_ids_by_target(downstream)
    rt = make_runtime(T0_ISO, mutate=known_config, **runtime)
    rt.fire("morning-tokyo", t0)  # admitted at 23:00:00
    rt.clock.set(t0 + 2 * SECOND)
    execute_in_order(rt, SUCCESS, ["cats", "landscape", "ranking-daily"])  # executed and delivered at 23:00:02
    rt.clock.set(t0 + 3 * SECOND)
    rt.fire("mixed", t0)  # the same fire, its own schedule: admitted at 23:00:03
    rt.clock.set(t0 + 4 * SECOND)
    execute_in_order(rt, PARTIAL, ["cats", "nothing"])
    rt.clock.set(t0 + 5 * SECOND)
    rt.fire("solo", t0)
    assert drop_execution_messages(rt) == 1  # the executor took the message ...
    rt.clock.set(t0 + 6 * SECOND)
    pending = rt.wiring.ledger.load(STALLED).cell("cats")  # admission writes the slot alone: the first claim writes the cell
    assert rt.wiring.ledger.claim_cell(STALLED, "cats", GHOST, t0 + 6 * SECOND, 180_000, unwritten=pending) is not None
    assert rt.wiring.ledger.mark_slot_running(STALLED, t0 + 6 * SECOND)  # ... and died
    rt.clock.set(t0 + 10 * MINUTE)
    return rt


def stall(rt) -> None:
    """The sweep 16 minutes after the fire: the executor has not been heard of for 15 min."""
    from conftest import ms

    rt.clock.set(ms(T0_ISO) + 16 * MINUTE)
    result = rt.sweep()
    assert result["stalledNoHeartbeat"] == 1, result
