"""Issue 24, the smaller items: a novel whose webview page fails is read from the App API's text
endpoint (real handlers, loopback fake Pixiv), and a target's ``duration`` reaches the search."""

from __future__ import annotations

import pytest

from pixivflow.local.fake_pixiv import DEFAULT_REFRESH_TOKEN
from support.builders import fake_pixiv, pixiv_config, pixiv_runtime

FIRE = "2026-11-30T23:00:00Z"
SLOT = "pixiv-morning@2026-12-01T0800"


fake = fake_pixiv()


@pytest.mark.parametrize("answer", [(500, {"error": {"message": "boom"}}), (200, "<html>no novel object here</html>"),
                                    (404, "<html>not found</html>")], ids=["webview-500", "webview-unparsable", "webview-404"])
def test_a_novel_whose_webview_page_fails_is_read_from_the_text_endpoint(make_runtime, monkeypatch, fake, answer):
    monkeypatch.setenv("PIXIV_REFRESH_TOKEN", DEFAULT_REFRESH_TOKEN)

    mutate = pixiv_config(fake, [{"id": "novel", "type": "novel", "novelId": 93002, "storageMode": "persistent"}],
                          network={"requestPacingMs": 0, "retries": 0})
    rt = pixiv_runtime(make_runtime, mutate, virtual_sleep=False)
    fake.fail("/webview/v2/novel", answer[0], answer[1], times=99)
    rt.fire("pixiv-morning", iso=FIRE)
    rt.settle()
    cell = rt.wiring.ledger.get_cell(SLOT, "novel")
    assert cell.status == "submitted", cell.last_error
    [text] = [f for f in rt.wiring.artifacts.partial(f"{SLOT}/novel/93002").values() if f.role == "text"]
    assert rt.wiring.artifacts.read(text).decode("utf-8") == "The dragon kept accounts."
    assert "/v1/novel/text" in fake.paths("api")


def test_duration_is_sent_when_configured_and_only_then():
    from pixivflow.adapters.pixiv.source import PixivSource
    from pixivflow.config import parse_config
    from pixivflow.domain.selection import plan_selection

    def first_url(target):
        config = parse_config({"source": {"kind": "pixiv"}, "pixiv": {"refreshToken": "${T}"}, "targets": [target]})
        query = plan_selection(config.targets[0].criteria(), occurrence_date="2026-12-01").queries[0]
        from pixivflow.adapters.pixiv.client import Bases

        class Client:  # only the URL builder is used
            bases = Bases()

            def api_url(self, path, params):
                from urllib.parse import urlencode

                return path + "?" + urlencode([(k, v) for k, v in params.items() if v is not None])

        return PixivSource(Client(), now_ms=lambda: 0, sleep=lambda s: None).first_url(query)

    assert "duration=within_last_week" in first_url({"id": "t", "tag": "cats", "duration": "within_last_week"})
    assert "duration" not in first_url({"id": "t", "tag": "cats"})
    from pixivflow.domain.errors import ConfigError

    with pytest.raises(ConfigError, match=r"targets\[0\]\.duration"):
        parse_config({"source": {"kind": "pixiv"}, "pixiv": {"refreshToken": "${T}"},
                      "targets": [{"id": "t", "tag": "cats", "duration": "within_last_year"}]})
