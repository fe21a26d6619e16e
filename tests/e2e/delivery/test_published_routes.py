"""The routes of the published configs deliver as PixivFlow's receivers expect (issue 23).

Through the real handlers on moto with the real Pixiv client against the local fake Pixiv:
``production.json``'s ``bot1-submit`` route (TelePost, with a novel target's TelePress preview)
and ``fly-two-bots.example.json``'s ``telepost-bot1`` route, each to the TelePost-like receiver
of ``pixivflow.local.route_fakes``, which validates the multipart as TelePost does; and
``pixivflow.shadow.json``, a dry run that delivers nothing and records its choices. The configs
are the copies under tests/fixtures/pixivflow_configs/, their routes' ``${VAR}``s set here.
"""

from __future__ import annotations

import json

import pytest

from pixivflow import aws
from pixivflow.local.fake_pixiv import NOVEL_TEXT
from support.builders import published
from support.delivery import drive
from support.published_routes import SLOT, TELEPRESS_KEY, illust_target, novel_target, production_novel_delivery, world  # noqa: F401 - world: the fixture


def test_a_novel_with_two_inline_images_reaches_telepress_and_the_submission_carries_its_url(world):  # noqa: F811 - the fixture
    factory, fake, telepost, press = world
    delivery = production_novel_delivery()
    delivery["richNovelPreview"]["url"] = press.url
    rt = factory("production.json", [novel_target(delivery)])
    drive(rt)
    (page,) = press.published
    assert sorted(page["images"]) == ["images/93001_pixivimage_91002.jpg", "images/93001_uploadedimage_5551.jpg"]
    assert page["md_name"] == "93001.md"
    md = page["md"]
    assert "## 第一章" in md and "窓辺（まどべ）" in md and "\n---\n" in md
    assert "[作者のページ](https://www.pixiv.net/users/888)" in md
    assert "![](images/93001_uploadedimage_5551.jpg)" in md and "![](images/93001_pixivimage_91002.jpg)" in md
    assert [m["local"] for m in page["manifest"]] == ["images/93001_uploadedimage_5551.jpg", "images/93001_pixivimage_91002.jpg"]
    assert all(m["source"].startswith("https://i.pximg.net/") for m in page["manifest"])  # as Pixiv named them
    (press_request,) = press.at("/publish/rich-novel", "POST")
    assert press_request.headers["authorization"] == f"Bearer {TELEPRESS_KEY}"
    (submission,) = telepost.submissions.values()
    assert submission["fields"]["novel_preview_url"] == [page["url"]]
    # the novel's text file is the submission's file; the md and the images ride only to TelePress
    assert [name for name, _ in submission["files"]] == ["93001.txt"]
    assets = json.loads(submission["fields"]["media_assets"][0])
    assert [a["asset_id"] for a in assets] == ["pixiv:93001:uploadedimage:5551", "pixiv:93001:pixivimage:91002"]
    assert telepost.rejections == []
    (row,) = rt.wiring.ledger.load(SLOT).intents_for("bot1-novel")
    assert (row.status, row.last_error) == ("delivered", None)


def test_a_novel_without_inline_images_is_submitted_without_the_field(world):  # noqa: F811 - the fixture
    factory, fake, telepost, press = world
    fake.fixtures.texts[93001] = NOVEL_TEXT
    fake.fixtures.inline.pop(93001)
    delivery = production_novel_delivery()
    delivery["richNovelPreview"]["url"] = press.url
    rt = factory("production.json", [novel_target(delivery)])
    drive(rt)
    assert press.requests == []
    (submission,) = telepost.submissions.values()
    assert "novel_preview_url" not in submission["fields"]


@pytest.mark.parametrize("answer,retried", [((502, {"error": "bad gateway"}), True), ((429, {"error": "slow down"}), True),
                                            ((400, {"error": "bad markdown"}), False)])
def test_a_preview_failure_retries_the_row_or_submits_without_the_field(world, answer, retried):  # noqa: F811 - the fixture
    factory, fake, telepost, press = world
    press.answers.append(answer)
    delivery = production_novel_delivery()
    delivery["richNovelPreview"]["url"] = press.url
    rt = factory("production.json", [novel_target(delivery)])
    drive(rt)
    (submission,) = telepost.submissions.values()
    (row,) = rt.wiring.ledger.load(SLOT).intents_for("bot1-novel")
    assert row.status == "delivered"
    if retried:  # the second attempt publishes the preview, then submits once
        assert len(press.requests) == 2 and row.attempts == 2
        assert submission["fields"]["novel_preview_url"] == [press.published[0]["url"]]
        assert len(telepost.at("/api/bot1/v1/submissions", "POST")) == 1
    else:  # permanent for the preview: submitted at once without the field, and the row says so
        assert len(press.requests) == 1 and row.attempts == 1
        assert "novel_preview_url" not in submission["fields"]
        assert "telepress_http_400" in row.last_error and "novel_preview_url" in row.last_error


@pytest.mark.parametrize("config_name,route", [("production.json", "bot1-submit"), ("fly-two-bots.example.json", "telepost-bot1")])
def test_telepost_accepts_the_multipart_of_each_published_route(world, config_name, route):  # noqa: F811 - the fixture
    factory, fake, telepost, press = world
    rt = factory(config_name, [illust_target(route)])
    drive(rt)
    assert telepost.rejections == []
    (submission,) = telepost.submissions.values()
    fields = {k: v[0] for k, v in submission["fields"].items()}
    # three pages, and their previews one-to-one (sent even where the config does not name the field)
    assert [n for n, _ in submission["files"]] == ["91001_p0.png", "91001_p1.png", "91001_p2.png"]
    assert [n for n, _ in submission["previews"]] == [f"91001_p{i}.png.preview.jpg" for i in range(3)]
    assets = json.loads(fields["media_assets"])
    assert [a["asset_id"] for a in assets] == ["pixiv:91001:illust:0", "pixiv:91001:illust:1", "pixiv:91001:illust:2"]
    assert fields["idempotency_key"] == f"pixivflow:{route}:illustration:91001:{SLOT}:bot1-illust"
    assert fields["link"] == "https://www.pixiv.net/artworks/91001"
    if config_name == "fly-two-bots.example.json":
        # array joined with commas, empty elements kept; booleans as true/false
        assert fields["tags"] == "Pixiv,,AllAges,cats,cute"
        assert (fields["anonymous"], fields["spoiler"]) == ("true", "false")
        assert fields["source_label"] == "PixivFlow · 08:00 · Bot1"
    else:
        assert fields["tags"] == "cats,cute," and fields["spoiler"] == "false"
        assert fields["refetch_request_id"] == "" and fields["work_type"] == "illustration"
    (row,) = rt.wiring.ledger.load(SLOT).intents_for("bot1-illust")
    assert (row.status, row.max_attempts) == ("delivered", 12)  # the outbox's budget, not the route's maxAttempts 3


def test_the_shadow_config_delivers_nothing_and_records_its_choices(world, logs):  # noqa: F811 - the fixture
    factory, fake, telepost, press = world
    shadow = published("pixivflow.shadow.json")
    assert shadow["delivery"] == {}
    target = {k: v for k, v in illust_target("unused").items() if k != "delivery"}
    target["noMatchPolicy"] = {"lookbackDays": 3, "notify": True}
    rt = factory("pixivflow.shadow.json", [target])
    rt.settle()
    state = rt.wiring.ledger.load(SLOT)
    cell = state.cells["bot1-illust"]
    # the choice is recorded on the cell (as for any download-only target) and said in the log
    assert (cell.status, cell.work_id, cell.work_type) == ("submitted", "91001", "illustration")
    assert list(state.intents) == []  # no delivery row, so nothing is ever posted
    (dry,) = logs.events("delivery.dry_run")
    assert (dry["target_id"], dry["work_id"], dry["artifact_key"]) == ("bot1-illust", "91001", f"{SLOT}/bot1-illust/91001")
    # no notification either, whatever noMatchPolicy.notify says: there is no route to send one to
    assert telepost.requests == [] and press.requests == []
    for key in (f"notification:{SLOT}:summary", f"notification:{SLOT}:bot1-illust:no-candidate"):
        assert rt.wiring.outbox_rows.get("notification", key) is None
    objects = aws.client("s3").list_objects_v2(Bucket=rt.env["ARTIFACT_BUCKET"], Prefix=f"{SLOT}/bot1-illust/91001/")
    stored = sorted(o["Key"].rsplit("/", 1)[-1] for o in objects.get("Contents", []))
    assert [n for n in stored if n.endswith(".png")] == ["91001_p0.png", "91001_p1.png", "91001_p2.png"]
    assert not any("preview" in n for n in stored)  # nothing would send them
