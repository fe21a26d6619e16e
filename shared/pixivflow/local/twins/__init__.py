"""In-memory twins of the AWS services the engine uses: DynamoDB, SQS and S3.

They are twins of the *services*, speaking boto3's low-level client API, so the production adapters
(``adapters.dynamo_ledger``, ``adapters.sqs_queues``, ``adapters.s3_artifacts``) run on them
unchanged, and so does every adapter added later. One contract suite (``tests/contract``) runs the
same checks against moto and against the twins, so neither can drift from the other unnoticed.

``TwinCloud(now_ms=clock.now_ms).install()`` makes ``pixivflow.aws.client(name)`` hand out the
twins until ``uninstall()``; ``EmbeddedRuntime(..., backend="twin")`` does this for you.

The twins are strict by default (they refuse what DynamoDB refuses) and faithful-but-kind by default
(no TTL deletion, fresh reads, no throttling). The weaker guarantees are opt-in per test through one
knob, ``TwinCloud(faults=TwinFaults(seed=..., stale_reads=0.2, index_lag_ms=500, unprocessed=0.1,
transaction_conflict=0.05, throttle=0.01, ttl_delete_within_ms=60_000))``; ``faults.py`` documents each.
"""

from __future__ import annotations

import random
from typing import Any, Callable

from .dynamodb import TwinDynamoDB
from .errors import Meta
from .faults import TwinFaults
from .s3 import TwinS3
from .sqs import TwinSQS

__all__ = ["TwinCloud", "TwinDynamoDB", "TwinFaults", "TwinS3", "TwinSQS"]


class _TwinSTS:
    def __init__(self, region: str) -> None:
        self.meta = Meta("sts", region)

    def get_caller_identity(self, **_: Any) -> dict[str, Any]:
        return {"Account": "123456789012", "Arn": "arn:aws:iam::123456789012:user/twin", "UserId": "TWIN"}


class TwinCloud:
    """One account's worth of twins on one clock. ``index_lag_ms`` makes GSIs eventually consistent;
    ``seed`` makes SQS return visible messages in a seeded random order (standard queues keep none);
    ``faults`` switches on DynamoDB's opt-in models (``faults.TwinFaults``)."""

    TWINNED = frozenset({"dynamodb", "sqs", "s3", "sts"})

    def __init__(self, *, now_ms: Callable[[], int] | None = None, index_lag_ms: int | Callable[[], int] = 0,
                 seed: int | None = None, region: str = "us-east-1", faults: TwinFaults | None = None) -> None:
        shuffle = random.Random(f"{seed}:sqs-order") if seed is not None else None
        self.dynamodb = TwinDynamoDB(now_ms=now_ms, index_lag_ms=index_lag_ms, region=region, faults=faults)
        self.sqs = TwinSQS(now_ms=now_ms, shuffle=shuffle, region=region)
        self.s3 = TwinS3(region=region)
        self.sts = _TwinSTS(region)
        self.elsewhere: frozenset[str] = frozenset()  # services the caller serves beside the twins
        self._previous: Any = None
        self._installed = False

    def client(self, service: str, **kwargs: Any) -> Any:
        twin = getattr(self, service, None) if service in self.TWINNED else None
        if twin is None:
            if service in self.elsewhere:
                # a service without a twin that the caller serves otherwise (moto's SSM: the
                # harness's ``moto_services``), made by the factory that was in place before
                from ... import aws

                return self._previous(service, **kwargs) if self._previous is not None else aws.boto3_client(service, **kwargs)
            raise NotImplementedError(f"no in-memory twin of {service!r}; run this path on moto")
        return twin

    def install(self) -> "TwinCloud":
        from ... import aws

        self._previous = aws.set_factory(self.client)
        self._installed = True
        return self

    def uninstall(self) -> None:
        if self._installed:
            from ... import aws

            aws.set_factory(self._previous)
            self._installed = False

    def __enter__(self) -> "TwinCloud":
        return self.install()

    def __exit__(self, *exc: Any) -> None:
        self.uninstall()
