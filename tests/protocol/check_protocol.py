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
fresh selection backing off while a recovering cell holds a route. ``--old-rule`` restores the rule
that trusted every holder, and the check must find it wrong, with the trace.

Usage: python tests/protocol/check_protocol.py [--old-rule]"""

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

# A row's state in the model -> the domain's (ledger status, outbox status): what holder_verdict reads.
ROW_AS = {"pending": (LedgerStatus.PENDING, OutboxStatus.PENDING),
          "sending": (LedgerStatus.PENDING, OutboxStatus.PROCESSING),  # claimed: may be downstream
          "delivered": (LedgerStatus.DELIVERED, OutboxStatus.DONE),
          "dup": (LedgerStatus.DUPLICATE, OutboxStatus.DONE),
          "cancelled": (LedgerStatus.PENDING, OutboxStatus.CANCELLED),
          "dead": (LedgerStatus.FAILED, OutboxStatus.DEAD)}


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
    ledger, outbox = ROW_AS[row]
    return Intent(slot_id=cell, target_id="t", route=route, work_type="illustration", work_id=WORK, idempotency_key=cell,
                  status=ledger, outbox_status=outbox)


# -- the processes' programs: each step returns the next state (or None when it cannot run now) ---


def recover_program() -> tuple[Any, ...]:
    """A recovering cell (bound to the work): reserve each route, judge and maybe take over the ones
    another cell holds, record the trusted, queue the held, then end, wait or go delivery_pending."""
    return (("reserve", ROUTES), (), (), ())  # (phase, held, trusted, waiting)


def fresh_program() -> tuple[Any, ...]:
    return (("bind",), (), (), ())


def step_cell(state: State, cell: str, program: tuple[Any, ...], verdict: Callable[..., str]) -> State:
    (phase, *args), held, trusted, waiting = program[0], program[1], program[2], program[3]
    done = state.put("running", cell, None)
    if state.get("status", cell) != OPEN and phase not in ("release_binding", "release"):
        return done  # the cell ended meanwhile (a cancel): its conditional moves are refused from here
    if phase == "bind":  # a fresh selection binds first (single work), then reserves
        if state.get("bound", cell) not in (None, WORK):
            return done
        return state.put("bound", cell, WORK).put("running", cell, (("fresh_reserve", ROUTES), held, trusted, waiting))
    if phase == "fresh_reserve":
        routes = args[0]
        route, rest = routes[0], routes[1:]
        holder = state.get("owner", route)
        if holder in (None, cell):
            state = state.put("owner", route, cell)
            held = held + (route,)
            nxt = (("fresh_reserve", rest),) if rest else (("enqueue", held),)
            return state.put("running", cell, (nxt[0], held, trusted, waiting))
        # refused: back off (binding first, then each reserved route), then nothing to deliver
        return state.put("running", cell, (("release_binding", held), (), (), ()))
    if phase == "release_binding":
        state = state.put("bound", cell, None)
        routes = args[0]
        if routes:
            return state.put("running", cell, (("release", routes), (), (), ()))
        return state.put("status", cell, "no_candidate").put("running", cell, None)
    if phase == "release":
        routes = args[0]
        if state.get("owner", routes[0]) == cell:
            state = state.put("owner", routes[0], None)
        if routes[1:]:
            return state.put("running", cell, (("release", routes[1:]), (), (), ()))
        if state.get("status", cell) == OPEN:
            state = state.put("status", cell, "no_candidate")
        return state.put("running", cell, None)
    if phase == "reserve":
        routes = args[0]
        route, rest = routes[0], routes[1:]
        holder = state.get("owner", route)
        nxt_phase = ("reserve", rest) if rest else ("record", trusted)
        if holder in (None, cell):
            state = state.put("owner", route, cell)
            return state.put("running", cell, (nxt_phase, held + (route,), trusted, waiting))
        # refused: read the holder's row and cell (one read), decide
        judged = verdict(_cell_value(state, holder), _row_value(state, holder, route))
        if judged == reservation.HOLDS:
            return state.put("running", cell, (("reserve", rest) if rest else ("record", trusted + (route,)),
                                               held, trusted + (route,), waiting))
        if judged == reservation.ORPHANED:
            return state.put("running", cell, (("take_over", route, holder, rest), held, trusted, waiting))
        return state.put("running", cell, (nxt_phase if rest else ("record", trusted), held, trusted, waiting + (route,)))
    if phase == "take_over":
        route, holder, rest = args
        took = state.get("owner", route) == holder
        if took:
            state = state.put("owner", route, cell)
        held, waiting = (held + (route,), waiting) if took else (held, waiting + (route,))
        return state.put("running", cell, (("reserve", rest) if rest else ("record", trusted), held, trusted, waiting))
    if phase == "record":  # one insert-if-absent duplicate row per trusted route
        routes = args[0]
        if routes:
            if state.get("rows", (cell, routes[0])) is None:
                state = state.put("rows", (cell, routes[0]), "dup")
            return state.put("running", cell, (("record", routes[1:]), held, trusted, waiting))
        return state.put("running", cell, (("enqueue", held), held, trusted, waiting))
    if phase == "enqueue":
        routes = args[0]
        if routes:
            if state.get("rows", (cell, routes[0])) is None:
                state = state.put("rows", (cell, routes[0]), "pending")
            return state.put("running", cell, (("enqueue", routes[1:]), held, trusted, waiting))
        if waiting:  # retried later: the sweep or the retry message runs it again
            return replace(done, due=done.due | {cell})
        if not held:
            return done.put("status", cell, "duplicate")
        return replace(done, pending_cells=done.pending_cells | {cell})
    raise AssertionError(phase)


def cancel_program(state: State, cell: str) -> State:
    """The cancel's transaction: the cell failed, its unsent rows cancelled; then one release per
    cancelled row's route, each its own write (the invocation may die between them)."""
    state = state.put("status", cell, "failed")
    releases = []
    for route in ROUTES:
        if state.get("rows", (cell, route)) == "pending":
            state = state.put("rows", (cell, route), "cancelled")
            releases.append(route)
        elif state.get("rows", (cell, route)) is None and state.get("owner", route) == cell:
            releases.append(route)  # reserved, no row yet: nothing can have been sent
    return state.put("running", f"cancel:{cell}", tuple(releases)) if releases else state


def successors(state: State, verdict: Callable[..., str], jobs: tuple[str, ...]) -> Iterator[tuple[str, State]]:
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
            yield f"{proc}: {program[0][0]}", step_cell(state, proc, program, verdict)
        if state.deaths < CRASHES:
            dead = replace(state.put("running", proc, None), deaths=state.deaths + 1)
            if not proc.startswith("cancel:") and state.get("status", proc) == OPEN:
                dead = replace(dead, due=dead.due | {proc})  # the sweep re-dispatches it
            yield f"{proc}: dies", dead
    for cell in jobs:
        if state.get("status", cell) == OPEN and f"cancel:{cell}" not in running and cell not in state.pending_cells:
            yield f"cancel {cell}", cancel_program(state, cell)
    for (cell, route), row in state.rows:
        ended = state.get("status", cell) not in (OPEN, "submitted")
        if row == "pending":
            if ended:  # the deliverer finds the cell ended: dead unsent, the work freed
                nxt = state.put("rows", (cell, route), "dead")
                yield f"deliver {cell}/{route}: dead", nxt.put("owner", route, None) if nxt.get("owner", route) == cell else nxt
            else:
                yield f"deliver {cell}/{route}: claim", state.put("rows", (cell, route), "sending")
        elif row == "sending":
            sent = replace(state, downstream=state.downstream | {(route, cell)})
            yield f"deliver {cell}/{route}: sent and acknowledged", sent.put("rows", (cell, route), "delivered")
            if state.deaths < CRASHES:
                yield f"deliver {cell}/{route}: sent, died before the ACK", replace(sent, deaths=state.deaths + 1)
    for cell in state.pending_cells:
        if state.get("status", cell) == OPEN and all(state.get("rows", (cell, r)) in ("delivered", "dup") for r in ROUTES):
            yield f"rollup {cell}: submitted", replace(state.put("status", cell, "submitted"),
                                                        pending_cells=state.pending_cells - {cell})


def ended(state: State) -> bool:
    return (all(status != OPEN for _, status in state.status) and not state.running
            and all(row not in ("pending", "sending") for _, row in state.rows))


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


def explore(initial: State, jobs: tuple[str, ...], verdict: Callable[..., str]) -> tuple[int, list[str] | None, str | None]:
    parents: dict[State, tuple[State | None, str]] = {initial: (None, "start")}
    edges: dict[State, list[State]] = {}
    queue = deque([initial])
    while queue:
        state = queue.popleft()
        problem = violation(state)
        if problem:
            return len(parents), _trace(parents, state), problem
        edges[state] = []
        for label, nxt in successors(state, verdict, jobs):
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old-rule", action="store_true", help="trust every holder (the rule this protocol replaced)")
    args = parser.parse_args()
    verdict: Callable[..., str] = (lambda cell, row: reservation.HOLDS) if args.old_rule else reservation.holder_verdict
    began, total, failed = time.monotonic(), 0, False
    for name, (initial, jobs) in scenarios().items():
        states, trace, problem = explore(initial, jobs, verdict)
        total += states
        if problem:
            failed = True
            print(f"check-protocol: {name}: VIOLATION after {states} states: {problem}")
            for n, label in enumerate(trace or []):
                print(f"  {n:3d}. {label}")
        else:
            print(f"check-protocol: {name}: {states} states, every invariant holds, every run can end")
    print(f"check-protocol: {total} states explored in {time.monotonic() - began:.1f} s"
          f"{' (old rule)' if args.old_rule else ''}")
    if args.old_rule:
        return 0 if failed else 1  # the old rule must be found wrong
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
