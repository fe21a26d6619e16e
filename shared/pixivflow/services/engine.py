"""The object graph every service works with (built once per cold start by ``pixivflow.runtime``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence, cast

from ..clock import Entropy
from ..config import PixivFlowConfig
from ..ports import (ArtifactStore, CallbackSender, CellLeases, CellMoves, Clock, DeliveryChannel,
                     DeliveryRows, JobStore, Log, Metrics, Occurrences, OperatorTools, OutboxRows, Queues, RequestKeys,
                     SchedulePauses, SweepIndexes, SweepState, TopicSpaces, UiSessions, WorkReservations, WorkSource)

if TYPE_CHECKING:  # the use cases' collaborators (each module imports this one)
    from .sweep import Sweeps
    from .execution import Executions
    from .delivery import Deliveries
    from .admission import Admissions
    from .job_events import JobEvents
    from .jobs import JobControl
    from .manual import Refetches
    from .outbox import Outbox
    from .rollup import SlotRollup
    from .trigger import Triggers

LEASE_TTL_MS = 180_000  # a cell's run lease; every heartbeat renews it
HEARTBEAT_MS = 30_000
OUTBOX_LEASE_MS = 120_000  # an outbox row's claim: one worker talks to the route at a time
REDISPATCH_AFTER_MS = 5 * 60_000  # the sweep re-dispatches a lease-less cell dispatched this long ago
REDRIVE_GRACE_MS = 120_000  # the sweep re-sends rows overdue by more than this
DEFAULT_SWEEP_INTERVAL_MS = 60_000  # template.yaml's SweepIntervalMinutes default, when SWEEP_INTERVAL_MS is unset


@dataclass
class Engine:
    config: PixivFlowConfig
    # The ledger adapter, which implements every role of ports.py on one table. Services reach it
    # only through the role they use (the properties below); tests and tools may swap it whole.
    ledger: Any
    queues: Queues
    source: WorkSource
    artifacts: ArtifactStore
    channel: DeliveryChannel
    clock: Clock
    entropy: Entropy
    log: Log
    metrics: Metrics | None = None  # None: nothing is published (engines built by hand in tests)
    # The sweep's lease / missed-fire items. None: the sweep runs without a lease and
    # without missed-fire detection (engines built by hand in tests); runtime.build() always sets it.
    sweep_state: SweepState | None = None
    outbox_rows: OutboxRows | None = None  # notification / event-callback rows (OUTBOX#... items)
    # Workflow Protocol v1: the job event stream, the callback sender, the resolver
    # callback URLs are vetted with, and the callback signing secret.
    jobs: JobStore | None = None
    callbacks: CallbackSender | None = None
    resolver: Callable[[str, int], Sequence[str]] | None = None
    # The callback signing secret: None when it does not exist; SecretStoreUnavailable when the
    # store did not answer (never cached as "no secret").
    callback_secret: Callable[[], str | None] | None = None
    # How often the stall sweep is scheduled (SWEEP_INTERVAL_MS, from SweepIntervalMinutes): the
    # sweep checks its lease against it (services.sweep.sweep_lease_ms) and reports it.
    sweep_interval_ms: int = DEFAULT_SWEEP_INTERVAL_MS

    def now(self) -> int:
        return self.clock.now_ms()

    # -- the ledger's roles (ports.py), each a view of the one adapter --------------------------

    @property
    def occurrences(self) -> Occurrences:
        return cast(Occurrences, self.ledger)

    @property
    def leases(self) -> CellLeases:
        return cast(CellLeases, self.ledger)

    @property
    def cells(self) -> CellMoves:
        return cast(CellMoves, self.ledger)

    @property
    def reservations(self) -> WorkReservations:
        return cast(WorkReservations, self.ledger)

    @property
    def rows(self) -> DeliveryRows:
        return cast(DeliveryRows, self.ledger)

    @property
    def indexes(self) -> SweepIndexes:
        return cast(SweepIndexes, self.ledger)

    @property
    def request_keys(self) -> RequestKeys:
        return cast(RequestKeys, self.ledger)

    @property
    def pauses(self) -> SchedulePauses:
        return cast(SchedulePauses, self.ledger)

    @property
    def operator(self) -> OperatorTools:
        return cast(OperatorTools, self.ledger)

    @property
    def sessions(self) -> UiSessions:
        return cast(UiSessions, self.ledger)

    @property
    def topics(self) -> TopicSpaces:
        return cast(TopicSpaces, self.ledger)

    # -- the use cases' collaborators, each built from what the engine holds now ------------------

    @property
    def job_events(self) -> JobEvents:
        from .job_events import JobEvents

        return JobEvents(self.jobs, self.occurrences, self.request_keys, self.queues, self.clock, self.log)

    @property
    def outbox(self) -> Outbox:
        from functools import partial

        from .callbacks import CALLBACK_KIND, Callbacks, send_callback
        from .notifications import KIND as NOTIFICATION, send_notification
        from .outbox import Outbox

        assert self.outbox_rows is not None, "this engine has no outbox rows"
        delivery = self.config.delivery
        return Outbox(self.outbox_rows, self.queues, self.clock, self.entropy, self.log, self.metrics,
                      delivery.outboxRetryBaseMs, delivery.outboxRetryMaxMs,
                      {NOTIFICATION: partial(send_notification, self.channel),
                       CALLBACK_KIND: partial(send_callback, Callbacks(self.callbacks, self.callback_secret, self.clock))})

    @property
    def slot_rollup(self) -> SlotRollup:
        from .rollup import SlotRollup

        return SlotRollup(self.occurrences, self.cells, self.rows, self.config, self.outbox, self.job_events, self.clock,
                          self.log, self.metrics)

    @property
    def admissions(self) -> Admissions:
        from .admission import Admissions

        return Admissions(self.occurrences, self.queues, self.config, self.slot_rollup, self.clock, self.log, self.metrics)

    @property
    def triggers(self) -> Triggers:
        from .trigger import Triggers

        return Triggers(self.admissions, self.pauses, self.config, self.clock, self.log)

    @property
    def refetches(self) -> Refetches:
        from .manual import Refetches

        return Refetches(self.admissions, self.request_keys, self.occurrences, self.config, self.clock, self.log)

    @property
    def job_control(self) -> JobControl:
        from .jobs import JobControl

        return JobControl(self.admissions, self.request_keys, self.occurrences, self.cells, self.reservations,
                          self.resolver, self.config, self.job_events, self.slot_rollup, self.clock, self.log)

    @property
    def deliveries(self) -> Deliveries:
        from .delivery import Deliveries

        return Deliveries(self.rows, self.occurrences, self.reservations, self.indexes, self.queues, self.channel,
                          self.artifacts, self.config, self.entropy, self.slot_rollup,
                          self.outbox if self.outbox_rows is not None else None, self.clock, self.log, self.metrics)

    @property
    def executions(self) -> Executions:
        from .execution import Executions

        return Executions(self.occurrences, self.leases, self.cells, self.reservations, self.rows, self.topics, self.queues,
                          self.source, self.artifacts, self.config, self.entropy, self.slot_rollup, self.clock, self.log,
                          self.metrics)

    @property
    def sweeps(self) -> Sweeps:
        from .sweep import Sweeps

        return Sweeps(self.occurrences, self.cells, self.leases, self.indexes, self.pauses, self.queues, self.sweep_state,
                      self.config, self.entropy, self.sweep_interval_ms, self.slot_rollup, self.deliveries,
                      self.outbox if self.outbox_rows is not None else None, self.job_events, self.clock, self.log,
                      self.metrics)

    def metric(self, name: str, value: float = 1, **dimensions: str) -> None:
        if self.metrics is not None:
            self.metrics.count(name, value, **dimensions)
