"""A stand-in for the Lambda context object, enough for Powertools' decorators."""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass, field

# A request id per invocation, shaped like Lambda's (a UUID): this process's random prefix and a
# counter. The simulation makes dozens of contexts per seed, and a uuid4 each (an os.urandom call)
# was measurable there; the ids stay unique within a process and, by the prefix, across processes.
_PREFIX = str(uuid.uuid4())[:24]
_NEXT = itertools.count(1)


def _request_id() -> str:
    return f"{_PREFIX}{next(_NEXT):012x}"


@dataclass
class LocalLambdaContext:
    function_name: str = "pixivflow-local"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:pixivflow-local"
    aws_request_id: str = field(default_factory=_request_id)
    function_version: str = "$LATEST"
    log_group_name: str = "/aws/lambda/pixivflow-local"
    log_stream_name: str = "local"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


def context_for(name: str) -> LocalLambdaContext:
    return LocalLambdaContext(function_name=f"pixivflow-{name}",
                              invoked_function_arn=f"arn:aws:lambda:us-east-1:123456789012:function:pixivflow-{name}")
