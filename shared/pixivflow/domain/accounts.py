"""The shared state of one outside account (Pixiv): its rate-limit gate, its concurrency
permits, and what its governor answers a cell about to start."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AccountGate:
    """The shared rate-limit state of one Pixiv account (ledger item ``PIXIV#<accountId>`` / ``GATE``)."""

    cooldown_until: int = 0  # epoch ms; no Pixiv request of this account before it
    penalties: int = 0  # consecutive rate-limit answers; the cooldown doubles with each
    version: int = 0  # 0: the item does not exist yet
    # What started the cooldown, as a terminal reason: ``rate_limited`` (Pixiv said so), or the
    # failure the account backs off from (``network_error`` when the token endpoint could not be
    # reached, ``remote_http_error`` when it kept answering 5xx). A request refused meanwhile fails
    # with it, so an outage never reads as a rate limit.
    cause: str = "rate_limited"

    @property
    def wait_reason(self) -> str:
        """What a cell deferred by this cooldown waits for (its candidate report's ``waited``)."""
        return "rate_limit_cooldown" if self.cause == "rate_limited" else "outage_cooldown"


@dataclass(frozen=True)
class AccountPermit:
    """One of an account's ``maxConcurrency`` permits (ledger item ``PIXIV#<accountId>`` / ``PERMIT#<n>``)."""

    index: int
    holder: str | None = None  # the executor (cell run) holding it; None when free
    lease_until: int = 0  # epoch ms; a holder that stops renewing loses it then


@dataclass(frozen=True)
class Admission:
    """What an account's governor answers a cell about to start its Pixiv work."""

    granted: bool
    wait_until: int = 0  # epoch ms: when to try again (a holder's lease end, or the cooldown's end)
    reason: str = ""  # pixiv_account_busy | rate_limit_cooldown | outage_cooldown (AccountGate.wait_reason)
    cause: str | None = None  # a cooldown's cause (AccountGate.cause): what a cell that waits it out ends with
