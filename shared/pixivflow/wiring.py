"""The composition root's object graph: every adapter ``pixivflow.runtime`` builds once per cold
start, and the collaborators of each use case, built from them on demand (``executions``,
``deliveries``, ``sweeps`` ...). Only the composition root, the handlers, the HTTP layer and the dev
tools see it; a service receives its use case's dataclass and nothing else.

Each use case's collaborators are built at the call (a few references, no I/O), so a collaborator
swapped here, as the dev tools and the simulation do to inject a fault, is the one the next call uses."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence, cast

from .clock import Entropy
from .config import PixivFlowConfig
from .ports import (ArtifactStore, CallbackSender, CellLeases, CellMoves, Clock, DeliveryChannel,
                    DeliveryRows, JobStore, Log, Metrics, Occurrences, OperatorTools, OutboxRows, Queues, RequestKeys,
                    SchedulePauses, SweepIndexes, SweepState, TopicSpaces, UiSessions, WorkReservations, WorkSource)
from .services.timing import DEFAULT_SWEEP_INTERVAL_MS

if TYPE_CHECKING:
    from .services.inspection import Reads
    from .services.sweep import Sweeps
    from .services.cell_run import Executions
    from .services.delivery import Deliveries
    from .services.admission import Admissions
    from .services.job_events import JobEvents
    from .services.jobs import JobControl
    from .services.manual import Refetches
    from .services.outbox import Outbox
    from .services.rollup import SlotRollup
    from .services.trigger import Triggers


@dataclass
class Wiring:
    """The adapters of one cold start, and each use case's collaborators built from them."""

    config: PixivFlowConfig
    # The ledger adapter, which implements every role of ports.ledger on one table. A use case reaches
    # it only through the roles it names (the properties below); tests and tools may swap it whole.
    ledger: Any
    queues: Queues
    source: WorkSource
    artifacts: ArtifactStore
    channel: DeliveryChannel
    clock: Clock
    entropy: Entropy
    log: Log
    metrics: Metrics | None = None  # None: nothing is published (a graph built by hand in tests)
    sweep_state: SweepState = field(kw_only=True)  # the sweep's lease and missed-fire watches
    outbox_rows: OutboxRows = field(kw_only=True)  # notification / event-callback rows (OUTBOX#... items)
    # Workflow Protocol v1: the job event stream, the callback sender, the resolver
    # callback URLs are vetted with, and the callback signing secret.
    jobs: JobStore = field(kw_only=True)
    callbacks: CallbackSender = field(kw_only=True)
    resolver: Callable[[str, int], Sequence[str]] = field(kw_only=True)
    # The callback signing secret: None when it does not exist; SecretStoreUnavailable when the
    # store did not answer (never cached as "no secret").
    callback_secret: Callable[[], str | None] = field(kw_only=True)
    # How often the stall sweep is scheduled (SWEEP_INTERVAL_MS, from SweepIntervalMinutes): the
    # sweep checks its lease against it (services.sweep.sweep_lease_ms) and reports it.
    sweep_interval_ms: int = DEFAULT_SWEEP_INTERVAL_MS

    def now(self) -> int:
        return self.clock.now_ms()

    # -- the ledger's roles (ports.ledger), each a view of the one adapter --------------------------

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

    # -- the use cases' collaborators, each built from what the wiring holds now ------------------

    @property
    def job_events(self) -> JobEvents:
        from .services.job_events import JobEvents

        return JobEvents(self.jobs, self.occurrences, self.request_keys, self.queues, self.clock, self.log)

    @property
    def outbox(self) -> Outbox:
        from .services.callbacks import CALLBACK_KIND, Callbacks, callback_row_kind
        from .services.notifications import KIND as NOTIFICATION, notification_row_kind
        from .services.outbox import Outbox

        delivery = self.config.delivery
        # The kinds of row the outbox serves besides delivery intents, each with its sender.
        kinds = {NOTIFICATION: notification_row_kind(self.channel),
                 CALLBACK_KIND: callback_row_kind(Callbacks(self.callbacks, self.callback_secret, self.clock))}
        return Outbox(self.outbox_rows, self.queues, self.clock, self.entropy, self.log, self.metrics,
                      delivery.outboxRetryBaseMs, delivery.outboxRetryMaxMs, kinds)

    @property
    def slot_rollup(self) -> SlotRollup:
        from .services.rollup import SlotRollup

        return SlotRollup(self.occurrences, self.cells, self.rows, self.config, self.outbox, self.job_events, self.clock,
                          self.log, self.metrics)

    @property
    def admissions(self) -> Admissions:
        from .services.admission import Admissions

        return Admissions(self.occurrences, self.queues, self.config, self.slot_rollup, self.clock, self.log, self.metrics)

    @property
    def triggers(self) -> Triggers:
        from .services.trigger import Triggers

        return Triggers(self.admissions, self.pauses, self.config, self.clock, self.log)

    @property
    def refetches(self) -> Refetches:
        from .services.manual import Refetches

        return Refetches(self.admissions, self.request_keys, self.occurrences, self.config, self.clock, self.log)

    @property
    def job_control(self) -> JobControl:
        from .services.jobs import JobControl

        return JobControl(self.admissions, self.request_keys, self.occurrences, self.cells, self.reservations,
                          self.resolver, self.config, self.job_events, self.slot_rollup, self.clock, self.log)

    @property
    def deliveries(self) -> Deliveries:
        from .services.delivery import Deliveries

        return Deliveries(self.rows, self.occurrences, self.reservations, self.indexes, self.queues, self.channel,
                          self.artifacts, self.config, self.entropy, self.slot_rollup, self.outbox, self.clock, self.log,
                          self.metrics)

    @property
    def executions(self) -> Executions:
        from .services.cell_run import Executions

        return Executions(self.occurrences, self.leases, self.cells, self.reservations, self.rows, self.topics, self.queues,
                          self.source, self.artifacts, self.config, self.entropy, self.slot_rollup, self.clock, self.log,
                          self.metrics)

    @property
    def sweeps(self) -> Sweeps:
        from .services.sweep import Sweeps

        return Sweeps(self.occurrences, self.cells, self.leases, self.indexes, self.pauses, self.queues, self.sweep_state,
                      self.config, self.entropy, self.sweep_interval_ms, self.slot_rollup, self.deliveries, self.outbox,
                      self.job_events, self.clock, self.log, self.metrics)

    @property
    def reads(self) -> Reads:
        from .services.inspection import Reads

        return Reads(ledger=self.ledger, now_ms=self.clock.now_ms, jobs=self.jobs, outbox_rows=self.outbox_rows,
                     queues=self.queues, config=self.config, log=self.log, sweep_state=self.sweep_state)
