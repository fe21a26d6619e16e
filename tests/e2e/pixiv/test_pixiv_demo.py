"""`pixivflow demo --source fake-pixiv`: the demo schedules through the real Pixiv client against
the loopback fake Pixiv (issue 10)."""

import io

import pytest

from pixivflow.cli import main


@pytest.mark.size("large")  # the whole demo against the fake Pixiv (tests/README.md, test sizes)
def test_demo_runs_its_schedules_against_the_fake_pixiv(monkeypatch):
    monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", "ERROR")
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    from pixivflow.local.demo import run_demo

    out = io.StringIO()
    assert run_demo(days=1, source="fake-pixiv", out=out) == 0
    text = out.getvalue()
    assert "fake-pixiv source" in text and "OK: every slot terminal, every work delivered once" in text
    # morning-tokyo's three targets find the fake's cats, landscapes and day ranking
    assert "morning-tokyo@2026-12-02T0800        success  3 submitted" in text


def test_demo_cli_accepts_the_source_flag(monkeypatch):
    import pixivflow.local.demo as demo

    seen = {}
    monkeypatch.setattr(demo, "run_demo", lambda **kwargs: seen.update(kwargs) or 0)
    assert main(["demo", "--days", "1", "--source", "fake-pixiv"]) == 0
    assert seen["source"] == "fake-pixiv" and seen["days"] == 1
