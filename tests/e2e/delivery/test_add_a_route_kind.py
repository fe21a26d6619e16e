"""A route kind declared from this file alone (docs/how-to/add-a-route-kind.md): its config model,
its sender and the parser of its answers, registered with ``pixivflow.route_kinds``. Nothing else
of the product changes, yet the config loads and ``config check`` judges it, a scheduled fire
delivers through it to a loopback receiver, its ACK settles the cell, and a refusal dead-letters
the row and fails the cell."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import pytest
import yaml
from pydantic import Field

from pixivflow import route_kinds
from pixivflow.cli import main
from pixivflow.config import RouteModel
from pixivflow.domain.ack import AckKind, DeliveryAck
from pixivflow.domain.route_io import DeliveryRequest, DeliveryResponse

FIRE = "2026-11-30T23:00:00Z"  # 08:00 Asia/Tokyo on 2026-12-01
SLOT = "morning-tokyo@2026-12-01T0800"
DEMO = Path(__file__).resolve().parents[3] / "events" / "demo"


class PigeonRoute(RouteModel):
    """A carrier pigeon: one JSON note to its loft, with the bird's ring."""

    type: Literal["carrierPigeon"]
    loft: str
    ring: str = Field(pattern=r"^R-\d+$")


class PigeonSender:
    def __init__(self, tools: route_kinds.SenderTools) -> None:
        self.tools = tools

    def deliver(self, request: DeliveryRequest, route: PigeonRoute) -> DeliveryResponse:
        note = {"ring": route.ring, "work_id": request.payload["work"]["id"], "key": request.idempotency_key}
        return self.tools.http.exchange("POST", route.loft, headers={"Content-Type": "application/json",
                                                                     "Idempotency-Key": request.idempotency_key},
                                        content=json.dumps(note).encode("utf-8"), timeout_ms=5_000, scrub=str)


def pigeon_ack(route: PigeonRoute, response: DeliveryResponse) -> DeliveryAck:
    body: Any = response.body
    data = body.get("data") if isinstance(body, dict) else None
    if 200 <= response.status < 300 and isinstance(data, dict) and data.get("review_id"):
        return DeliveryAck(AckKind.ACCEPTED, response.status, remote_id=f"pigeon-{data['review_id']}")
    kind = AckKind.RETRYABLE_FAILURE if response.status >= 500 else AckKind.PERMANENT_FAILURE
    return DeliveryAck(kind, response.status, error=f"the loft refused the pigeon (HTTP {response.status})")


PIGEON = route_kinds.RouteKind(name="carrierPigeon", key="type", value="carrierPigeon", model=PigeonRoute,
                               parse_ack=pigeon_ack, sender=PigeonSender)


@pytest.fixture
def pigeon():
    route_kinds.register(PIGEON)
    yield PIGEON
    route_kinds.unregister(PIGEON)


def _pigeon_route(url: str, **extra: Any):
    def mutate(cfg: dict) -> None:
        cfg["schedules"][0]["targetIds"] = ["cats"]
        cfg["delivery"]["targets"]["review"] = {"type": "carrierPigeon", "loft": url, "ring": "R-7", **extra}

    return mutate


def _check(tmp_path: Path, capsys, route: dict) -> tuple[int, dict]:
    cfg = yaml.safe_load((DEMO / "config.yaml").read_text())
    cfg["source"]["path"] = str(DEMO / "catalog.json")
    cfg["delivery"]["targets"]["review"] = route
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    code = main(["config", "check", "--config", str(path), "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_config_check_judges_a_registered_kind_by_its_own_model(pigeon, tmp_path, capsys):
    code, summary = _check(tmp_path, capsys, {"type": "carrierPigeon", "loft": "http://127.0.0.1:9/loft", "ring": "R-7"})
    assert code == 0 and summary["ok"] is True
    code, summary = _check(tmp_path, capsys, {"type": "carrierPigeon", "loft": "http://127.0.0.1:9/loft", "ring": "blue"})
    assert code == 1 and summary["errors"] == ["delivery.targets.review.ring: String should match pattern '^R-\\d+$'"]


def test_an_unregistered_kind_is_refused_naming_the_kinds_there_are(tmp_path, capsys):
    code, summary = _check(tmp_path, capsys, {"type": "carrierPigeon", "loft": "http://127.0.0.1:9/loft", "ring": "R-7"})
    assert code == 1
    assert summary["errors"] == ["delivery.targets.review.type: unsupported route type 'carrierPigeon'; "
                                 "expected one of httpMultipart, webhook, telegram"]


def test_a_fire_delivers_through_the_new_kind_and_its_ack_settles_the_cell(pigeon, make_runtime, downstream):
    rt = make_runtime(FIRE, mutate=_pigeon_route(downstream.url))
    assert rt.fire("morning-tokyo", iso=FIRE)["disposition"] == "accepted"
    rt.settle()
    (request,) = downstream.requests
    state = rt.wiring.ledger.load(SLOT)
    (intent,) = state.intents_for("cats")
    assert request.body == {"ring": "R-7", "work_id": intent.work_id, "key": intent.idempotency_key}
    assert request.headers["idempotency-key"] == intent.idempotency_key
    assert (intent.status, intent.outbox_status, intent.remote_id) == ("delivered", "done", "pigeon-r-1")
    assert state.cells["cats"].status == "submitted" and state.slot.status == "success"


def test_a_refused_pigeon_is_dead_lettered_and_fails_the_cell(pigeon, make_runtime, downstream):
    downstream.queue((403, {"error": "no pigeons"}))
    rt = make_runtime(FIRE, mutate=_pigeon_route(downstream.url))
    rt.fire("morning-tokyo", iso=FIRE)
    rt.settle()
    state = rt.wiring.ledger.load(SLOT)
    (intent,) = state.intents_for("cats")
    assert (intent.status, intent.outbox_status, intent.attempts) == ("failed", "dead", 1)
    assert intent.last_error == "the loft refused the pigeon (HTTP 403)"
    cell = state.cells["cats"]
    assert (cell.status, cell.terminal_reason_code) == ("failed", "delivery_abandoned")
    assert len(downstream.requests) == 1
