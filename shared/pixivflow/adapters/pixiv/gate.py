"""One rate-limit gate per Pixiv account (rate limits: docs/explanation/pixiv-source.md).

* **Cooldown, shared.** A "Rate Limit" answer (HTTP 429, or the body's message on any status)
  puts the whole account in a cooldown every container honours: the ledger item
  ``PIXIV#<accountId>/GATE`` holds ``cooldownUntil`` and ``penalties``. The cooldown is 60 s,
  doubling with each consecutive penalty up to 15 min, and never shorter than Retry-After.
  Writes are conditional on the item's version, so two containers hit at once escalate it once.
  While it lasts, a request fails at once with ``RateLimitedError`` without reaching Pixiv; the
  cell retries its bound work later. The first success after a cooldown clears the penalties.
* **Pacing, per account.** ``requestPacingMs`` (+ up to 25 % jitter from the injected entropy)
  between two App API requests of the ACCOUNT, whichever container sends them: each
  request first takes the account's next turn on the ledger item ``PIXIV#<accountId>/PACE``
  (one conditional write; a refused one says how long to wait). Concurrency is bounded by the
  account's permits (``governor``).

The gate state is re-read at most every ``refresh_ms`` (a GetItem per container, not per request).
Time comes from the injected clock and waiting from the injected ``sleep``: tests never sleep.
"""

from __future__ import annotations

import threading
from typing import Callable

from ...domain.errors import RateLimitedError, SourceOutage
from ...ports import PixivAccountStore
from ...domain.accounts import AccountGate

BASE_COOLDOWN_MS = 60_000
MAX_COOLDOWN_MS = 15 * 60_000
JITTER = 0.25
REFRESH_MS = 5_000
MAX_PACE_ROUNDS = 64  # turns lost in a row before the request gives up (others hold the account)


def cooldown_ms(penalties: int, retry_after_ms: int | None = None) -> int:
    """60 s × 2^(penalties−1), at most 15 min; never below Retry-After."""
    n = max(1, int(penalties))
    backoff = min(MAX_COOLDOWN_MS, BASE_COOLDOWN_MS * 2 ** min(n - 1, 16))
    return max(backoff, int(retry_after_ms or 0))


class RateGate:
    def __init__(self, store: PixivAccountStore, account_id: str, *, now_ms: Callable[[], int],
                 sleep: Callable[[float], None], uniform: Callable[[], float], pacing_ms: int = 1000,
                 refresh_ms: int = REFRESH_MS, log: Callable[..., None] | None = None) -> None:
        self._store = store
        self._account = account_id
        self._now = now_ms
        self._sleep = sleep
        self._uniform = uniform
        self._pacing_ms = max(0, int(pacing_ms))
        self._refresh_ms = refresh_ms
        self._log = log or (lambda *a, **k: None)
        self._state: AccountGate | None = None
        self._read_at = 0
        self._lock = threading.RLock()

    @property
    def account_id(self) -> str:
        return self._account

    def now(self) -> int:
        return self._now()

    def state(self, *, fresh: bool = False) -> AccountGate:
        with self._lock:
            now = self._now()
            if fresh or self._state is None or now - self._read_at >= self._refresh_ms:
                self._state = self._store.gate(self._account)
                self._read_at = now
            return self._state

    def before_request(self, *, pace: bool = True) -> None:
        """Refuse while the account cools down; otherwise wait for the account's next request turn."""
        with self._lock:
            state = self.state()
            now = self._now()
            if state.cooldown_until > now:
                left = state.cooldown_until - now
                if state.cause == "rate_limited":
                    raise RateLimitedError(
                        f"rate_limited: Pixiv account {self._account} is cooling down after a rate limit "
                        f"({-(-left // 1000)} s left, penalty {state.penalties})", retry_after_ms=left)
                raise SourceOutage(f"{state.cause}: Pixiv account {self._account} is cooling down after Pixiv failed "
                                   f"({state.cause}; {-(-left // 1000)} s left, penalty {state.penalties})",
                                   reason=state.cause, retry_after_ms=left)
        if not (pace and self._pacing_ms):
            return
        # The turn is the account's, on the ledger's PACE item, so the pacing holds across
        # containers; the wait happens outside the lock (another permit holder of this container
        # may be streaming an image meanwhile).
        gap = int(self._pacing_ms * (1 + JITTER * self._uniform()))
        for _ in range(MAX_PACE_ROUNDS):
            wait = self._store.pace(self._account, self._now(), gap)
            if wait <= 0:
                return
            self._sleep(wait / 1000)
        raise RateLimitedError(f"rate_limited: Pixiv account {self._account}'s request turns are contended; "
                               "retrying later", retry_after_ms=gap)

    def penalize(self, retry_after_ms: int | None, *, status: int | None, where: str, cause: str = "rate_limited") -> int:
        """Record a rate-limit answer (or a failure the account backs off from, ``cause``);
        returns the cooldown (ms) the account is now under."""
        with self._lock:
            for _ in range(3):
                seen = self.state(fresh=True)
                now = self._now()
                if seen.cooldown_until > now:
                    # Another container (or an earlier request of ours) already escalated for
                    # this wave: a request in flight meanwhile does not double it again; it can
                    # only stretch it to a longer Retry-After.
                    penalties, wave = seen.penalties, seen.cause  # the wave keeps the cause that began it
                    until = max(seen.cooldown_until, now + int(retry_after_ms or 0))
                    if until == seen.cooldown_until:
                        return until - now
                else:
                    penalties, wave = seen.penalties + 1, cause
                    until = now + cooldown_ms(penalties, retry_after_ms)
                if self._store.set_gate(self._account, seen, until, penalties, now, cause=wave):
                    self._state = AccountGate(until, penalties, seen.version + 1, wave)
                    self._read_at = now
                    message = ("Pixiv rate limit: account cooling down" if wave == "rate_limited"
                               else "Pixiv failing: account cooling down")
                    self._log("warning", message, event="pixiv.rate_limited", cause=wave,
                              account_id=self._account, status=status, endpoint=where, cooldown_ms=until - now,
                              penalties=penalties, retry_after_ms=retry_after_ms)
                    return until - now
            # Lost three races in a row: the others have recorded it; honour what is there.
            state = self.state(fresh=True)
            return max(0, state.cooldown_until - self._now())

    def succeeded(self) -> None:
        """A request went through: the first success after a cooldown clears the penalties."""
        with self._lock:
            state = self._state
            if state is None or state.penalties == 0 or state.cooldown_until > self._now():
                return
            if self._store.set_gate(self._account, state, state.cooldown_until, 0, self._now(), cause=state.cause):
                self._state = AccountGate(state.cooldown_until, 0, state.version + 1, state.cause)
            else:
                self.state(fresh=True)
