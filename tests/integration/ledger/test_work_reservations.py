"""WorkReservations (``pixivflow.ports.WorkReservations``): which cell holds a work on a route
(``WORK#<route>#<type>#<workId>`` / ``OWNER``), the selection-time dedupe across slots.

The role's part of the ledger's contract suite (``ledger_env.py``: both backends, every test)."""

from __future__ import annotations

import ledger_env
from ledger_env import Env

env = ledger_env.env


def test_a_zombie_executor_cannot_release_the_reservation_its_cells_newer_executor_holds(env):
    """reserve_work/release_work_reservation (spec §5): a cell's re-run re-claims its work and records
    the executor now holding it; the old executor, still running after its lease lapsed, then fails
    and releases "its" reservation. That release must be refused, or a rival cell could take the work
    the new executor is about to deliver (issue 20: make mutants found no test of this guard)."""
    ledger, route, kind = env.ledger, "review", "illustration"
    cell_a, cell_b = "pixivflow:review:a@2026-12-01T0800:cats", "pixivflow:review:b@2026-12-01T0800:cats"
    assert ledger.reserve_work(route, kind, "501", cell_a, 1_000, executor="exe-old") == (True, cell_a)
    assert ledger.reserve_work(route, kind, "501", cell_a, 2_000, executor="exe-new") == (True, cell_a)  # the re-run
    assert ledger.release_work_reservation(route, kind, "501", cell_a, executor="exe-old") is False  # the zombie
    assert ledger.reserve_work(route, kind, "501", cell_b, 3_000, executor="exe-b") == (False, cell_a)  # still A's
    assert ledger.release_work_reservation(route, kind, "501", cell_a, executor="exe-new") is True  # its holder may
    assert ledger.reserve_work(route, kind, "501", cell_b, 4_000, executor="exe-b") == (True, cell_b)


# -- the methods of the role the suite had no contract test of -------------------------------------


def test_work_owners_reads_the_holder_of_each_reserved_work_and_leaves_free_ones_out(env: Env) -> None:
    """work_owners: one batch read of the route's reservations (BatchGetItem takes 100 keys at a time,
    so 120 ids take two), strongly or eventually consistent; a work held on another route or as
    another type, or released, is free here."""
    ledger, route, kind = env.ledger, "review", "illustration"
    cell_a, cell_b = "pixivflow:review:a@2026-12-01T0800:cats", "pixivflow:review:b@2026-12-01T0800:cats"
    ids = [str(n) for n in range(500, 620)]
    assert ledger.work_owners(route, kind, ids) == {}
    for n, work_id in enumerate(ids[::2]):
        assert ledger.reserve_work(route, kind, work_id, cell_a if n % 2 else cell_b, 1_000) == (True, cell_a if n % 2 else cell_b)
    assert ledger.reserve_work("telegram", kind, "501", cell_a, 1_000) == (True, cell_a)  # another route
    assert ledger.reserve_work(route, "novel", "503", cell_a, 1_000) == (True, cell_a)  # another work type
    held = {work_id: (cell_a if n % 2 else cell_b) for n, work_id in enumerate(ids[::2])}
    assert ledger.work_owners(route, kind, ids + ids[:3]) == held  # an id asked twice is read once
    assert ledger.work_owners(route, kind, ids, consistent=False) == held
    assert ledger.release_work_reservation(route, kind, "500", held["500"]) is True
    assert ledger.work_owners(route, kind, ["500", "502", "501"]) == {"502": held["502"]}


def test_a_work_is_taken_over_only_from_the_holder_named_and_then_the_taker_holds_it(env: Env) -> None:
    """take_over_work: one conditional write naming the holder whose cell can never deliver the work
    (``domain.reservation``). Refused when the work is free or another cell holds it by then; once
    taken, the old holder can neither release it nor take it back, and the new one holds it."""
    ledger, route, kind = env.ledger, "review", "illustration"
    orphan, taker, other = "a@2026-12-01T0800#cats", "b@2026-12-01T0805#cats", "c@2026-12-01T0810#cats"
    assert ledger.take_over_work(route, kind, "501", orphan, taker, 1_000) is False  # nobody holds it: nothing to take
    assert ledger.work_owners(route, kind, ["501"]) == {}
    assert ledger.reserve_work(route, kind, "501", orphan, 1_000, executor="exe-a") == (True, orphan)
    assert ledger.take_over_work(route, kind, "501", other, taker, 2_000) is False  # not the holder named
    assert ledger.take_over_work(route, kind, "501", orphan, taker, 2_000, executor="exe-b") is True
    assert ledger.work_owners(route, kind, ["501"]) == {"501": taker}
    assert ledger.take_over_work(route, kind, "501", orphan, other, 3_000) is False  # the holder moved: refused
    assert ledger.release_work_reservation(route, kind, "501", orphan) is False
    assert ledger.reserve_work(route, kind, "501", orphan, 3_000) == (False, taker)
    assert ledger.reserve_work(route, kind, "501", taker, 3_000, executor="exe-b2") == (True, taker)  # its own re-run
