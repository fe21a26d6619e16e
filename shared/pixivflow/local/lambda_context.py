"""A stand-in for the Lambda context object, enough for Powertools' decorators."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field


@dataclass
class LocalLambdaContext:
    function_name: str = "pixivflow-local"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:pixivflow-local"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    function_version: str = "$LATEST"
    log_group_name: str = "/aws/lambda/pixivflow-local"
    log_stream_name: str = "local"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


def context_for(name: str) -> LocalLambdaContext:
    return LocalLambdaContext(function_name=f"pixivflow-{name}",
                              invoked_function_arn=f"arn:aws:lambda:us-east-1:123456789012:function:pixivflow-{name}")
