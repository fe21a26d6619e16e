"""The routes world of the concurrent simulation (issues 20, 23): the same four schedules and the
same Lambda world as ``world.World``, but the targets fan out to PixivFlow's published routes.

* ``bot1-submit`` (``httpMultipart``, TelePost's submission API with previews, ``readinessUrl``,
  ``notificationUrl`` and ``scheduleOutcomeUrl``) — ``route_fakes.TelePostReceiver``, which
  validates the multipart as TelePost does and keeps one submission per idempotency key;
* ``qq-main`` (``type: webhook``, the messaging gateway: bearer token, signed body) —
  ``FakeGateway`` below, strict on the document and the signature, one record per key;
* ``bot1-review`` (``type: telegram``) — ``route_fakes.FakeTelegram`` (the Bot API) and
  ``route_fakes.FakeControlPlane`` (the review lookup and record);
* ``review`` (our own ``kind: webhook``) — the demo downstream, on loopback as in the demo world.

Every fake but the demo downstream is reached IN PROCESS: the route channel's httpx transport is a
``MockTransport`` that hands the request to the fake's ``handle`` (no socket, no thread). Every
route request is a STEP of the baton, exactly like an AWS call: the scheduler may switch to another
invocation or kill this one before the request leaves or after the fake has acted on it — so deaths
fall between two Bot API calls, between the last post and the review record, between a submission
and its outcome save. While the world is faulty the transport also answers on a seeded script:
unreachable (nothing sent), 503, 429 (Telegram's ``parameters.retry_after``, TelePost's
``Retry-After``), a lost answer (the fake acted, the client sees a cut connection) and a slow answer
(the fake acted, the virtual clock moves 2-40 s before the answer arrives).

``oracle_routes.check_routes`` holds the fakes' records to the routes' promises.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import random
from collections import Counter
from typing import Any

import httpx
from baton import _local
from oracle_routes import check_routes, delivered_records
from world import World, WorldRates, sim_config

from pixivflow.local.route_fakes import FakeControlPlane, FakeTelegram, Request, TelePostReceiver, _Reject

# Ports name the fakes inside the MockTransport; nothing listens on them and nothing is sent there.
TELEPOST, GATEWAY, TELEGRAM, CONTROL = 7101, 7102, 7103, 7104
LOOPBACK = "http://127.0.0.1"
TELEPOST_TOKEN = "sim-telepost-submit-token"
GATEWAY_TOKEN = "sim-gateway-token"
GATEWAY_SIGNING = "sim-gateway-signing-secret"
BOT_TOKEN = "7012345678:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"
CONTROL_TOKEN = "sim-control-plane-secret"
# What the routes' ${VAR}s resolve to (the published configs' variable names; issue 23).
ROUTE_ENV = {
    "TELEPOST_API_BASE_URL": f"{LOOPBACK}:{TELEPOST}",
    "TELEPOST_BOT1_SUBMIT_TOKEN": TELEPOST_TOKEN,
    "QQ_GATEWAY_TOKEN": GATEWAY_TOKEN,
    "QQ_GATEWAY_SIGNING_SECRET": GATEWAY_SIGNING,
    "TELEGRAM_API_BASE": f"{LOOPBACK}:{TELEGRAM}",
    "TELEGRAM_BOT1_TOKEN": BOT_TOKEN,
    "CONTROL_PLANE_URL": f"{LOOPBACK}:{CONTROL}",
    "CONTROL_PLANE_CALLBACK_SECRET": CONTROL_TOKEN,
}
TELEPOST_API = "${TELEPOST_API_BASE_URL}/api/bot1/v1"

# The targets' routes: fan-out (two routes on one target), each route type as a primary, a novel
# to the Telegram route (documents) and the contested single-work ranking on the Telegram route.
TARGET_ROUTES: dict[str, list[str]] = {
    "cats": ["bot1-submit", "bot1-review"],
    "landscape": ["qq-main", "review"],
    "ranking-daily": ["bot1-review"],
    "dogs": ["bot1-submit", "qq-main"],
    "sky-topic": ["bot1-submit"],
    "fantasy-novels": ["bot1-review", "bot1-submit"],
    "flaky": ["qq-main"],
}

ROUTES: dict[str, dict[str, Any]] = {
    "bot1-submit": {  # example-delivery.json's route with the three notice URLs (note §3)
        "type": "httpMultipart",
        "url": f"{TELEPOST_API}/submissions",
        "readinessUrl": f"{TELEPOST_API}/health",
        "notificationUrl": f"{TELEPOST_API}/notifications",
        "scheduleOutcomeUrl": f"{TELEPOST_API}/schedule/outcomes",
        "refetchOutcomeUrl": f"{TELEPOST_API}/refetch/outcomes",
        "headers": {"Authorization": "Bearer ${TELEPOST_BOT1_SUBMIT_TOKEN}"},
        "fileField": "files",
        "previewFileField": "previews",
        "fields": {"title": "{{title}}", "tags": "{{workTags}},{{topicTag}}", "link": "{{link}}", "spoiler": "{{spoiler}}",
                   "idempotency_key": "{{idempotencyKey}}", "target_id": "{{targetId}}", "work_type": "{{type}}",
                   "pixiv_id": "{{pixivId}}", "scheduled_at": "{{occurrenceAt}}"},
        "maxAttempts": 3,  # legacy in PixivFlow: the outbox's own budget applies (issue 23)
        "retryDelayMs": 3000,
    },
    "qq-main": {
        "type": "webhook",
        "url": f"{LOOPBACK}:{GATEWAY}/pixivflow/deliver",
        "token": "${QQ_GATEWAY_TOKEN}",
        "signingSecret": "${QQ_GATEWAY_SIGNING_SECRET}",
        "mediaTransport": "reference",
        "timeoutMs": 30000,
    },
    "bot1-review": {  # pixivflow.production.json's review bot
        "type": "telegram",
        "botId": "bot1",
        "botToken": "${TELEGRAM_BOT1_TOKEN}",
        "chatId": "-1004318193445",
        "publishChatId": "@xgdShare",
        "controlPlaneUrl": "${CONTROL_PLANE_URL}/control",
        "controlPlaneToken": "${CONTROL_PLANE_CALLBACK_SECRET}",
        "caption": "{{title}}\n🔗 {{link}}",
        "maxAttempts": 3,
        "retryDelayMs": 3000,
    },
}


def routes_config(cfg: dict[str, Any]) -> None:
    """``write_config`` mutator: the simulation's schedules, the targets fanned out to the routes."""
    sim_config(cfg)  # the schedules and the consumers' callback host
    for target in cfg["targets"]:
        routes = TARGET_ROUTES[target["id"]]
        target["delivery"] = {"targets": list(routes)} if len(routes) > 1 else {"target": routes[0]}
    cfg["delivery"]["targets"].update(json.loads(json.dumps(ROUTES)))
    # The outbox's own budget (12 attempts) on a short backoff, so a seed converges in hours.
    cfg["delivery"].update({"outboxRetryBaseMs": 30_000, "outboxRetryMaxMs": 600_000})


class FakeGateway:
    """PixivFlow's messaging gateway as the ``type: webhook`` route meets it (delivery note §2.5):
    bearer token, ``X-Webhook-Signature`` over ``<timestamp>.<body>``, schema version 1, one message
    per ``idempotencyKey`` (a repeat is acknowledged with the first message's id)."""

    def __init__(self, token: str, secret: str) -> None:
        self.token, self.secret = token, secret
        self.records: dict[str, dict[str, Any]] = {}
        self.rejections: list[str] = []

    def handle(self, req: Request) -> tuple[int, Any]:
        status, body = self._handle(req)
        if status >= 400:
            self.rejections.append(str(body.get("error")))
        return status, body

    def _handle(self, req: Request) -> tuple[int, Any]:
        if req.headers.get("authorization") != f"Bearer {self.token}":
            return 401, {"status": "rejected", "error": "unauthorized"}
        stamp = req.headers.get("x-webhook-timestamp", "")
        mac = hmac.new(self.secret.encode(), f"{stamp}.".encode() + req.raw, hashlib.sha256).hexdigest()
        if req.headers.get("x-webhook-signature") != f"sha256={mac}":
            return 401, {"status": "rejected", "error": "bad signature"}
        try:
            doc = json.loads(req.raw)
        except ValueError:
            return 400, {"status": "rejected", "error": "invalid json"}
        key = doc.get("idempotencyKey") if isinstance(doc, dict) else None
        if doc.get("schemaVersion") != 1 or not key or not doc.get("work", {}).get("id") or not doc.get("message", {}).get("media"):
            return 400, {"status": "rejected", "error": "invalid message document"}
        first = self.records.setdefault(key, {"id": f"msg-{len(self.records) + 1}", "work_id": str(doc["work"]["id"]),
                                              "doc": doc})
        return 200, {"status": "accepted", "id": first["id"]}


class RouteFakes:
    """The fakes of one seed, fresh each seed (their sockets are never listened on)."""

    def __init__(self) -> None:
        self.telepost = TelePostReceiver(token=TELEPOST_TOKEN)
        self.gateway = FakeGateway(GATEWAY_TOKEN, GATEWAY_SIGNING)
        self.telegram = FakeTelegram()
        self.control = FakeControlPlane(token=CONTROL_TOKEN)
        self.by_port: dict[int, Any] = {TELEPOST: self.telepost, GATEWAY: self.gateway, TELEGRAM: self.telegram,
                                        CONTROL: self.control}
        # Route requests whose answer was lost after the fake acted on it (a cut connection, or the
        # invocation's death after the call), by what a receiver dedupes on: the oracle allows one
        # repeat per ambiguous send and no other.
        self.ambiguous: Counter[str] = Counter()
        self.counts: Counter[str] = Counter()

    def close(self) -> None:
        for fake in (self.telepost, self.telegram, self.control):
            fake._server.server_close()  # noqa: SLF001 - bound in __init__, never served


def notice_key(path: str, body: Any) -> str:
    """What a notice receiver dedupes on: the text notice's ``idempotency_key``, else the outcome's slot."""
    if isinstance(body, dict) and body.get("idempotency_key"):
        return str(body["idempotency_key"])
    slot = body.get("slot_id") or body.get("request_id") if isinstance(body, dict) else None
    return f"{path.rsplit('/v1/', 1)[-1]}|{slot}"


def _dedupe_key(fake: Any, req: Request) -> str | None:
    """The receiver-side key of a request that changes something at the fake (None: a read)."""
    if req.method == "GET":
        return None
    if isinstance(fake, TelePostReceiver):
        if req.path.endswith("/submissions"):
            return None  # TelePost keeps one submission per key by itself; the oracle counts keys
        try:
            return notice_key(req.path, json.loads(req.raw))
        except ValueError:
            return None
    return None


class RouteTransport(httpx.BaseTransport):
    """The route channel's transport: each request a baton step; the in-process fakes answer, the
    demo downstream is reached on loopback through ``real``."""

    def __init__(self, world: "RoutesWorld", real: httpx.BaseTransport) -> None:
        self.world = world
        self.real = real

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        inv = getattr(_local, "invocation", None)
        fake = self.world.fakes.by_port.get(request.url.port or 0)
        label = f"http.{type(fake).__name__ if fake else 'downstream'}.{request.url.path.rsplit('/', 1)[-1]}"
        if inv is not None:
            inv.scheduler.before(inv, label)
        if fake is None:
            response = self.real.handle_request(request)
            if inv is not None:
                inv.scheduler.after(inv, label)
            return response
        raw = request.read()
        req = Request(request.method, request.url.raw_path.decode("ascii"), {k.lower(): v for k, v in request.headers.items()}, raw)
        fault = self.world.route_fault(fake)
        if fault == "unreachable":
            raise httpx.ConnectError("connection refused (simulated)", request=request)
        if fault == "503":
            return _answer(fake, 503, "Service Unavailable", request)
        if fault == "429":
            return _answer(fake, 429, "Too Many Requests", request, retry_after=self.world.rng["routes"].randint(1, 60))
        try:
            status, body = fake.handle(req)
        except _Reject as rejected:
            status, body = rejected.status, rejected.body
        key = _dedupe_key(fake, req)
        if fault == "lost":
            if key:
                self.world.fakes.ambiguous[key] += 1
            raise httpx.ReadError("connection reset by peer after the request was sent (simulated)", request=request)
        if fault == "slow":
            self.world.clock.advance(self.world.rng["routes"].randint(2, 40) * 1000)
        if inv is not None:
            if key:
                self.world.fakes.ambiguous[key] += 1  # a death right after the call leaves it so
            inv.scheduler.after(inv, label)
            if key:
                self.world.fakes.ambiguous[key] -= 1
        data = body if isinstance(body, bytes) else json.dumps(body, ensure_ascii=False).encode()
        return httpx.Response(status, content=data, headers={"Content-Type": "application/json"}, request=request)


def _answer(fake: Any, status: int, text: str, request: httpx.Request, *, retry_after: int | None = None) -> httpx.Response:
    """A refusal before the fake acted, in the shape that service uses."""
    if isinstance(fake, FakeTelegram):
        body: dict[str, Any] = {"ok": False, "error_code": status, "description": text if retry_after is None
                                else f"{text}: retry after {retry_after}"}
        if retry_after is not None:
            body["parameters"] = {"retry_after": retry_after}
        headers = {}
    else:
        body = {"ok": False, "error": text}
        headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
    return httpx.Response(status, json=body, headers=headers, request=request)


class RoutesWorld(World):
    """``World`` whose routes are PixivFlow's (module docstring); faults stop with the world's."""

    FAULTS = (("unreachable", 0.02), ("503", 0.04), ("429", 0.04), ("lost", 0.04), ("slow", 0.04))

    def __init__(self, rt: Any, downstream: Any, seed: int, rates: WorldRates | None = None) -> None:
        super().__init__(rt, downstream, seed, rates)
        self.rng["routes"] = random.Random(f"{seed}:routes")
        self.fakes = RouteFakes()

    def collaborators(self, transport: Any) -> dict[str, Any]:
        return {"transport": RouteTransport(self, transport)}

    def uninstall(self) -> None:
        super().uninstall()
        self.fakes.close()

    def delivered(self) -> Any:
        return delivered_records(self)

    def check(self) -> list[str]:
        return check_routes(self)

    def route_fault(self, fake: Any) -> str | None:
        if not self.faulty:
            return None
        roll = self.rng["routes"].random()
        for name, p in self.FAULTS:
            if roll < p:
                self.counts[f"route.{name}"] += 1
                return name
            roll -= p
        return None

