"""The lease and re-drive times the use cases share (``docs/explanation/ledger.md``,
``docs/explanation/stall-rules.md``)."""

LEASE_TTL_MS = 180_000  # a cell's run lease; every heartbeat renews it
HEARTBEAT_MS = 30_000
OUTBOX_LEASE_MS = 120_000  # an outbox row's claim: one worker talks to the route at a time
REDISPATCH_AFTER_MS = 5 * 60_000  # the sweep re-dispatches a lease-less cell dispatched this long ago
REDRIVE_GRACE_MS = 120_000  # the sweep re-sends rows overdue by more than this
DEFAULT_SWEEP_INTERVAL_MS = 60_000  # template.yaml's SweepIntervalMinutes default, when SWEEP_INTERVAL_MS is unset
