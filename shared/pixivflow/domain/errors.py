"""Domain errors: adapters translate infrastructure failures into these."""

from __future__ import annotations


class PixivFlowError(Exception):
    """Base of every error this package raises on purpose."""


class StatusError(PixivFlowError):
    """A refusal the caller can act on: ``status`` is the HTTP status to answer, the message is echoed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message

    def __str__(self) -> str:
        return self.message


class ConfigError(PixivFlowError):
    """The configuration is invalid; the message names the field path.

    ``errors`` are the findings one by one (``<field path>: <what is wrong>``); ``warnings`` are
    the warn-and-default findings gathered before them, so a config check can show both."""

    def __init__(self, message: str, warnings: tuple[str, ...] = (), errors: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.warnings = tuple(warnings)
        self.errors = tuple(errors) or (message.removeprefix("invalid configuration: "),)


class SourceError(PixivFlowError):
    """A work source failed. ``status`` is the upstream HTTP status when there was one.

    ``reason`` is the terminal reason code the failure stands for (``rate_limited``,
    ``remote_http_error``, ``download_failed``, ``metadata_failed``, ...) when the source knows
    it; sources also start their message with it, so ``lastError`` names it.
    """

    reason: str | None = None

    def __init__(self, message: str, *, status: int | None = None, retryable: bool | None = None,
                 reason: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        if reason is not None:
            self.reason = reason


class WorkGoneError(SourceError):
    """The work no longer exists or is no longer visible (deleted, private, removed)."""


class TransientSourceError(SourceError):
    """A network-level or rate-limit failure that a later attempt may not see."""

    def __init__(self, message: str, *, status: int | None = None, reason: str | None = None) -> None:
        super().__init__(message, status=status, retryable=True, reason=reason)


class SourceOutage(TransientSourceError):
    """The source as a whole cannot answer right now, whatever the work: the account is cooling
    down after a rate limit, or Pixiv kept answering 5xx / timing out through the quick retries.

    Trying the next candidate would hit the same wall, so a cell stops its scan and KEEPS its
    bound work: the retry continues that work after the cooldown (a retryable job-level outage).
    ``retry_after_ms`` is how long the source asked us to wait, when it said.
    """

    def __init__(self, message: str, *, status: int | None = None, reason: str = "remote_http_error",
                 retry_after_ms: int | None = None) -> None:
        super().__init__(message, status=status, reason=reason)
        self.retry_after_ms = retry_after_ms


class RateLimitedError(SourceOutage):
    """Pixiv said "Rate Limit" (HTTP 429, or the body's message on any status), or the account's
    shared cooldown has not ended yet. Terminal reason when it ends a cell: ``rate_limited``."""

    def __init__(self, message: str, *, status: int | None = None, retry_after_ms: int | None = None) -> None:
        super().__init__(message, status=status, reason="rate_limited", retry_after_ms=retry_after_ms)


class FatalSourceError(SourceError):
    """The source cannot work at all until an operator acts: the cell ends at once, never retried.

    ``reason`` is one of the terminal reasons whose policy is ``retryable: false``. Unlike the
    other job-level outages it is never retried: retrying a rejected refresh token or a missing
    secret only burns the schedule's budget.
    """

    reason = "internal_error"

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message, status=status, retryable=False)


class AuthenticationError(FatalSourceError):
    """Pixiv rejected the account's refresh token (``invalid_grant``): terminal ``auth_failed``.

    The candidate-error rules match this class name (job-level ``pixiv_auth_failure``, domain/scan.py)."""

    reason = "auth_failed"


class SourceConfigurationError(FatalSourceError):
    """The source is not configured (no refresh token, an unresolvable ``${VAR}``): ``configuration_error``."""

    reason = "configuration_error"


class WorkRestrictedError(SourceError):
    """Pixiv returned the work as a restricted placeholder (``limit_*`` image, ``visible: false``).

    Skipped as ``unavailable`` in the candidate report; never retried as the same work."""


class PaginationError(SourceError):
    """The pager did not advance. Never downgraded to "no results"."""

    code = "PAGINATION_ERROR"

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


class LedgerUnavailable(PixivFlowError):
    """The ledger could not be reached or throttled us: an infrastructure error, retried by SQS."""


class SecretStoreUnavailable(PixivFlowError):
    """The secret store could not answer (throttled, network, a 5xx), after a few quick retries.

    The one rule every secret reader shares: a secret that does not EXIST is an answer
    (``None``, or the reader's "missing" error: an operator must act), a store that did not answer
    is THIS error: retryable, never cached, never read as "no secret" (which would dead-letter a
    callback, or send a delivery without its credentials)."""


class NoTimeLeft(PixivFlowError):
    """This invocation has too little time left to start an attempt and record its result: the
    record goes back to its queue unclaimed, so it uses no attempt."""


class OutboxAttemptError(PixivFlowError):
    """One outbox attempt failed; ``status`` is the endpoint's HTTP status when it answered
    (the error classification uses it: 429/5xx retry, other 4xx dead-letter). A sender that knows
    its own verdict (a job event callback's rules) gives ``code`` and ``retryable``."""

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None,
                 retryable: bool | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.retryable = retryable


class NotReady(PixivFlowError):
    """The destination's readiness probe failed: release the row without consuming an attempt."""
