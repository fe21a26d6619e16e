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
