"""Errors the twins raise: botocore ``ClientError``s with DynamoDB's/SQS's/S3's own codes, so adapter
code that maps ``ClientError`` codes behaves exactly as against AWS (or moto)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

_classes: dict[str, type[ClientError]] = {}


def error_class(code: str) -> type[ClientError]:
    cls = _classes.get(code)
    if cls is None:
        cls = type(code, (ClientError,), {})
        _classes[code] = cls
    return cls


def client_error(code: str, message: str, operation: str, *, status: int = 400, cls: str | None = None,
                 **extra: Any) -> ClientError:
    """A ClientError with ``code``; ``cls`` names the modeled exception class when it differs from the code."""
    response: dict[str, Any] = {
        "Error": {"Code": code, "Message": message},
        "ResponseMetadata": {"HTTPStatusCode": status},
        **extra,
    }
    # botocore's stubs type the response as a closed TypedDict; DynamoDB's also carry Item, CancellationReasons...
    return error_class(cls or code)(response, operation)  # type: ignore[arg-type]


class Exceptions:
    """``client.exceptions.X``: the class the twin raises for code X."""

    def __getattr__(self, code: str) -> type[ClientError]:
        if code.startswith("_"):
            raise AttributeError(code)
        return error_class(code)

    ClientError = ClientError


class Meta:
    def __init__(self, service: str, region: str) -> None:
        self.service_model = type("ServiceModel", (), {"service_name": service})()
        self.region_name = region
        self.endpoint_url = f"https://{service}.twin.local"
