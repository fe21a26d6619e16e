"""What one run of a cell holds: the use case's collaborators (``Executions``), the cell and the
lease it runs under (``CellRun``), and how a run ends (``ExecutionResult``, ``LeaseLost``,
``PermitLost``). The run itself: ``execution`` (lease and apply), ``binding`` (select and bind),
``storing`` (fetch and store)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..clock import Entropy
from ..domain.cells import CellStatus
from ..domain.model import Cell, Slot, cell_key
from ..ports import (
    ArtifactStore,
    CellLeases,
    CellMoves,
    Clock,
    DeliveryRows,
    Log,
    Metrics,
    Occurrences,
    Queues,
    Settings,
    SourceGovernor,
    TargetSettings,
    TimeLeft,
    TopicSpaces,
    WorkReservations,
    WorkSource,
)
from .context import Measured
from .rollup import SlotRollup
from .timing import HEARTBEAT_MS, LEASE_TTL_MS


class LeaseLost(Exception):
    """This executor no longer holds the cell's lease: stop, touch nothing, leave it to the holder."""


class PermitLost(Exception):
    """The cell's permit on its source account expired and was taken: stop its source work."""




@dataclass
class ExecutionResult:
    slot_id: str
    target_id: str
    action: str  # claimed_by_other | left_to_outbox | applied | no_change | missing | refused | deferred | continued (topic checkpoint)
    cell_status: str | None = None
    outcome: str | None = None


@dataclass(frozen=True)
class Executions(Measured):
    """What running a cell takes: the slot and its cells (reads, leases, moves), the cross-slot
    work reservations, the delivery rows it records, the topic spaces a topic target caches, the
    execution and outbox queues, the work source and the artifact store, the config, entropy
    (lease owners), the slot rollup, the clock, log and metrics."""

    occurrences: Occurrences
    leases: CellLeases
    cells: CellMoves
    reservations: WorkReservations
    rows: DeliveryRows
    topics: TopicSpaces
    queues: Queues
    source: WorkSource
    artifacts: ArtifactStore
    config: Settings
    entropy: Entropy
    rollup: SlotRollup
    clock: Clock
    log: Log
    metrics: Metrics | None


@dataclass
class CellRun:
    """The execution context of one cell plus the lease it runs under."""

    ctx: Executions
    slot: Slot
    cell: Cell
    target: TargetSettings
    owner: str
    last_beat: int = 0
    outbox_keys: list[str] = field(default_factory=list)
    lost_bind: str | None = None  # set when another executor bound a different work first
    excluded: frozenset[str] = frozenset()  # work ids a protocol job excluded
    governor: SourceGovernor | None = None  # the source account's permits, held for this run
    time_left: TimeLeft | None = None  # ms left in this invocation (the Lambda context's)
    time_budget: int | None = None  # ms the invocation had when it began (the same context's, read then)

    @property
    def locked_work_id(self) -> str | None:
        return self.cell.work_id

    @property
    def owner_key(self) -> str:
        return cell_key(self.slot.slot_id, self.target.id)

    def heartbeat(self) -> None:
        """Renew the lease every 30 s. A refused renewal means another executor owns the cell now."""
        now = self.ctx.now()
        if now - self.last_beat >= HEARTBEAT_MS:
            if not self.ctx.leases.heartbeat_cell(self.slot.slot_id, self.target.id, self.owner, now, LEASE_TTL_MS):
                raise LeaseLost(f"lease on {self.slot.slot_id}/{self.target.id} was lost")
            if self.governor is not None and not self.governor.renew(self.owner):
                raise PermitLost(f"permit on the source account lapsed during {self.slot.slot_id}/{self.target.id}")
            self.last_beat = now

    def bind(self, work_id: str, work_type: str) -> tuple[bool, str | None]:
        won, current = self.ctx.cells.bind_work(self.slot.slot_id, self.target.id, work_id, work_type, self.ctx.now())
        if won:
            self.cell.work_id = work_id
            self.cell.work_type = self.cell.work_type or work_type
            self.cell.status = CellStatus.SELECTED
        return won, current

    def release(self, work_id: str) -> bool:
        ok = self.ctx.cells.release_work(self.slot.slot_id, self.target.id, work_id, self.ctx.now())
        if ok:
            self.cell.work_id = None
            self.cell.status = CellStatus.PENDING
        return ok
