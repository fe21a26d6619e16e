"""Item keys and sparse-index keys of the ledger table.

Keys are the ledger's identities: an intent's sort key IS its idempotency key's identity, so no
separate uniqueness item is needed; index keys are strings, sharded from the start, and removed
when an item stops being live work.
"""

from __future__ import annotations

import zlib

SHARDS = 16
ACTIVE_INDEX = "ActiveSlots"
DUE_INDEX = "DueOutbox"
CALLBACK_INDEX = "OpenCallbacks"  # the job store's (adapters.job_store), on the same table
# Every protocol job, newest first: the jobs page reads one page of it (``JOBS`` / ``<createdAt>#<slotId>``).
# Written once, with the job's slot, and never moved: one index write per job, none per cell.
JOBS_INDEX = "JobsByCreated"
JOBS_PK = "JOBS"
# Every slot, newest first (``SLOTS`` / ``<createdAt>#<slotId>``): the occurrence list reads one page of
# it. Written once, with the slot, and never moved: one index write per slot, none per cell.
SLOTS_INDEX = "SlotsByCreated"
SLOTS_PK = "SLOTS"
# Every dead outbox row, delivery rows and generic rows alike, newest death first (``DEAD`` /
# ``<diedAt>#<pk>#<sk>``): the dead-letter page reads one page of it. Set by the write that kills a
# row, removed by the one that re-arms it: one index write per death, none per delivered row.
DEAD_INDEX = "DeadRows"
DEAD_PK = "DEAD"


def dead_sk(died_at: int, pk: str, sk: str) -> str:
    return f"{_ms13(died_at)}#{pk}#{sk}"


# Every failed cell, newest failure first (``FAILED`` / ``<completedAt>#<slotId>#<targetId>``): the
# Failure Center reads one page of it. Set by the write that fails the cell (a failed cell never
# moves again), so it costs one index write per failure and none per successful cell. The entries
# carry the reason (INCLUDE projection) so a page filters by it without reading the cells.
FAILURES_INDEX = "FailedCells"
FAILURES_PK = "FAILED"


def failure_sk(completed_at: int, slot_id: str, target_id: str) -> str:
    return f"{_ms13(completed_at)}#{slot_id}#{target_id}"


def created_sk(created_at: int, slot_id: str) -> str:
    """A slot's position in the indexes listed by creation (JobsByCreated, SlotsByCreated)."""
    return f"{_ms13(created_at)}#{slot_id}"


def slot_pk(slot_id: str) -> str:
    return f"SLOT#{slot_id}"


def cell_sk(target_id: str) -> str:
    return f"CELL#{target_id}"


def intent_sk(target_id: str, route: str, work_type: str, work_id: str) -> str:
    return f"DLV#{target_id}#{route}#{work_type}#{work_id}"


def work_pk(route: str, work_type: str, work_id: str) -> str:
    return f"WORK#{route}#{work_type}#{work_id}"


def shard_of(key: str) -> int:
    return zlib.crc32(key.encode("utf-8")) % SHARDS


def _ms13(value: int) -> str:
    return f"{max(0, int(value)):013d}"
