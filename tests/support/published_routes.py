"""The published configs' TelePost routes on the fake Pixiv (issue 23): the ``world`` fixture (a
runtime factory on a published config's delivery block, the fake Pixiv, the TelePost-like receiver
and TelePress of ``pixivflow.local.route_fakes``) and the targets those routes deliver."""

from __future__ import annotations

import copy

import pytest

from pixivflow.local.fake_pixiv import DEFAULT_REFRESH_TOKEN, FakePixiv
from pixivflow.local.route_fakes import FakeTelePress, TelePostReceiver
from support.builders import pixiv_config, pixiv_runtime, published

SECRETS = "/pixivflow/routes"
SUBMIT_TOKEN = "telepost-bot1-submit-token"
TELEPRESS_KEY = "telepress-api-key-value"
SLOT = "pixiv-morning@2026-12-01T0800"
INLINE_TEXT = ("[chapter:第一章]\n猫は[[rb:窓辺 > まどべ]]で眠っていた。\n[uploadedimage:5551]\n"
               "[newpage]\n[chapter:第二章]\n[[jumpuri:作者のページ > https://www.pixiv.net/users/888]]\n[pixivimage:91002]\n終わり")


@pytest.fixture
def world(make_runtime, monkeypatch):
    """(runtime factory, fake Pixiv, TelePost receiver, TelePress)."""
    with FakePixiv() as fake, TelePostReceiver(token=SUBMIT_TOKEN) as telepost, FakeTelePress(token=TELEPRESS_KEY) as press:
        fake.fixtures.add_inline_images(93001, uploaded=["5551"], illusts=["91002"])
        fake.fixtures.texts[93001] = INLINE_TEXT
        monkeypatch.setenv("ROUTE_SECRETS_PATH", SECRETS)
        monkeypatch.setenv("TELEPOST_API_BASE_URL", telepost.base)
        monkeypatch.setenv("TELEPOST_BOT1_SUBMIT_TOKEN", SUBMIT_TOKEN)
        monkeypatch.setenv("TELEPRESS_API_KEY", TELEPRESS_KEY)
        monkeypatch.delenv("PIXIV_REFRESH_TOKEN", raising=False)

        def factory(config_name: str, targets: list[dict], *, routes: dict | None = None):
            doc = published(config_name)
            delivery = copy.deepcopy(doc["delivery"])
            for name, extra in (routes or {}).items():
                delivery["targets"][name].update(extra)
            mutate = pixiv_config(fake, targets, pixiv={"refreshToken": "${PIXIV_E2E_TOKEN}"},
                                  network={"requestPacingMs": 1000, "timeoutMs": 5000}, delivery=delivery)
            rt = pixiv_runtime(make_runtime, mutate, ssm=True, ssm_token=(f"{SECRETS}/PIXIV_E2E_TOKEN", DEFAULT_REFRESH_TOKEN))
            assert rt.fire("pixiv-morning", iso="2026-11-30T23:00:00Z")["disposition"] == "accepted"
            return rt

        yield factory, fake, telepost, press


def novel_target(delivery: dict) -> dict:
    return {"id": "bot1-novel", "type": "novel", "novelId": 93001, "storageMode": "cache", "delivery": delivery}


def illust_target(route: str) -> dict:
    return {"id": "bot1-illust", "type": "illustration", "illustId": 91001, "storageMode": "cache",
            "delivery": {"target": route}}


def production_novel_delivery() -> dict:
    (novel,) = [t for t in published("production.json")["targets"] if t["id"] == "bot1-novel-botefuku"]
    delivery = copy.deepcopy(novel["delivery"])
    return delivery
