"""Delivery on the virtual clock: ``drive`` lets an occurrence's delivery run its course, retries and
re-drives included, without sleeping."""

from __future__ import annotations

SECOND = 1_000
HOUR = 3_600_000
REDRIVE_GRACE_MS = 120_000  # DESIGN §5: the sweep re-sends rows overdue by more than this


def drive(rt, *, limit_ms: int = 48 * HOUR, max_steps: int = 500) -> int:
    """Advance virtual time event by event until no outbox row or held message is left.

    Each step jumps to the next thing that would happen in production: a held (delayed) outbox
    message becoming visible, or an actionable row becoming re-drivable by the sweep
    (``nextAttemptAt + 120 s``, or an expired processing lease); then pump, sweep, pump.
    Returns the virtual milliseconds that passed."""
    ledger = rt.wiring.ledger
    begin = rt.clock.now_ms()
    rt.pump()
    for _ in range(max_steps):
        now = rt.clock.now_ms()
        wake = []
        if rt.next_release() is not None:
            wake.append(rt.next_release())
        # rows of open slots are found through their slot, the rest through DueOutbox (as the sweep does)
        rows = [i for slot_id, _ in ledger.active_slots() for i in ledger.load(slot_id).intents]
        rows += [ledger.get_intent_by_key(pk, sk) for pk, sk in ledger.due_intents(now + 30 * 24 * HOUR, limit_per_shard=100)]
        for row in rows:
            if row is None or not row.actionable:
                continue
            if row.outbox_status == "processing" and row.lease_until is not None:
                wake.append(max(row.lease_until, row.next_attempt_at + REDRIVE_GRACE_MS))
            else:
                wake.append(row.next_attempt_at + REDRIVE_GRACE_MS)
        if not wake or min(wake) - begin > limit_ms:
            break
        rt.clock.set(max(now + SECOND, min(wake)))
        rt.pump()
        rt.sweep()
        rt.pump()
    return rt.clock.now_ms() - begin
