"""The one place AWS clients are made (DESIGN §12: lazily, never at import time).

``client("dynamodb")`` is ``boto3.client("dynamodb")`` unless a factory was set: the embedded
runtime sets one that hands out the in-memory twins (``pixivflow.local.twins``), so the same
adapters run on AWS, on moto and on the twins.
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
    import boto3

    # The stubs overload client() on each service's literal name; this factory takes the name as a str.
    return boto3.client(service, **kwargs)  # type: ignore[call-overload]


def set_factory(factory: Callable[..., Any] | None) -> Callable[..., Any] | None:
    """Install a client factory (None restores boto3). Returns the previous one."""
    global _factory
    with _lock:
        previous, _factory = _factory, factory
    return previous
