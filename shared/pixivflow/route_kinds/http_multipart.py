"""``type: httpMultipart``: PixivFlow's submission route. The stored files (and, beside them,
Pixiv's previews) as multipart parts with templated form fields; the answer is the TelePost ACK
envelope, read with the route's ``ack`` hints. Its rows get the outbox's own attempt budget."""

from __future__ import annotations

from typing import Any, Literal, Mapping

from pydantic import Field, field_validator

from ..config.base import _http_url
from ..config.routes import FieldValue, PixivFlowUrlRoute
from ..domain.ack import AckHints, DeliveryAck, parse_delivery_ack
from ..domain.route_io import DeliveryResponse
from .registry import RouteKind, RouteSender, SenderTools

NOTICE_URL_FIELDS = ("notificationUrl", "refetchOutcomeUrl", "scheduleOutcomeUrl")


class HttpMultipartRoute(PixivFlowUrlRoute):
    """PixivFlow's submission route: multipart files + templated form fields."""

    type: Literal["httpMultipart"]
    method: Literal["POST", "PUT"] = "POST"
    fileField: str = Field(default="files", min_length=1)
    previewFileField: str = Field(default="previews", min_length=1)
    fields: dict[str, FieldValue] = Field(default_factory=dict)
    arrayFormat: Literal["comma", "repeat", "json"] = "comma"
    autoIdempotencyKey: bool = True
    notificationUrl: str | None = None
    refetchOutcomeUrl: str | None = None
    scheduleOutcomeUrl: str | None = None
    readinessUrl: str | None = None
    ack: AckHints | None = None

    @field_validator("notificationUrl", "refetchOutcomeUrl", "scheduleOutcomeUrl", "readinessUrl")
    @classmethod
    def _optional_url(cls, value: str | None) -> str | None:
        return None if value is None or not value.strip() else _http_url(value.strip(), allow_refs=True)

    @property
    def readiness_url(self) -> str | None:
        return self.readinessUrl

    def notice_url(self, field: str) -> str | None:
        return getattr(self, field) if field in NOTICE_URL_FIELDS else None

    def carries_refetch_id(self, target_fields: Mapping[str, Any]) -> bool:
        """Only with a refetch outcome URL and the request id mapped into a submitted field."""
        fields = {**self.fields, **target_fields}
        return bool((self.refetchOutcomeUrl or "").strip()) and fields.get("refetch_request_id") == "{{refetchRequestId}}"


def _ack(route: HttpMultipartRoute, response: DeliveryResponse) -> DeliveryAck:
    return parse_delivery_ack(response.status, response.body, route.ack)


def _sender(tools: SenderTools) -> RouteSender:
    from ..adapters.routes.multipart import MultipartSender

    return MultipartSender(tools)


KIND = RouteKind(name="httpMultipart", key="type", value="httpMultipart", model=HttpMultipartRoute, parse_ack=_ack,
                 sender=_sender, carries_files=True, takes_previews=True, renders_templates=True)
