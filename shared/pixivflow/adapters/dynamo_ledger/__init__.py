"""The ledger on one DynamoDB table (docs/explanation/ledger.md).

Items (pk / sk):
  SLOT#<slotId> / META                        the slot; carries activePk/activeSk until it closes; its
                                              targetIds are the frozen cells (the admission's one write)
  SLOT#<slotId> / CELL#<targetId>             one cell per snapshot target, written by its first claim (or
                                              by the sweep when it re-dispatches or fails a never-claimed one)
  SLOT#<slotId> / DLV#<targetId>#<route>#<workType>#<workId>
                                              a delivery intent and its outbox row; found through its open
                                              slot, in DueOutbox (duePk/dueSk) only if still actionable when
                                              the slot closes
  SLOT#<slotId> / EVT#L#<kind>                lifecycle events (execution.summary), each at most once
  WORK#<route>#<workType>#<workId> / OWNER    the cell that holds this work on this route (selection dedupe)
  SCHEDULE#<scheduleId> / PAUSE               an operator's pause of the schedule: no TTL, no index

Every state change is a conditional write. Cell moves are conditioned on the source states
the domain's transition table allows (``cells.ALLOWED_FROM``), so an illegal or late move is
refused by DynamoDB itself. No UpdateItem leaves a partial cell: every move carries
``attribute_exists(pk)`` (``expressions._Update``'s default), and the two upserts (a cell's first
claim, the sweep's re-dispatch mark) set every attribute a cell is born with where absent. A cell
item that cannot be read all the same (no ``status``: written before that rule) never fails a
read: ``load`` leaves it out of the cells (``SlotState.malformed``, one ``ledger.malformed_item``
error line naming its key and attribute names), so it reads as the pending cell it stood for,
and the upserts and the stall's Put of an unwritten cell accept it and complete it. Reads that decide anything are strongly consistent; GSI hits are
re-read before use.

The package: ``keys`` (item and index keys), ``codec`` (dataclasses <-> items), ``expressions``
(conditional update builder), and the port's methods in parts that build on each other:
``items`` (client, low-level writes) <- ``slots`` <- ``cells`` <- ``deliveries`` <- ``operator`` <-
``ledger`` (``DynamoLedger``, with the multi-item steps).
"""

from __future__ import annotations

from .codec import cell_from_item, intent_from_item, slot_from_item
from .keys import ACTIVE_INDEX, DUE_INDEX, SHARDS, cell_sk, intent_sk, shard_of, slot_pk, work_pk
from .ledger import DynamoLedger

__all__ = ["ACTIVE_INDEX", "DUE_INDEX", "SHARDS", "DynamoLedger", "cell_from_item", "cell_sk", "intent_from_item",
           "intent_sk", "shard_of", "slot_from_item", "slot_pk", "work_pk"]
