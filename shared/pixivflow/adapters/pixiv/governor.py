"""The account's permit semaphore: at most ``maxConcurrency`` cells work against one Pixiv account
at once, across every container, as PixivFlow bounds them.

PixivFlow leases resource ``pixiv-account:<id>`` to at most ``maxConcurrency`` executions (its
published deployment: 1), because Pixiv suspends accounts that scrape in parallel. Here each of
the N permits is a ledger item (``account_store``) holding the executor that took it and a short
lease: the execution service takes one before a cell's first Pixiv request, renews it with the
cell's heartbeat and releases it when the cell's run ends; a holder that dies simply stops
renewing and its permit is free again when the lease ends. Every write is conditional, so two
containers racing for the last permit cannot both win.

A cell that finds every permit held is not run: it is handed back to the execution queue for
just after the earliest lease end (``Admission.wait_until``). The same answer, with the cooldown's
end, is given while the account cools down after a rate limit: starting would only fail.
"""

from __future__ import annotations

from typing import Callable

from ...ports import PixivAccountStore
from ...domain.accounts import Admission

PERMIT_LEASE_MS = 90_000  # renewed every 30 s by the cell's heartbeat (services.timing.HEARTBEAT_MS)
RETRY_SLACK_MS = 1_000  # ask again a moment after the holder's lease would have ended


class AccountGovernor:
    def __init__(self, store: PixivAccountStore, account_id: str, max_concurrency: int, *,
                 now_ms: Callable[[], int], lease_ms: int = PERMIT_LEASE_MS) -> None:
        self._store = store
        self.account_id = account_id
        self.max_concurrency = max(1, int(max_concurrency))
        self._now = now_ms
        self._lease_ms = lease_ms
        self._held: dict[str, int] = {}  # holder -> permit index (this container's runs)

    def cooldown_until(self) -> int:
        return self._store.gate(self.account_id).cooldown_until

    def admit(self, holder: str) -> Admission:
        now = self._now()
        gate = self._store.gate(self.account_id)
        if gate.cooldown_until > now:
            return Admission(False, gate.cooldown_until, gate.wait_reason, gate.cause)
        permits = self._store.permits(self.account_id, self.max_concurrency)
        # A permit already ours first (a re-run of the same executor), then free or expired ones.
        order = sorted(permits, key=lambda p: (p.holder != holder, p.holder is not None and p.lease_until > now))
        for permit in order:
            if permit.holder is not None and permit.holder != holder and permit.lease_until > now:
                continue
            if self._store.take_permit(self.account_id, permit.index, holder, now, self._lease_ms):
                self._held[holder] = permit.index
                return Admission(True)
        # Every permit is held (or was taken under us): try again when the first lease would end.
        # A permit freed early is not waited for in vain: its release makes the next ask succeed.
        fresh = self._store.permits(self.account_id, self.max_concurrency)
        ends = [p.lease_until for p in fresh if p.holder is not None and p.lease_until > now]
        return Admission(False, (min(ends) if ends else now) + RETRY_SLACK_MS, "pixiv_account_busy")

    def renew(self, holder: str) -> bool:
        index = self._held.get(holder)
        if index is None:
            return True  # nothing held (the source was never admitted for this run)
        return self._store.renew_permit(self.account_id, index, holder, self._now(), self._lease_ms)

    def release(self, holder: str) -> None:
        index = self._held.pop(holder, None)
        if index is not None:
            self._store.release_permit(self.account_id, index, holder)
