"""``make check-protocol``: the reservation protocol (docs/explanation/reservations.md), explored.

An explicit-state model of cells competing for one work over two routes, every interleaving of
their steps explored breadth first, each distinct state once (states are hashed). A step is one
conditional write of the ledger as the code makes it (reserve, take over, bind, release, record a
row, claim, settle), one read the code decides on, or one send; any invocation may die between two
of its steps (at most ``CRASHES`` deaths in a run), after which the sweep hands its cell to a new
invocation. The decision a recovering cell makes about a route another cell holds is the real one:
``domain.reservation.holder_verdict`` on the domain's ``Cell`` and ``Intent`` values.

Checked in every reachable state: no route receives the work from two cells (the downstream
dedupes one cell's retries by its idempotency key, not two cells'); a cell's work never changes once
bound. Checked where the run has ended (no cell open, no row in flight): a cell ``submitted`` or
``duplicate`` has the work on every route. And: from every reachable state such an end is still
reachable (no cell can be kept from ending).

Scenarios: a job's cell that is cancelled (its cancel may die between its releases) and another
occurrence's cell bound to the same work; two recovering cells that split the work's routes; a
fresh selection backing off while a recovering cell holds a route. ``--old-rules`` runs the rules the
code replaced (``RULES``: trusting every holder; trusting a holder's row still in flight; a deferral
that forgets an earlier worker's claim), and the check must find each wrong, with its trace.

Usage: python tests/protocol/check_protocol.py [--rule NAME | --old-rules]"""

from __future__ import annotations

import argparse
import sys
import time
from collections import deque
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator

from pixivflow.domain import reservation
from pixivflow.domain.cells import CellStatus
from pixivflow.domain.model import Cell, Intent, LedgerStatus, OutboxStatus

ROUTES = ("r1", "r2")
WORK = "w"
CRASHES = 2  # deaths of invocations in one run
OPEN = "open"

# A row's state in the model -> what holder_verdict reads of it: (ledger status, outbox status,
# attempts, the worker whose claim began the unsettled stretch). The outbox's moves on a row:
#   pending --claim--> sending --post, ACK--> delivered
#   sending --post, worker dies / worker dies before posting--> lapsed (its lease runs out)
#   sending --route not ready: deferred--> pending (this worker's own claim: no one posted)
#   lapsed --claim (takes the lapsed lease over)--> resending: the first claimer may have posted
#   resending --deferred--> pending_claimed (the first claimer's name stays on the row)
#   pending_claimed --claim--> resending
# A cancel cancels every queued or claimed row; a row a worker may have posted keeps its work
# reserved (``cancelled_claimed``), and a post under way when the cancel commits may still land.
CLAIMED = "dlv-first"
ROW_AS = {"pending": (LedgerStatus.PENDING, OutboxStatus.PENDING, 0, None),
          "sending": (LedgerStatus.PENDING, OutboxStatus.PROCESSING, 0, CLAIMED),
          "lapsed": (LedgerStatus.PENDING, OutboxStatus.PROCESSING, 0, CLAIMED),
          "resending": (LedgerStatus.PENDING, OutboxStatus.PROCESSING, 0, CLAIMED),
          "pending_claimed": (LedgerStatus.PENDING, OutboxStatus.PENDING, 0, CLAIMED),
          "delivered": (LedgerStatus.DELIVERED, OutboxStatus.DONE, 1, None),
          "dup": (LedgerStatus.DUPLICATE, OutboxStatus.DONE, 0, None),
          "cancelled": (LedgerStatus.PENDING, OutboxStatus.CANCELLED, 0, None),
          "cancelled_posting": (LedgerStatus.PENDING, OutboxStatus.CANCELLED, 0, CLAIMED),  # a post under way
          "cancelled_claimed": (LedgerStatus.PENDING, OutboxStatus.CANCELLED, 0, CLAIMED),
          "dead": (LedgerStatus.FAILED, OutboxStatus.DEAD, 0, None),
          "dead_claimed": (LedgerStatus.FAILED, OutboxStatus.DEAD, 1, None),  # dead-lettered after a claim
          "uncertain": (LedgerStatus.FAILED, OutboxStatus.DEAD, 0, None)}  # recorded, never sent (binding)
IN_FLIGHT = ("pending", "sending", "lapsed", "resending", "pending_claimed", "cancelled_posting")
CLAIMS = {"pending": "sending", "pending_claimed": "resending", "lapsed": "resending"}
CANCELS = {"pending": "cancelled", "pending_claimed": "cancelled_claimed", "lapsed": "cancelled_claimed",
           "sending": "cancelled_posting", "resending": "cancelled_posting"}


@dataclass(frozen=True)
class State:
    status: tuple[tuple[str, str], ...]  # cell -> open | submitted | duplicate | failed | no_candidate
    bound: tuple[tuple[str, str | None], ...]  # cell -> its work
    owner: tuple[tuple[str, str | None], ...]  # route -> the cell holding the work on it
    rows: tuple[tuple[tuple[str, str], str], ...]  # (cell, route) -> row state
    pending_cells: frozenset[str]  # cells whose outcome is delivery_pending (rollup may settle them)
    due: frozenset[str]  # cells with a message to run (or re-run after a death)
    running: tuple[tuple[str, tuple[Any, ...]], ...]  # process -> its remaining program and locals
    downstream: frozenset[tuple[str, str]]  # (route, cell) the downstream recorded
    deaths: int

    def get(self, field: str, key: Any) -> Any:
        return dict(getattr(self, field)).get(key)

    def put(self, field: str, key: Any, value: Any) -> "State":
        items = dict(getattr(self, field))
        if value is None and field in ("running",):
            items.pop(key, None)
        else:
            items[key] = value
        return replace(self, **{field: tuple(sorted(items.items(), key=lambda kv: repr(kv[0])))})


def _cell_value(state: State, cell: str) -> Cell | None:
    status = state.get("status", cell)
    mapped = {OPEN: CellStatus.DELIVERY_PENDING if cell in state.pending_cells else CellStatus.SELECTED,
              "submitted": CellStatus.SUBMITTED, "duplicate": CellStatus.DUPLICATE, "failed": CellStatus.FAILED,
              "no_candidate": CellStatus.NO_CANDIDATE}[status]
    return Cell(slot_id=cell, target_id="t", status=mapped, work_id=state.get("bound", cell))


def _row_value(state: State, cell: str, route: str) -> Intent | None:
    row = state.get("rows", (cell, route))
    if row is None:
        return None
    ledger, outbox, attempts, claimed = ROW_AS[row]
    return Intent(slot_id=cell, target_id="t", route=route, work_type="illustration", work_id=WORK, idempotency_key=cell,
                  status=ledger, outbox_status=outbox, attempts=attempts, unsettled_claim=claimed)


@dataclass(frozen=True)
class Rule:
    """What the model runs: the verdict a recovering cell applies to a held route, and whether a
    worker's deferral of a row it took over from a lapsed claim keeps that claim on the row."""

    verdict: Callable[..., str]
    deferral_keeps_claim: bool = True


def _trust_every_holder(cell: Cell | None, row: Intent | None) -> str:
    return reservation.HOLDS


def _trust_rows_in_flight(cell: Cell | None, row: Intent | None) -> str:
    if row is not None and row.actionable and row.may_be_downstream:
        return reservation.HOLDS
    return reservation.holder_verdict(cell, row)


RULES = {
    "code": Rule(reservation.holder_verdict),
    # Rules the code once had or nearly had: each must be found wrong, with a trace.
    "trust-every-holder": Rule(_trust_every_holder),
    "trust-rows-in-flight": Rule(_trust_rows_in_flight),  # a claimed row may be cancelled and its post never land
    "deferral-forgets-the-claim": Rule(reservation.holder_verdict, deferral_keeps_claim=False),
}


# -- the processes' programs: each step returns the next state (or None when it cannot run now) ---


def recover_program() -> tuple[Any, ...]:
    """A recovering cell (bound to the work): reserve each route, judge and maybe take over the ones
    another cell holds, record the trusted, queue the held, then end, wait or go delivery_pending."""
    return (("reserve", ROUTES), (), (), (), ())  # (phase, held, trusted, waiting, unknown)


def fresh_program() -> tuple[Any, ...]:
    return (("bind",), (), (), (), ())


def step_cell(state: State, cell: str, program: tuple[Any, ...], verdict: Callable[..., str]) -> State:
    (phase, *args), held, trusted, waiting, unknown = program
    done = state.put("running", cell, None)

    def go(nxt: tuple[Any, ...], s: State = state, *, h: tuple[str, ...] | None = None, t: tuple[str, ...] | None = None,
           w: tuple[str, ...] | None = None, u: tuple[str, ...] | None = None) -> State:
        return s.put("running", cell, (nxt, held if h is None else h, trusted if t is None else t,
                                       waiting if w is None else w, unknown if u is None else u))

    if state.get("status", cell) != OPEN and phase not in ("release_binding", "release"):
        return done  # the cell ended meanwhile (a cancel): its conditional moves are refused from here
    if phase == "bind":  # a fresh selection binds first (single work), then reserves
        if state.get("bound", cell) not in (None, WORK):
            return done
        return go(("fresh_reserve", ROUTES), state.put("bound", cell, WORK))
    if phase == "fresh_reserve":
        routes = args[0]
        route, rest = routes[0], routes[1:]
        holder = state.get("owner", route)
        if holder in (None, cell):
            state = state.put("owner", route, cell)
            return go(("fresh_reserve", rest) if rest else ("enqueue", held + (route,)), state, h=held + (route,))
        # refused: back off (binding first, then each reserved route), then nothing to deliver
        return state.put("running", cell, (("release_binding", held), (), (), (), ()))
    if phase == "release_binding":
        state = state.put("bound", cell, None)
        routes = args[0]
        if routes:
            return state.put("running", cell, (("release", routes), (), (), (), ()))
        return state.put("status", cell, "no_candidate").put("running", cell, None)
    if phase == "release":
        routes = args[0]
        if state.get("owner", routes[0]) == cell:
            state = state.put("owner", routes[0], None)
        if routes[1:]:
            return state.put("running", cell, (("release", routes[1:]), (), (), (), ()))
        if state.get("status", cell) == OPEN:
            state = state.put("status", cell, "no_candidate")
        return state.put("running", cell, None)
    if phase == "reserve":
        routes = args[0]
        route, rest = routes[0], routes[1:]
        holder = state.get("owner", route)
        nxt = ("reserve", rest) if rest else ("record", trusted)
        if holder in (None, cell):
            return go(nxt, state.put("owner", route, cell), h=held + (route,))
        # refused: read the holder's row and cell (one read), decide
        judged = verdict(_cell_value(state, holder), _row_value(state, holder, route))
        if judged == reservation.HOLDS:
            return go(("reserve", rest) if rest else ("record", trusted + (route,)), t=trusted + (route,))
        if judged == reservation.UNCERTAIN:
            return go(nxt, u=unknown + (route,))
        if judged == reservation.ORPHANED:
            return go(("take_over", route, holder, rest))
        return go(nxt, w=waiting + (route,))
    if phase == "take_over":
        route, holder, rest = args
        took = state.get("owner", route) == holder
        if took:
            state = state.put("owner", route, cell)
        nxt = ("reserve", rest) if rest else ("record", trusted)
        return go(nxt, state, h=held + (route,)) if took else go(nxt, state, w=waiting + (route,))
    if phase == "record":  # one insert-if-absent row per trusted route (duplicate), then per uncertain one (failed)
        routes = args[0]
        if routes:
            if state.get("rows", (cell, routes[0])) is None:
                state = state.put("rows", (cell, routes[0]), "dup")
            return go(("record", routes[1:]), state)
        return go(("record_uncertain", unknown))
    if phase == "record_uncertain":
        routes = args[0]
        if routes:
            if state.get("rows", (cell, routes[0])) is None:
                state = state.put("rows", (cell, routes[0]), "uncertain")
            return go(("record_uncertain", routes[1:]), state)
        if not held and not waiting and unknown:
            return done.put("status", cell, "failed")
        return go(("enqueue", held))
    if phase == "enqueue":
        routes = args[0]
        if routes:
            if state.get("rows", (cell, routes[0])) is None:
                state = state.put("rows", (cell, routes[0]), "pending")
            return go(("enqueue", routes[1:]), state)
        if waiting:  # retried later: the sweep or the retry message runs it again
            return replace(done, due=done.due | {cell})
        if not held:
            return done.put("status", cell, "duplicate")
        return replace(done, pending_cells=done.pending_cells | {cell})
    raise AssertionError(phase)


def cancel_program(state: State, cell: str) -> State:
    """The cancel's transaction: the cell failed, its queued and claimed rows cancelled; then one
    release per cancelled row no worker can have posted, each its own write (the invocation may die
    between them). A row a worker claimed keeps its work reserved: it may be downstream."""
    state = state.put("status", cell, "failed")
    releases = []
    for route in ROUTES:
        row = state.get("rows", (cell, route))
        if row in CANCELS:
            state = state.put("rows", (cell, route), CANCELS[row])
            if CANCELS[row] == "cancelled":
                releases.append(route)
        elif row is None and state.get("owner", route) == cell:
            releases.append(route)  # reserved, no row yet: nothing can have been sent
    return state.put("running", f"cancel:{cell}", tuple(releases)) if releases else state


def successors(state: State, rule: Rule, jobs: tuple[str, ...]) -> Iterator[tuple[str, State]]:
    running = dict(state.running)
    cells = [c for c, _ in state.status]
    for cell in cells:
        if cell in state.due and cell not in running and state.get("status", cell) == OPEN:
            program = recover_program() if state.get("bound", cell) == WORK else fresh_program()
            yield f"{cell}: run", replace(state, due=state.due - {cell}).put("running", cell, program)
    for proc, program in running.items():
        if proc.startswith("cancel:"):
            cell = proc.split(":", 1)[1]
            route, rest = program[0], program[1:]
            nxt = state.put("owner", route, None) if state.get("owner", route) == cell else state
            yield f"{proc}: release {route}", nxt.put("running", proc, rest if rest else None)
        else:
            yield f"{proc}: {program[0][0]}", step_cell(state, proc, program, rule.verdict)
        if state.deaths < CRASHES:
            dead = replace(state.put("running", proc, None), deaths=state.deaths + 1)
            if not proc.startswith("cancel:") and state.get("status", proc) == OPEN:
                dead = replace(dead, due=dead.due | {proc})  # the sweep re-dispatches it
            yield f"{proc}: dies", dead
    for cell in jobs:
        if state.get("status", cell) == OPEN and f"cancel:{cell}" not in running and cell not in state.pending_cells:
            yield f"cancel {cell}", cancel_program(state, cell)
    for (cell, route), row in state.rows:
        yield from deliver(state, cell, route, row, rule)
    for cell in state.pending_cells:
        rows = [state.get("rows", (cell, r)) for r in ROUTES]
        if state.get("status", cell) == OPEN and all(r in ("delivered", "dup") for r in rows):
            yield f"rollup {cell}: submitted", replace(state.put("status", cell, "submitted"),
                                                        pending_cells=state.pending_cells - {cell})
        elif state.get("status", cell) == OPEN and not any(r in IN_FLIGHT for r in rows):
            yield f"rollup {cell}: failed", replace(state.put("status", cell, "failed"),
                                                     pending_cells=state.pending_cells - {cell})


def deliver(state: State, cell: str, route: str, row: str, rule: Rule) -> Iterator[tuple[str, State]]:
    """The outbox's moves on one row (ROW_AS): claims, posts, deferrals and the deaths between them."""
    at = (cell, route)
    ended = state.get("status", cell) not in (OPEN, "submitted")
    dies = state.deaths < CRASHES
    if row in CLAIMS:
        if ended:  # the deliverer claims, finds the cell ended and dead-letters the row
            if row == "pending":  # never claimed before: the work is freed
                nxt = state.put("rows", at, "dead")
                yield f"deliver {cell}/{route}: dead", nxt.put("owner", route, None) if nxt.get("owner", route) == cell else nxt
            else:  # a worker may have posted it: the work stays reserved
                yield f"deliver {cell}/{route}: dead after a claim", state.put("rows", at, "dead_claimed")
        else:
            yield f"deliver {cell}/{route}: claim", state.put("rows", at, CLAIMS[row])
    elif row in ("sending", "resending"):
        sent = replace(state, downstream=state.downstream | {(route, cell)})
        yield f"deliver {cell}/{route}: sent and acknowledged", sent.put("rows", at, "delivered")
        yield f"deliver {cell}/{route}: route not ready, deferred", state.put(
            "rows", at, "pending_claimed" if row == "resending" and rule.deferral_keeps_claim else "pending")
        if dies:
            yield f"deliver {cell}/{route}: sent, died before the ACK", replace(sent.put("rows", at, "lapsed"),
                                                                                 deaths=state.deaths + 1)
            yield f"deliver {cell}/{route}: died before its post", replace(state.put("rows", at, "lapsed"),
                                                                            deaths=state.deaths + 1)
    elif row == "cancelled_posting":  # the post under way when the cancel committed
        sent = replace(state, downstream=state.downstream | {(route, cell)})
        yield f"deliver {cell}/{route}: the post under way lands, its settle refused", sent.put("rows", at, "cancelled_claimed")
        yield f"deliver {cell}/{route}: the post under way never lands", state.put("rows", at, "cancelled_claimed")


def ended(state: State) -> bool:
    return (all(status != OPEN for _, status in state.status) and not state.running
            and all(row not in IN_FLIGHT for _, row in state.rows))


def violation(state: State) -> str | None:
    for route in ROUTES:
        senders = {c for r, c in state.downstream if r == route}
        if len(senders) > 1:
            return f"route {route} received the work from {sorted(senders)}"
    if ended(state):
        for cell, status in state.status:
            if status in ("submitted", "duplicate"):
                missing = [r for r in ROUTES if not any(rr == r for rr, _ in state.downstream)]
                if missing:
                    return f"cell {cell} ended {status} but route(s) {missing} never received the work"
    return None


def scenarios() -> dict[str, tuple[State, tuple[str, ...]]]:
    def state(cells: dict[str, str | None], owners: dict[str, str | None], rows: dict[tuple[str, str], str],
              due: set[str]) -> State:
        return State(status=tuple(sorted((c, OPEN) for c in cells)), bound=tuple(sorted(cells.items())),
                     owner=tuple(sorted({r: owners.get(r) for r in ROUTES}.items())),
                     rows=tuple(sorted(rows.items())), pending_cells=frozenset(), due=frozenset(due),
                     running=(), downstream=frozenset(), deaths=0)

    return {
        # A job's cell holds both routes with its rows queued; another occurrence's cell is bound to
        # the same work and recovering. The job may be cancelled at any point.
        "cancelled job vs a recovering cell": (
            state({"job": WORK, "late": WORK}, {"r1": "job", "r2": "job"},
                  {("job", "r1"): "pending", ("job", "r2"): "pending"}, {"late"}), ("job",)),
        # The job is still running its recovery (no rows yet) when it may be cancelled.
        "cancelled job mid-recovery vs a recovering cell": (
            state({"job": WORK, "late": WORK}, {"r1": "job"}, {}, {"job", "late"}), ("job",)),
        # Two recovering cells bound to the work, each holding one route.
        "two cells split the routes": (
            state({"a": WORK, "b": WORK}, {"r1": "a", "r2": "b"}, {}, {"a", "b"}), ()),
        # A fresh selection backing off while a recovering cell holds one route.
        "a fresh selection backs off": (
            state({"fresh": None, "late": WORK}, {"r2": "late"}, {}, {"fresh", "late"}), ()),
    }


def explore(initial: State, jobs: tuple[str, ...], rule: Rule) -> tuple[int, list[str] | None, str | None]:
    parents: dict[State, tuple[State | None, str]] = {initial: (None, "start")}
    edges: dict[State, list[State]] = {}
    queue = deque([initial])
    while queue:
        state = queue.popleft()
        problem = violation(state)
        if problem:
            return len(parents), _trace(parents, state), problem
        edges[state] = []
        for label, nxt in successors(state, rule, jobs):
            edges[state].append(nxt)
            if nxt not in parents:
                parents[nxt] = (state, label)
                queue.append(nxt)
    # liveness: every reachable state can still reach an end
    can_end = {s for s in edges if ended(s)}
    reverse: dict[State, list[State]] = {}
    for s, outs in edges.items():
        for t in outs:
            reverse.setdefault(t, []).append(s)
    frontier = deque(can_end)
    while frontier:
        for s in reverse.get(frontier.popleft(), []):
            if s not in can_end:
                can_end.add(s)
                frontier.append(s)
    stuck = next((s for s in edges if s not in can_end), None)
    if stuck is not None:
        return len(parents), _trace(parents, stuck), "a state from which no run can end (a cell kept open for ever)"
    return len(parents), None, None


def _trace(parents: dict[State, tuple[State | None, str]], state: State) -> list[str]:
    steps = []
    at: State | None = state
    while at is not None:
        parent, label = parents[at]
        steps.append(label)
        at = parent
    return list(reversed(steps))


def check(rule_name: str) -> tuple[int, bool]:
    """Explore every scope under one rule; print each scope's result. (states explored, any violation)"""
    rule = RULES[rule_name]
    total, failed = 0, False
    for name, (initial, jobs) in scenarios().items():
        states, trace, problem = explore(initial, jobs, rule)
        total += states
        if problem:
            failed = True
            print(f"check-protocol [{rule_name}]: {name}: VIOLATION after {states} states: {problem}")
            for n, label in enumerate(trace or []):
                print(f"  {n:3d}. {label}")
        else:
            print(f"check-protocol [{rule_name}]: {name}: {states} states, every invariant holds, every run can end")
    return total, failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rule", choices=sorted(RULES), default="code",
                        help="the rule to explore: the code's, or one it replaced (which must be found wrong)")
    parser.add_argument("--old-rules", action="store_true", help="explore every replaced rule; each must be found wrong")
    args = parser.parse_args()
    began = time.monotonic()
    if args.old_rules:
        ok = True
        for name in RULES:
            if name != "code":
                total, failed = check(name)
                print(f"check-protocol [{name}]: {total} states explored; {'found wrong, as it must be' if failed else 'NOT FOUND WRONG'}")
                ok = ok and failed
        return 0 if ok else 1
    total, failed = check(args.rule)
    print(f"check-protocol [{args.rule}]: {total} states explored in {time.monotonic() - began:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
