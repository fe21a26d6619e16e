"""A dev server a user can live in (issue 26): one short line per request and per fire, execution
and delivery; a fire-now route for any schedule of the user's own config, whatever the grace
window, marked on its slot; a port that only listens once the backend is ready."""

from __future__ import annotations

import io
import re
import socket

import pytest
from conftest import TRIGGER_TOKEN, ms, write_config
from test_dev_server import call, loopback_aws, until  # noqa: F401 (the fixture, used below)

from pixivflow.clock import VirtualClock
from pixivflow.local.devserver import DEV_FIRE_LABEL, DevServer

pytestmark = pytest.mark.usefixtures("loopback_aws")
T0 = "2026-12-01T09:00:00Z"  # 18:00 in Tokyo: morning-tokyo's 08:00 fire is 10 hours old, far past its grace


def test_fire_now_admits_the_most_recent_fire_past_its_grace_and_names_the_slot(tmp_path, downstream):
    out = io.StringIO()
    with DevServer(write_config(tmp_path, downstream.url), port=0, clock=VirtualClock(ms(T0)), out=out, log_activity=True,
                   tokens={"trigger": TRIGGER_TOKEN, "jobs": "j" * 32}) as dev:
        # the ordinary run route refuses it: the occurrence is past graceMinutes (spec §1.4)
        assert call(f"{dev.url}/internal/schedules/morning-tokyo/run", "POST", token=TRIGGER_TOKEN)[0] == 410
        assert call(f"{dev.url}/dev/schedules/morning-tokyo/fire", "POST")[0] == 401
        assert call(f"{dev.url}/dev/schedules/morning-tokyo/fire", "GET", token=TRIGGER_TOKEN)[0] == 405
        assert call(f"{dev.url}/dev/schedules/nope/fire", "POST", token=TRIGGER_TOKEN)[0] == 404
        status, _, _ = call(f"{dev.url}/dev/schedules/morning-tokyo/fire", "POST", token=TRIGGER_TOKEN)
        assert status == 202
        slot_id = "morning-tokyo@2026-12-01T0800"
        until(lambda: (s := dev.rt.wiring.ledger.get_slot(slot_id)) is not None and s.status == "success", timeout_s=20)
        slot = dev.rt.wiring.ledger.get_slot(slot_id)
        assert slot.slot_name == DEV_FIRE_LABEL and slot.trigger_source == "cron"
    lines = out.getvalue().splitlines()
    assert re.search(r"^  POST /internal/schedules/morning-tokyo/run 410 \d+ ms$", "\n".join(lines), re.M), lines
    assert f"  dev fire morning-tokyo -> {slot_id}" in lines
    assert any(re.fullmatch(r"  execute \d+ record\(s\) \d+ ms", line) for line in lines), lines
    assert any(re.fullmatch(r"  deliver \d+ record\(s\) \d+ ms", line) for line in lines), lines


def test_the_port_is_bound_at_once_but_refuses_connections_until_the_backend_is_ready(tmp_path, downstream):
    dev = DevServer(write_config(tmp_path, downstream.url), port=0, clock=VirtualClock(ms(T0)))
    seen = {}
    real = dev._start_backend

    def backend_then_probe():
        real()
        port = dev._http.server_address[1]
        with socket.socket() as s:
            seen["connect"] = s.connect_ex(("127.0.0.1", port))  # before server_activate: nobody listens yet

    dev._start_backend = backend_then_probe
    with dev:
        assert seen["connect"] != 0
        assert call(f"{dev.url}/health")[0] == 200


@pytest.mark.size("large")  # two dev servers in subprocesses (tests/README.md, test sizes)
def test_state_dir_keeps_a_slot_and_its_files_across_a_restart(tmp_path, downstream):
    from pixivflow import aws

    config, state = write_config(tmp_path, downstream.url), tmp_path / "state"
    tokens = {"trigger": TRIGGER_TOKEN, "jobs": "j" * 32}
    with DevServer(config, port=0, clock=VirtualClock(ms(T0)), tokens=tokens, state_dir=state) as dev:
        assert call(f"{dev.url}/dev/schedules/morning-tokyo/fire", "POST", token=TRIGGER_TOKEN)[0] == 202
        slot_id = "morning-tokyo@2026-12-01T0800"
        until(lambda: (s := dev.rt.wiring.ledger.get_slot(slot_id)) is not None and s.status == "success", timeout_s=20)
        first_port = dev.aws_endpoint
    assert (state / "state.json").exists()
    with DevServer(config, port=0, clock=VirtualClock(ms(T0)), tokens=tokens, state_dir=state) as again:
        assert again.aws_endpoint == first_port  # the export line of a second shell still points here
        assert again.restored["items"] >= 5
        slot = again.rt.wiring.ledger.get_slot(slot_id)
        assert slot is not None and slot.status == "success"
        stored = aws.client("s3").list_objects_v2(Bucket=again.rt.env["ARTIFACT_BUCKET"]).get("KeyCount", 0)
        assert stored == again.restored["objects"] >= 1  # the work's files came back too
