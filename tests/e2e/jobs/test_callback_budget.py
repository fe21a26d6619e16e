"""Every callback attempt ends, and every callback row ends (issue 21 items 5 and 6; spec §10.5, §10.9).

* an attempt has a TOTAL deadline (connect + headers + body): the smaller of the callback's own
  timeout and the invocation's remaining time minus the settle margin. A loopback receiver that
  drips its answer one byte at a time cannot stretch it;
* the claim counts the attempt: a worker that dies after claiming has used it, so eight hung
  attempts end in a dead row, and a claim that finds the budget spent dead-letters unsent;
* a record that cannot start in time goes back to its queue unclaimed, using no attempt;
* a secret store that does not answer is retried, never dead-lettered, never cached (callbacks
  and notification rows alike).

The short deadline is injected through the Lambda context's remaining time (as Lambda reports it);
the receivers are loopback servers, so no packet leaves the machine."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from support.jobs import CALLBACK_SECRET, PLAN, Receiver, events, get_job, jobs_runtime, post_job, task

from pixivflow.local.lambda_context import LocalLambdaContext
from pixivflow.services.timing import OUTBOX_LEASE_MS, REDRIVE_GRACE_MS
from pixivflow.services.outbox import MIN_ATTEMPT_MS, SETTLE_MARGIN_MS

SLOT = f"{PLAN}@manual-job-key-1"
DEADLINE_S = 0.25
KIND = "event_callback"


class DripReceiver:
    """Answers ``job.accepted`` and ``job.started`` at once; for ``job.succeeded`` it sends its
    status line and headers one byte every ``interval_s`` and never finishes (for ``cap_s``).
    Each connection's wall time is recorded."""

    def __init__(self, interval_s: float = 0.02, cap_s: float = 10.0) -> None:
        self.interval_s, self.cap_s = interval_s, cap_s
        self.connections: list[tuple[str, float]] = []  # (event type, seconds until the client hung up)
        self._lock = threading.Lock()

    def __enter__(self) -> "DripReceiver":
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop = True
        self._sock.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}/hooks/jobs"

    def _accept(self) -> None:
        while not self._stop:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        start = time.monotonic()
        raw = b""
        with conn:
            while b"\r\n\r\n" not in raw:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                raw += chunk
            head, _, body = raw.partition(b"\r\n\r\n")
            length = int(next((line.split(b":")[1] for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length")), b"0"))
            while len(body) < length:
                body += conn.recv(65536)
            kind = "job.succeeded" if b'"job.succeeded"' in body else "other"
            try:
                if kind == "other":
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
                else:
                    drip = b"HTTP/1.1 200 OK\r\n" + b"X-Drip: a\r\n" * 100_000
                    for byte in drip:
                        if time.monotonic() - start > self.cap_s:
                            break
                        conn.sendall(bytes([byte]))
                        time.sleep(self.interval_s)
            except OSError:
                pass  # the client hung up: that is what an attempt's deadline looks like here
            with self._lock:
                self.connections.append((kind, time.monotonic() - start))

    def dripped(self) -> list[float]:
        with self._lock:
            return [seconds for kind, seconds in self.connections if kind == "job.succeeded"]


@pytest.fixture
def remaining(monkeypatch):
    """Set the invocation's remaining time every Lambda context reports (ms)."""
    def set_to(ms: float) -> None:
        monkeypatch.setattr(LocalLambdaContext, "get_remaining_time_in_millis", lambda self: ms)
    return set_to


def callback_row(rt, event_type: str):
    by_type = {e["type"]: e["event_id"] for e in events(rt, SLOT)[1]["events"]}
    return rt.wiring.outbox_rows.get(KIND, f"job-event:{SLOT}:{by_type[event_type]}")


def wait_for(predicate, timeout_s: float = 5.0) -> None:
    end = time.monotonic() + timeout_s
    while not predicate() and time.monotonic() < end:
        time.sleep(0.01)


def test_a_drip_fed_attempt_ends_within_its_deadline_and_eight_end_in_a_dead_row(make_runtime, downstream, remaining):
    remaining(SETTLE_MARGIN_MS + DEADLINE_S * 1000)  # each attempt gets DEADLINE_S, whatever its own 30 s
    with DripReceiver() as receiver:
        rt = jobs_runtime(make_runtime)
        assert post_job(rt, task(callback_url=receiver.url))[0] == 202
        rt.pump()
        first = callback_row(rt, "job.succeeded")
        assert (first.status, first.attempts) == ("retry_wait", 1)
        assert first.last_error == "transport: ReadTimeout"
        job = get_job(rt, SLOT)[1]
        page = events(rt, SLOT)[1]
        rt.settle(max_ms=12 * 3_600_000)
        wait_for(lambda: len(receiver.dripped()) == 8)
        dead = callback_row(rt, "job.succeeded")
        assert (dead.status, dead.attempts, dead.max_attempts) == ("dead", 8, 8)
        assert dead.last_error.startswith("attempt budget exhausted after 8 attempts: transport")
        dripped = receiver.dripped()
        assert len(dripped) == 8  # eight attempts, no ninth
        # each one hung up at its deadline (a loaded machine adds scheduling delay), not at the receiver's 10 s
        assert max(dripped) < DEADLINE_S + 2.5
        # the job is unchanged: its status, its projection and its event page
        assert get_job(rt, SLOT)[1] == job and job["status"] == "succeeded"
        later = events(rt, SLOT)[1]
        assert {k: v for k, v in later.items() if k != "server_time"} == {k: v for k, v in page.items() if k != "server_time"}
        assert callback_row(rt, "job.accepted").status == "done"


def test_an_attempt_is_used_by_its_claim_even_when_the_worker_dies(make_runtime, downstream):
    with Receiver() as receiver:
        rt = jobs_runtime(make_runtime)
        post_job(rt, task(callback_url=receiver.url))
        row = callback_row(rt, "job.accepted")
        # a worker claims the row and dies before sending anything
        held = rt.wiring.outbox_rows.claim(row, "worker-that-dies", rt.clock.now_ms(), OUTBOX_LEASE_MS)
        assert (held.status, held.attempts) == ("processing", 1)
        rt.pump()  # the row's message finds it held: nothing is sent for it
        assert "job.accepted" not in receiver.event_types()
        rt.clock.advance(OUTBOX_LEASE_MS + REDRIVE_GRACE_MS)
        rt.settle()
        done = callback_row(rt, "job.accepted")
        assert (done.status, done.attempts) == ("done", 2)  # the dead worker's attempt stays used
        assert receiver.event_types().count("job.accepted") == 1


def test_a_row_whose_every_attempt_died_mid_send_is_dead_without_a_ninth_send(make_runtime, downstream):
    with Receiver() as receiver:
        rt = jobs_runtime(make_runtime)
        post_job(rt, task(callback_url=receiver.url))
        rows = rt.wiring.outbox_rows
        for n in range(8):  # eight workers claim it in turn and die (Lambda timeouts, say)
            row = rows.claim(callback_row(rt, "job.accepted"), f"dies-{n}", rt.clock.now_ms(), OUTBOX_LEASE_MS)
            assert row.attempts == n + 1
            rt.clock.advance(OUTBOX_LEASE_MS)
        rt.settle()
        dead = callback_row(rt, "job.accepted")
        # the ninth claim found the budget spent and sent nothing: it is not counted as an attempt
        assert (dead.status, dead.attempts) == ("dead", 8)
        assert dead.last_error == ("attempt budget exhausted after 8 attempts: the last attempt never reported back")
        assert "job.accepted" not in receiver.event_types()
        assert get_job(rt, SLOT)[1]["status"] == "succeeded"


def test_a_record_that_cannot_start_in_time_goes_back_to_its_queue_unclaimed(make_runtime, downstream, remaining):
    with Receiver() as receiver:
        rt = jobs_runtime(make_runtime)
        post_job(rt, task(callback_url=receiver.url))
        remaining(SETTLE_MARGIN_MS + MIN_ATTEMPT_MS - 1)
        before = rt.pumps["deliver"].stats.failed
        assert rt.pumps["deliver"].poll() == 1  # the job.accepted callback's message
        assert rt.pumps["deliver"].stats.failed == before + 1  # a batch item failure: back to the queue
        row = callback_row(rt, "job.accepted")
        assert (row.status, row.attempts, row.lease_owner) == ("pending", 0, None)
        assert receiver.received == []
        remaining(60_000)
        rt.settle()
        assert (callback_row(rt, "job.accepted").status, callback_row(rt, "job.accepted").attempts) == ("done", 1)
        assert receiver.event_types().count("job.accepted") == 1


class FlakySsm:
    """A secret reader that fails (like a throttled SSM) ``failures`` times, then answers."""

    def __init__(self, values: dict[str, str], failures: int) -> None:
        self.values, self.failures, self.calls = values, failures, []

    def __call__(self, name: str) -> str | None:
        self.calls.append(name)
        if len(self.calls) <= self.failures:
            raise RuntimeError("ThrottlingException: Rate exceeded")
        return self.values.get(name)


def ssm_runtime(make_runtime, ssm):
    """A runtime whose callback signing secret is an SSM parameter read through ``ssm``."""
    from conftest import JOBS_TOKEN, TRIGGER_TOKEN

    from pixivflow.adapters.secret_store import SecretStore

    store = SecretStore(ssm, env={"CALLBACK_SIGNING_SECRET_PARAMETER": "/pixivflow/callback-signing-secret",
                                  "TRIGGER_TOKEN": TRIGGER_TOKEN, "JOBS_TOKEN": JOBS_TOKEN}, sleep=lambda s: None)
    return jobs_runtime(make_runtime, tokens={"trigger": TRIGGER_TOKEN, "jobs": JOBS_TOKEN}, overrides={"secrets": store})


def test_a_transient_secret_store_error_is_retried_never_dead_lettered_never_cached(make_runtime, downstream, logs):
    ssm = FlakySsm({"/pixivflow/callback-signing-secret": CALLBACK_SECRET}, failures=3 * 3)  # three reads of 3 tries
    with Receiver() as receiver:
        rt = ssm_runtime(make_runtime, ssm)
        post_job(rt, task(callback_url=receiver.url))
        rt.pump()
        for kind in ("job.accepted", "job.started", "job.succeeded"):
            row = callback_row(rt, kind)
            assert (row.status, row.attempts) == ("pending", 0)  # released unsent, its attempt given back
        assert receiver.received == []
        assert len(logs.events("callback.secret_unavailable")) == 3
        rt.settle()
        assert all(callback_row(rt, k).status == "done" and callback_row(rt, k).attempts == 1
                   for k in ("job.accepted", "job.started", "job.succeeded"))
        assert sorted(receiver.event_types()) == ["job.accepted", "job.started", "job.succeeded"]
        assert logs.events("callback.dead") == []
        assert len(ssm.calls) == 3 * 3 + 1  # the outage was never cached; the value read once is


def test_a_callback_secret_that_does_not_exist_dead_letters_once(make_runtime, downstream):
    ssm = FlakySsm({}, failures=0)
    with Receiver() as receiver:
        rt = ssm_runtime(make_runtime, ssm)
        post_job(rt, task(callback_url=receiver.url))
        rt.settle()
        row = callback_row(rt, "job.accepted")
        assert (row.status, row.attempts) == ("dead", 1)
        assert row.last_error == "configuration_error: the callback signing secret does not exist"
        assert receiver.received == []
