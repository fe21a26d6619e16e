"""``pixivflow dev --demo`` wires the Telegram review route to the local fakes (issue 23): a run
of its schedule posts the work to the fake Bot API, adds the control card and records the review
at the fake control plane, and the delivery shows in the ledger that /ui reads."""

from __future__ import annotations

import io
import json
import re
import urllib.request

from conftest import JOBS_TOKEN, TRIGGER_TOKEN, ms
from test_dev_server import call, loopback_aws, until  # noqa: F401  (loopback_aws is a fixture)

from pixivflow.clock import VirtualClock
from pixivflow.domain.assets import artifact_prefix
from pixivflow.services.assets import recorded_files
from pixivflow.local.devserver import TELEGRAM_ROUTE, TELEGRAM_SCHEDULE, TELEGRAM_TARGET, DevServer


def test_the_demo_posts_a_review_through_the_fake_telegram_and_control_plane(loopback_aws):  # noqa: F811
    out = io.StringIO()
    dev = DevServer(port=0, demo=True, source="catalog", clock=VirtualClock(ms("2026-12-01T00:00:00Z")), out=out,
                    tokens={"trigger": TRIGGER_TOKEN, "jobs": JOBS_TOKEN})
    dev.start()
    try:
        status, _, body = call(f"{dev.url}/internal/schedules/{TELEGRAM_SCHEDULE}/run", "POST", {"label": "curl"},
                               token=TRIGGER_TOKEN)
        assert status == 202, body
        slot_id = json.loads(body)["schedule"]["slotId"]

        def done() -> bool:
            slot = dev.rt.wiring.ledger.get_slot(slot_id)
            return slot is not None and slot.status == "success"

        until(done, timeout_s=10)
        methods = [c.method for c in dev.fake_telegram.sent()]
        assert methods[-1] == "sendMessage" and methods[0] in ("sendPhoto", "sendMediaGroup")
        (review,) = dev.control_plane.reviews.values()
        (row,) = dev.rt.wiring.ledger.load(slot_id).intents_for(TELEGRAM_TARGET)
        assert (row.route, row.status, row.remote_id) == (TELEGRAM_ROUTE, "delivered", review["review_id"])
        assert any(line.startswith("  fake Telegram Bot API") for line in dev.banner())

        # issue 26: the occurrence page's thumbnail of the delivered work, a URL of the local S3
        # endpoint (moto) presigned for the stored preview, which the page's CSP allows, and which serves it
        _, headers, _ = call(f"{dev.url}/ui/login", "POST", form=f"token={TRIGGER_TOKEN}")
        cookie = headers["Set-Cookie"].split(";", 1)[0]
        status, headers, page = call(f"{dev.url}/ui/slots/{slot_id}", headers={"Cookie": cookie})
        [src] = re.findall(r'<img src="([^"]+)"', page.decode())
        url = src.replace("&amp;", "&")
        assert status == 200 and url.startswith(dev.aws_endpoint + "/")
        assert f"img-src data: {dev.aws_endpoint};" in headers["Content-Security-Policy"]
        with urllib.request.urlopen(url, timeout=10) as resp:  # loopback: the dev server's moto
            served = resp.read()
        preview = next((f for f in recorded_files(row) if f.role == "preview"), None)
        assert preview is not None and preview.key.startswith(artifact_prefix(slot_id, TELEGRAM_TARGET, row.work_id) + "/")
        assert served == dev.rt.wiring.artifacts.read(preview) and len(served) > 0
    finally:
        dev.stop()
