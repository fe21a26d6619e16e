"""Issue 25 (cold start): AWS clients are made on first use, by the factory in force when the
runtime was built, and only the ones an invocation touches."""

from __future__ import annotations

import threading

from pixivflow import aws


class _Made:
    def __init__(self) -> None:
        self.services: list[str] = []

    def __call__(self, service: str, **kwargs):
        self.services.append(service)
        return _Client(service, kwargs)


class _Client:
    def __init__(self, service: str, kwargs: dict) -> None:
        self.service, self.kwargs = service, kwargs

    def get_item(self, **kwargs):
        return {"service": self.service, **kwargs}


def test_a_lazy_client_is_made_on_first_use_by_the_factory_in_force_when_it_was_asked_for():
    made, later = _Made(), _Made()
    previous = aws.set_factory(made)
    try:
        lazy = aws.lazy_client("dynamodb", region_name="us-east-1")
        assert made.services == [] and not lazy.made
        aws.set_factory(later)  # a factory installed afterwards is not the one this client belongs to
        assert lazy.get_item(Key=1) == {"service": "dynamodb", "Key": 1}
        assert lazy.kwargs == {"region_name": "us-east-1"}
        assert made.services == ["dynamodb"] and later.services == [] and lazy.made
        lazy.get_item(Key=2)
        assert made.services == ["dynamodb"]  # made once, then shared
    finally:
        aws.set_factory(previous)


def test_threads_racing_for_a_lazy_client_make_one():
    made = _Made()
    previous = aws.set_factory(made)
    try:
        lazy = aws.lazy_client("sqs")
        start = threading.Barrier(8)

        def use() -> None:
            start.wait()
            lazy.get_item()

        threads = [threading.Thread(target=use) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert made.services == ["sqs"]
    finally:
        aws.set_factory(previous)


def test_a_scheduled_fire_makes_no_s3_client(make_runtime):
    """The trigger admits a slot (DynamoDB) and dispatches its cells (SQS): S3 is never asked."""
    rt = make_runtime("2026-11-30T23:00:00Z")
    rt.fire("morning-tokyo", iso="2026-11-30T23:00:00Z")
    engine = rt.engine
    assert rt.engine.ledger.load("morning-tokyo@2026-12-01T0800") is not None
    clients = {"dynamodb": engine.ledger._client, "sqs": engine.queues._client, "s3": engine.artifacts._client}
    assert all(isinstance(c, aws.LazyClient) for c in clients.values()), clients
    assert clients["dynamodb"].made and clients["sqs"].made and not clients["s3"].made
    assert engine.jobs._client is clients["dynamodb"] and engine.outbox_rows._client is clients["dynamodb"]
