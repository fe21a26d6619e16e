"""Ports: the interfaces services depend on. Adapters implement them; tests fake them.

``outside`` (the clock, the log, the source, the store, the routes, the secrets), ``ledger`` (the
table's roles and the queues) and ``settings`` (the configuration as the services read it)."""

from __future__ import annotations

from .outside import (
    Clock, HEALTH_METRIC, Log, Metrics, TimeLeft, WorkSource, ArtifactStore, SourceGovernor,
    PixivAccountStore, DeliveryChannel, TRIGGER, JOBS, CALLBACK, SecretStore, CallbackSender
)
from .ledger import (
    OutboxRows, Queues, Occurrences, CellLeases, CellMoves, WorkReservations, DeliveryRows, SweepIndexes,
    RequestKeys, SchedulePauses, OperatorTools, OperatorPages, UiSessions, TopicSpaces, LEDGER_ROLES, JobStore, SweepState
)
from .settings import (
    ScheduleSettings, TargetDeliverySettings, NoMatchSettings, TargetSettings, RouteSettings, TriggerSettings,
    SchedulerRuntimeSettings, DeliverySettings, DownloadSettings, SourceSettings, PixivSettings, JobsSettings,
    Settings
)

__all__ = [
    'ArtifactStore', 'CALLBACK', 'CallbackSender', 'CellLeases', 'CellMoves', 'Clock', 'DeliveryChannel',
    'DeliveryRows', 'DeliverySettings', 'DownloadSettings', 'HEALTH_METRIC', 'JOBS', 'JobStore',
    'JobsSettings', 'LEDGER_ROLES', 'Log', 'Metrics', 'NoMatchSettings', 'Occurrences', 'OperatorPages', 'OperatorTools',
    'OutboxRows', 'PixivAccountStore', 'PixivSettings', 'Queues', 'RequestKeys', 'RouteSettings',
    'SchedulePauses', 'ScheduleSettings', 'SchedulerRuntimeSettings', 'SecretStore', 'Settings',
    'SourceGovernor', 'SourceSettings', 'SweepIndexes', 'SweepState', 'TRIGGER', 'TargetDeliverySettings',
    'TargetSettings', 'TimeLeft', 'TopicSpaces', 'TriggerSettings', 'UiSessions', 'WorkReservations',
    'WorkSource'
]
