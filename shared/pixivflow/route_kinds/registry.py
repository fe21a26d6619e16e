"""The registry of route kinds and what a kind declares (``pixivflow.route_kinds``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Protocol

from ..domain.ack import DeliveryAck
from ..domain.route_io import DeliveryRequest, DeliveryResponse
from ..domain.work import StoredFile

if TYPE_CHECKING:
    from ..config.routes import RouteModel
    from ..ports import ArtifactStore


class RouteSender(Protocol):
    def deliver(self, request: DeliveryRequest, route: Any) -> DeliveryResponse:
        """One attempt: exactly one exchange on the kind's wire format (retrying is the outbox's)."""
        ...


@dataclass(frozen=True)
class SenderTools:
    """What the route channel lends every kind's sender: the HTTP exchange of the operator-routes
    pool, the ``${VAR}`` lookup, the stored files of a request and their bytes, the clock."""

    http: Any  # adapters.routes.http.Http
    pool: Any  # adapters.http_pools.OperatorPool
    lookup: Callable[[str], str | None]
    route_token: Callable[[Any], str | None]
    artifacts: ArtifactStore
    stored: Callable[[DeliveryRequest], list[StoredFile]]
    open: Callable[[StoredFile], Iterator[bytes]]
    now_ms: Callable[[], int]
    monotonic: Callable[[], float]


@dataclass(frozen=True)
class RouteKind:
    name: str  # how logs, pages and `config check` name it (a route's ``route_type``)
    key: str  # the config key that names it: ``type`` (PixivFlow's routes) or ``kind`` (ours)
    value: str  # that key's value
    model: type[RouteModel]
    parse_ack: Callable[[Any, DeliveryResponse], DeliveryAck]
    sender: Callable[[SenderTools], RouteSender]  # built once per channel, on its first delivery
    carries_files: bool = False  # uploads or links the stored files
    takes_previews: bool = False  # sends Pixiv's preview images beside the originals
    renders_templates: bool = False  # freezes PixivFlow's template context and the target's fields
    review: bool = False  # posts in several calls to a review chat: the ledger guards each send


_KINDS: dict[tuple[str, str], RouteKind] = {}
DEFAULT = ("kind", "webhook")  # a route naming neither key is this project's JSON route


def register(kind: RouteKind) -> RouteKind:
    """Add a kind (the built-in ones below; a test's own). A name or key taken twice is refused."""
    taken = [k for k in _KINDS.values() if (k.key, k.value) == (kind.key, kind.value) or k.name == kind.name
             or k.model is kind.model]
    if taken and taken != [kind]:
        raise ValueError(f"route kind {kind.name!r} clashes with {taken[0].name!r}")
    _KINDS[(kind.key, kind.value)] = kind
    return kind


def unregister(kind: RouteKind) -> None:
    _KINDS.pop((kind.key, kind.value), None)


def kinds() -> tuple[RouteKind, ...]:
    return tuple(_KINDS.values())


def values_of(key: str) -> tuple[str, ...]:
    """The values ``key`` may take (``type``: PixivFlow's route types), in registration order."""
    return tuple(k.value for k in _KINDS.values() if k.key == key)


def kind_for(block: Mapping[str, Any]) -> RouteKind:
    """The kind a route block names: by its ``type`` or ``kind`` key, else the default kind (whose
    model then says what is wrong with an unknown ``kind``)."""
    for kind in _KINDS.values():
        if block.get(kind.key) == kind.value:
            return kind
    return _KINDS[DEFAULT]


def kind_of(route: object) -> RouteKind:
    for cls in type(route).__mro__:
        for kind in _KINDS.values():
            if kind.model is cls:
                return kind
    raise LookupError(f"{type(route).__name__} is not the model of a registered route kind")


def validate(block: Any) -> RouteModel:
    """One route block as its kind's model (pydantic's ValidationError when it is not one)."""
    kind = kind_for(block) if isinstance(block, Mapping) else _KINDS[DEFAULT]
    return kind.model.model_validate(block)
