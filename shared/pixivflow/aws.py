"""The one place AWS clients are made: lazily, never at import time.

``client("dynamodb")`` is ``boto3.client("dynamodb")`` unless a factory was set: the embedded
runtime sets one that hands out the in-memory twins (``pixivflow.local.twins``), so the same
adapters run on AWS, on moto and on the twins.

``lazy_client("sqs")`` is the same client, made on its first use, for a shorter cold start: building a
boto3 client reads and parses its service model (S3's alone is a 185 KB gzip), and an invocation
that never sends a message or stores a file has no use for it. The factory in force when the
stand-in is made is the one it uses later, so a lazy client talks to exactly the endpoint (AWS,
moto, the twins) an eager one made at that moment would have.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

_factory: Callable[..., Any] | None = None
_lock = threading.Lock()


def client(service: str, **kwargs: Any) -> Any:
    factory = _factory
    if factory is not None:
        return factory(service, **kwargs)
    return boto3_client(service, **kwargs)


def boto3_client(service: str, **kwargs: Any) -> Any:
    """boto3's own client, whatever factory is installed."""
    import boto3

    # The stubs overload client() on each service's literal name; this factory takes the name as a str.
    return boto3.client(service, **kwargs)  # type: ignore[call-overload]


class LazyClient:
    """A stand-in for ``client(service, **kwargs)`` that makes the real client on first attribute
    access (a call, ``.meta``, ``.exceptions``) and then forwards everything to it."""

    __slots__ = ("_service", "_kwargs", "_factory", "_client", "_made")

    def __init__(self, service: str, factory: Callable[..., Any] | None, kwargs: dict[str, Any]) -> None:
        self._service = service
        self._kwargs = kwargs
        self._factory = factory
        self._client: Any = None
        self._made = threading.Lock()

    def _real(self) -> Any:
        real = self._client
        if real is None:
            with self._made:  # two threads of one container never build two clients
                real = self._client
                if real is None:
                    if self._factory is not None:
                        real = self._factory(self._service, **self._kwargs)
                    else:
                        import boto3

                        real = boto3.client(self._service, **self._kwargs)  # type: ignore[call-overload]
                    self._client = real
        return real

    @property
    def made(self) -> bool:
        """Whether the real client exists yet (the cold-start tests read it)."""
        return self._client is not None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real(), name)

    def __repr__(self) -> str:
        return f"LazyClient({self._service!r}, made={self.made})"


def lazy_client(service: str, **kwargs: Any) -> LazyClient:
    return LazyClient(service, _factory, kwargs)


def set_factory(factory: Callable[..., Any] | None) -> Callable[..., Any] | None:
    """Install a client factory (None restores boto3). Returns the previous one."""
    global _factory
    with _lock:
        previous, _factory = _factory, factory
    return previous
