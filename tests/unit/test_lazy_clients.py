"""Cold start: AWS clients are made on first use, by the factory in force when the runtime was
built, and each function builds only the collaborators its invocation touches (``pixivflow.runtime``)."""

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


def _race(use, threads: int = 8) -> None:
    """``use`` called by ``threads`` threads released at once."""
    start = threading.Barrier(threads)

    def run() -> None:
        start.wait()
        use()

    running = [threading.Thread(target=run) for _ in range(threads)]
    for t in running:
        t.start()
    for t in running:
        t.join()


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
        _race(lazy.get_item)
        assert made.services == ["sqs"]
    finally:
        aws.set_factory(previous)


def test_a_scheduled_fire_makes_no_s3_client(make_runtime):
    """The trigger admits a slot (DynamoDB) and dispatches its cells (SQS): S3 is never asked."""
    rt = make_runtime("2026-11-30T23:00:00Z")
    rt.fire("morning-tokyo", iso="2026-11-30T23:00:00Z")
    wiring = rt.wiring
    assert rt.wiring.ledger.load("morning-tokyo@2026-12-01T0800") is not None
    clients = {"dynamodb": wiring.ledger._client, "sqs": wiring.queues._client, "s3": wiring.artifacts._client}
    assert all(isinstance(c, aws.LazyClient) for c in clients.values()), clients
    assert clients["dynamodb"].made and clients["sqs"].made and not clients["s3"].made
    assert wiring.jobs._client is clients["dynamodb"] and wiring.outbox_rows._client is clients["dynamodb"]


def test_a_deferred_collaborator_is_built_once_on_first_use_and_looks_like_what_it_built():
    """Issue 25: the runtime builds the route channel, the source, the artifact store and the callback
    sender on first use; until then nothing is built, afterwards callers see the real object."""
    from pixivflow.runtime import Deferred

    built: list[int] = []

    def build() -> _Client:
        built.append(1)
        return _Client("channel", {})

    lazy = Deferred(build)
    assert built == [] and not lazy.built and "not built" in repr(lazy)
    assert lazy.get_item(Key=3) == {"service": "channel", "Key": 3}
    assert isinstance(lazy, _Client) and lazy.service == "channel" and lazy.built
    lazy.kwargs = {"set": True}  # an attribute set goes to the built object
    assert lazy.kwargs == {"set": True} and built == [1]


def test_threads_racing_for_a_deferred_collaborator_build_one():
    from pixivflow.runtime import Deferred

    built: list[int] = []

    def build() -> _Client:
        built.append(1)
        return _Client("source", {})

    lazy = Deferred(build)
    _race(lazy.get_item)
    assert built == [1]


def test_a_scheduled_fire_builds_no_route_channel_and_a_reset_does_not_build_one_to_close_it(make_runtime):
    from pixivflow import runtime
    from pixivflow.runtime import Deferred

    rt = make_runtime("2026-11-30T23:00:00Z")
    rt.fire("morning-tokyo", iso="2026-11-30T23:00:00Z")
    wiring = runtime.get().wiring
    assert rt.wiring.ledger.load("morning-tokyo@2026-12-01T0800") is not None
    deferred = {"channel": wiring.channel, "source": wiring.source, "callbacks": wiring.callbacks}
    assert all(type(d) is Deferred and not d.built for d in deferred.values()), deferred
    runtime._close(runtime.get())
    assert not wiring.channel.built


def test_each_function_builds_only_what_its_first_invocation_uses(make_runtime):
    """One cold start per function, in the order a slot meets them: the trigger admits and
    dispatches (no source, store, route channel or callback sender); the execute function reads a
    work and stores it (no route channel); the deliver function posts it (no work source); the
    stall sweep and the job events function on a settled ledger build neither."""
    from pixivflow import runtime
    from conftest import JOBS_TOKEN

    def built() -> set[str]:
        wiring = runtime.get().wiring
        parts = {"source": wiring.source, "artifacts": wiring.artifacts, "channel": wiring.channel,
                 "callbacks": wiring.callbacks, "jobs": wiring.jobs}
        return {name for name, part in parts.items() if part.built}

    rt = make_runtime("2026-11-30T23:00:00Z")
    runtime.cold_start()
    rt.fire("morning-tokyo", iso="2026-11-30T23:00:00Z")
    assert built() == set()
    runtime.cold_start()
    assert rt.pumps["execute"].poll() > 0
    assert built() == {"source", "artifacts"}
    runtime.cold_start()
    assert rt.pumps["deliver"].poll() > 0
    assert "source" not in built() and "channel" in built()
    rt.settle()
    runtime.cold_start()
    rt.sweep()
    assert built() == set()
    runtime.cold_start()
    status, _ = rt.http("GET", "/jobs/job-unknown/events", token=JOBS_TOKEN, function="job_events")
    assert status == 404 and built() == set()  # an unknown job: one read of its slot
