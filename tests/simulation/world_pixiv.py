"""The Pixiv world of the concurrent simulation (issues 20, 24): the same schedules and Lambda world
as ``world.World``, but the work source is the real Pixiv App API client against
``pixivflow.local.fake_pixiv.FakePixiv`` (loopback, one per worker process, reset per seed).

* The account ``main`` has ``maxConcurrency`` permits (2) in the ledger, request pacing and an
  OAuth refresh token held in SSM (``SsmTwin``: an in-memory SSM, each call a baton step like every
  AWS call; PutParameter is throttled now and then while the world is faulty). The fake ROTATES the
  refresh token at every grant, and the world expires every access token now and then, so refreshes
  (and their rotations) race across invocations.
* Every Pixiv request is a baton step twice: before it leaves, and while it is ON THE WIRE (the
  invocation is counted in flight and another invocation may run meanwhile), so the per-account
  bound is measured at the fake's door across interleaved invocations — a dead invocation's request
  ends with it. While the world is faulty the door answers on a seeded script: OAuth blips
  (Cloudflare's 403 HTML page, 503, Pixiv's 400 1508 time/hash answer without ``error``, a
  timeout), API rate limits (429 with ``Retry-After``, 403 ``Rate Limit``) and 5xx, image 5xx and
  cut connections.
* ``Pacing`` sleeps pass virtual time.

``oracle_routes.check_pixiv`` holds the run to issue 24's promises.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import httpx
from baton import Invocation, SteppedClient, _local, stepped_factory
from world import World, WorldRates, sim_config

ACCOUNT = "main"
MAX_CONCURRENCY = 1  # pixivflow.production.json's account setting: the tightest bound, the most contention
SECRETS_PATH = "/pixivflow/sim"
TOKEN_VAR = "PIXIV_SIM_REFRESH_TOKEN"
TOKEN_PARAMETER = f"{SECRETS_PATH}/{TOKEN_VAR}"
PIXIV_ENV = {"PIXIV_SECRETS_PATH": SECRETS_PATH}

# The schedules' target ids, on the fake's fixtures: searches, the day ranking (one work, contested
# by two slots at the same instant), a novel search and a target whose one work has lost its originals.
PIXIV_TARGETS = [
    {"id": "cats", "type": "illustration", "mode": "search", "tag": "cats", "limit": 1},
    {"id": "landscape", "type": "illustration", "mode": "search", "tag": "landscape", "limit": 1, "sort": "popular_desc"},
    {"id": "ranking-daily", "type": "illustration", "mode": "ranking", "rankingMode": "day", "rankingDate": "YESTERDAY",
     "limit": 1},
    {"id": "dogs", "type": "illustration", "mode": "search", "tag": "sea", "limit": 1},
    {"id": "sky-topic", "type": "illustration", "mode": "search", "tag": "cute", "limit": 1},
    {"id": "fantasy-novels", "type": "novel", "mode": "search", "tag": "fantasy", "limit": 1},
    {"id": "flaky", "type": "illustration", "mode": "search", "tag": "sketch", "limit": 1},
]


def pixiv_config(base_url: str) -> Any:
    """``write_config`` mutator: the Pixiv source on the fake at ``base_url``, the sim's schedules."""

    def mutate(cfg: dict[str, Any]) -> None:
        cfg["source"] = {"kind": "pixiv", "baseUrls": {"oauth": base_url, "api": base_url, "image": base_url}}
        cfg["pixiv"] = {"refreshToken": "${%s}" % TOKEN_VAR, "accountId": ACCOUNT}
        cfg["network"] = {"requestPacingMs": 400, "timeoutMs": 5000, "retries": 1}
        cfg["download"] = {"requestDelay": 0}
        cfg["schedulerRuntime"]["resourceGovernance"] = {"pixivAccounts": {ACCOUNT: {"maxConcurrency": MAX_CONCURRENCY}}}
        cfg["targets"] = [{**t, "storageMode": "cache", "delivery": {"target": "review"}} for t in PIXIV_TARGETS]
        sim_config(cfg)  # the schedules and the consumers' callback host

    return mutate


class SsmTwin:
    """SSM's parameters as the Pixiv source uses them (GetParameter, PutParameter with Overwrite),
    with SSM's error codes. ``throttle()`` decides whether a PutParameter is refused."""

    def __init__(self, throttle: Any) -> None:
        self.values: dict[str, tuple[str, int]] = {}
        self.writes: list[str] = []
        self._throttle = throttle

    @staticmethod
    def _error(code: str, message: str, operation: str) -> Exception:
        from botocore.exceptions import ClientError

        return ClientError({"Error": {"Code": code, "Message": message}}, operation)

    def get_parameter(self, *, Name: str, WithDecryption: bool = False) -> dict[str, Any]:  # noqa: N803 - boto3's names
        if Name not in self.values:
            raise self._error("ParameterNotFound", f"Parameter {Name} not found.", "GetParameter")
        value, version = self.values[Name]
        return {"Parameter": {"Name": Name, "Type": "SecureString", "Value": value, "Version": version}}

    def put_parameter(self, *, Name: str, Value: str, Type: str = "String", Overwrite: bool = False,  # noqa: N803
                      **_: Any) -> dict[str, Any]:
        if self._throttle():
            raise self._error("ThrottlingException", "Rate exceeded", "PutParameter")
        if Name in self.values and not Overwrite:
            raise self._error("ParameterAlreadyExists", "The parameter already exists.", "PutParameter")
        version = self.values.get(Name, ("", 0))[1] + 1
        self.values[Name] = (Value, version)
        self.writes.append(Value)
        return {"Version": version, "Tier": "Standard"}


class AccountDoor:
    """The fake Pixiv's door as the account sees it: which invocations have a request in flight."""

    def __init__(self) -> None:
        self.in_flight: list[Invocation | None] = []
        self.peak = 0
        self.over: list[str] = []  # "t=... 3 requests in flight: ..." each time the bound was passed
        self.requests: Counter[str] = Counter()

    def enter(self, inv: Invocation | None, now: int, what: str) -> None:
        self.in_flight.append(inv)
        # A dead one's request ended with it; so did one past Lambda's timeout (the baton kills it at
        # its next step, but Lambda would have ended it at the timeout).
        live = [i for i in self.in_flight
                if i is None or (i.state == "runnable" and now < (getattr(i, "deadline", None) or now + 1))]
        self.peak = max(self.peak, len(live))
        if len(live) > MAX_CONCURRENCY:
            self.over.append(f"[P1] t={now} {len(live)} Pixiv requests in flight ({what}): "
                             + ", ".join(i.name if i else "harness" for i in live))

    def leave(self, inv: Invocation | None) -> None:
        self.in_flight.remove(inv)


def _host(path: str) -> str:
    if path.startswith("/auth/token"):
        return "oauth"
    return "api" if path.startswith(("/v1", "/v2", "/webview")) else "image"


RATE_LIMIT = {"error": {"user_message": "", "message": "Rate Limit", "reason": "", "user_message_details": {}}}
CLOUDFLARE = "<!DOCTYPE html><html><head><title>Just a moment...</title></head><body>cf-chl</body></html>"
TIME_HASH = {"has_error": True, "errors": {"system": {"message": "Invalid request (time/hash)", "code": 1508}}}


class PixivTransport(httpx.BaseTransport):
    """The Pixiv client's transport: steps, the door's count, the seeded faults, then the fake."""

    def __init__(self, world: "PixivWorld", real: httpx.BaseTransport) -> None:
        self.world = world
        self.real = real

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        world = self.world
        inv = getattr(_local, "invocation", None)
        host = _host(request.url.path)
        label = f"http.pixiv.{host}"
        if inv is not None:
            inv.scheduler.before(inv, label)
        world.door.enter(inv, world.clock.now_ms(), f"{request.method} {request.url.path}")
        try:
            if inv is not None:
                inv.scheduler.before(inv, label + ".in-flight")  # on the wire: others run meanwhile
            world.door.requests[host] += 1
            return self._answer(request, host)
        finally:
            world.door.leave(inv)

    def _answer(self, request: httpx.Request, host: str) -> httpx.Response:
        fault = self.world.pixiv_fault(host)
        rng = self.world.rng["pixiv"]
        if fault is None:
            response = self.real.handle_request(request)
            response.read()
            return response
        if fault == "timeout":
            raise httpx.ReadTimeout("timed out (simulated)", request=request)
        if fault == "cut":
            self.real.handle_request(request).read()  # served, the answer lost on the way
            raise httpx.RemoteProtocolError("peer closed connection without sending complete message body (simulated)",
                                            request=request)
        if fault == "cloudflare":
            return httpx.Response(403, text=CLOUDFLARE, headers={"Content-Type": "text/html"}, request=request)
        if fault == "time-hash":
            return httpx.Response(400, json=TIME_HASH, request=request)
        if fault == "429":
            # Pixiv's rate-limit cooldowns reach 15 minutes (issue 24): past the sweep's 5-minute
            # re-dispatch age, so a cell's recorded due time is what holds the sweep back.
            return httpx.Response(429, json=RATE_LIMIT, headers={"Retry-After": str(rng.choice((30, 120, 600, 900)))},
                                  request=request)
        if fault == "403-rate":
            return httpx.Response(403, json=RATE_LIMIT, request=request)
        return httpx.Response(503, text="Service Unavailable", request=request)


class Containers:
    """The engine's work source, one Pixiv source per Lambda CONTAINER: a container runs one
    invocation at a time and is reused warm by a later one (its access token, its permits held,
    its locks are its own); a container whose invocation died is gone. Concurrent invocations are
    different containers, as on Lambda (one source shared by interleaved invocations would block
    one on a lock another holds across a step)."""

    def __init__(self, build: Any) -> None:
        self._build = build
        self._by_invocation: dict[Any, Any] = {}
        self._idle: list[Any] = []
        self.built = 0

    def _current(self) -> Any:
        inv = getattr(_local, "invocation", None)
        source = self._by_invocation.get(inv)
        if source is None:
            for other, used in list(self._by_invocation.items()):
                if other is not None and other.state != "runnable":
                    del self._by_invocation[other]
                    if other.state == "done":
                        self._idle.append(used)  # warm for the next invocation
            source = self._idle.pop() if self._idle else self._new()
            self._by_invocation[inv] = source
        return source

    def fresh(self) -> Any:
        """The harness's container, outside any invocation: the one the invocations run outside the
        baton already use (a warm one taken from the idle ones), else a new one."""
        if None not in self._by_invocation:
            self._by_invocation[None] = self._new()
        return self._by_invocation[None]

    def _new(self) -> Any:
        self.built += 1
        return self._build()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._current(), name)


class PixivWorld(World):
    """``World`` on the Pixiv source (module docstring). ``fake`` is the worker's FakePixiv."""

    FAULTS = {
        "oauth": (("cloudflare", 0.08), ("503", 0.04), ("time-hash", 0.04), ("timeout", 0.03)),
        "api": (("429", 0.02), ("403-rate", 0.02), ("503", 0.03)),
        "image": (("503", 0.02), ("cut", 0.02)),
    }
    EXPIRE_TOKENS = 0.15  # per sweep tick: every access token stops working (the next request refreshes)

    fake: Any = None  # the worker's FakePixiv (sim.py sets it)

    def __init__(self, rt: Any, downstream: Any, seed: int, rates: WorldRates | None = None) -> None:
        super().__init__(rt, downstream, seed, rates)
        for name in ("pixiv", "ssm", "uniform"):
            self.rng[name] = random.Random(f"{seed}:{name}")
        # The world's baton kills an invocation at its function's timeout (baton.Baton ``timeouts``, from
        # template.yaml). The account's permit lease (90 s, renewed by the 30 s heartbeat) relies on
        # exactly that: no holder outlives its lease while it still runs; without it a frozen container
        # (a pause of minutes) would go on sending Pixiv requests after its permit passed to another.
        self.ssm = SsmTwin(lambda: self.faulty and self.rng["ssm"].random() < 0.1)
        self.door = AccountDoor()
        self.deferred: dict[tuple[str, str], int] = {}
        self.early: list[str] = []
        self.initial_token = ""

    def install(self) -> "PixivWorld":
        super().install()
        self._watch_due_times(self.rt.wiring.ledger)
        return self

    def collaborators(self, transport: Any) -> dict[str, Any]:
        from pixivflow import aws
        from pixivflow.adapters.pixiv import DynamoPixivAccounts, build_source
        from pixivflow.adapters.pixiv.secrets import SecretResolver

        from world import _config

        fake = self.fake
        _reset(fake)
        self.initial_token = next(iter(fake._refresh_tokens))  # noqa: SLF001
        self.ssm.values[TOKEN_PARAMETER] = (self.initial_token, 1)
        cloud, ssm = self.rt.cloud, SteppedClient(self.ssm, "ssm")
        inner = stepped_factory(cloud.client)
        aws.set_factory(lambda service, **kw: ssm if service == "ssm" else inner(service, **kw))  # uninstall restores
        config = _config(self.rt.config_path)[0]
        clock, pixiv = self.clock, PixivTransport(self, transport)  # the worker's: no CA load per seed

        def container() -> Any:
            return build_source(config, now_ms=clock.now_ms, uniform=self.rng["uniform"].random,
                                store=DynamoPixivAccounts(aws.client("dynamodb"), self.rt.env["LEDGER_TABLE"]),
                                sleep=lambda s: clock.advance(int(s * 1000)),
                                resolver=SecretResolver(ssm=lambda: aws.client("ssm"), sleep=lambda s: clock.advance(int(s * 1000))),
                                transport=pixiv)

        self.containers = Containers(container)
        return {"source": self.containers}

    def _watch_due_times(self, ledger: Any) -> None:
        """Note each deferral's due time; a sweep re-dispatch before it is a violation ([P3])."""
        defer, mark = ledger.defer_cell, ledger.mark_dispatched

        def defer_cell(slot_id: str, target_id: str, owner: str, now_ms: int, due_at: int, **kw: Any) -> bool:
            done = defer(slot_id, target_id, owner, now_ms, due_at, **kw)
            if done:
                self.deferred[(slot_id, target_id)] = int(due_at)
                self.counts["pixiv.deferred"] += 1
            return done

        def mark_dispatched(slot_id: str, target_id: str, previous: int | None, now_ms: int, **kw: Any) -> bool:
            done = mark(slot_id, target_id, previous, now_ms, **kw)
            due = self.deferred.get((slot_id, target_id))
            if done and due is not None and now_ms < due:
                self.early.append(f"[P3] cell {slot_id}/{target_id} re-dispatched by the sweep at t={now_ms}, "
                                  f"{(due - now_ms) / 1000:.0f} s before the due time its deferral recorded")
            return done

        ledger.defer_cell, ledger.mark_dispatched = defer_cell, mark_dispatched

    def _sweep(self) -> None:
        super()._sweep()
        if self.faulty and self.rng["pixiv"].random() < self.EXPIRE_TOKENS:
            self.fake.expire_access_tokens()
            self.counts["pixiv.tokens_expired"] += 1

    def pixiv_fault(self, host: str) -> str | None:
        if not self.faulty:
            return None
        roll = self.rng["pixiv"].random()
        for name, p in self.FAULTS[host]:
            if roll < p:
                self.counts[f"pixiv.{host}.{name}"] += 1
                return name
            roll -= p
        return None

    def check(self) -> list[str]:
        from oracle_routes import check_pixiv

        return check_pixiv(self)


def _reset(fake: Any) -> None:
    """A fresh account at the worker's fake: the first refresh token only, no access token, no log."""
    from pixivflow.local.fake_pixiv import DEFAULT_REFRESH_TOKEN

    with fake._lock:  # noqa: SLF001 - the fake's own state, between two seeds
        fake._refresh_tokens = {DEFAULT_REFRESH_TOKEN}  # noqa: SLF001
        fake._access_tokens.clear()  # noqa: SLF001
        fake._faults.clear()  # noqa: SLF001
        fake._log.clear()  # noqa: SLF001
        fake.issued_refresh_tokens.clear()
        fake.issued_access_tokens.clear()
    fake.rotate = True
