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
    """A work source failed. ``status`` is the upstream HTTP status when there was one."""

    def __init__(self, message: str, *, status: int | None = None, retryable: bool | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable


class WorkGoneError(SourceError):
    """The work no longer exists or is no longer visible (deleted, private, removed)."""


class TransientSourceError(SourceError):
    """A network-level or rate-limit failure that a later attempt may not see."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message, status=status, retryable=True)


class PaginationError(SourceError):
    """The pager did not advance (spec §6.4). Never downgraded to "no results"."""

    code = "PAGINATION_ERROR"

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


class LedgerUnavailable(PixivFlowError):
    """The ledger could not be reached or throttled us: an infrastructure error, retried by SQS."""
