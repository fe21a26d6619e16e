"""``pixivflow config check``: the warnings (values repaired with a default) and the errors, each
naming its field, both at once: as text on stdout, or with ``--json`` as one JSON document (and
nothing on stderr either way)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from pixivflow.cli import main

DEMO = Path(__file__).resolve().parents[2] / "events" / "demo"


def write(tmp_path: Path, edit) -> Path:
    cfg = yaml.safe_load((DEMO / "config.yaml").read_text())
    cfg["source"]["path"] = str(DEMO / "catalog.json")
    edit(cfg)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def check(capsys, path: Path) -> tuple[int, dict, list[str]]:
    code = main(["config", "check", "--config", str(path), "--json"])
    out = capsys.readouterr()
    return code, json.loads(out.out), out.err.splitlines()


def test_a_valid_config_with_repaired_values_passes_and_lists_the_warnings(tmp_path, capsys):
    def edit(cfg):
        cfg["schedulerRuntime"].update(queuedTimeoutMs=1000, stallTimeoutMs="nonsense")
        cfg["targets"][0]["candidateScanLimit"] = 0

    code, summary, err = check(capsys, write(tmp_path, edit))
    assert code == 0
    expected = [
        "schedulerRuntime.queuedTimeoutMs: 1000 is below the 60000 ms floor; the default 1800000 is used",
        "schedulerRuntime.stallTimeoutMs: 'nonsense' is not an integer number of milliseconds; the default 900000 is used",
        "targets[0].candidateScanLimit: 0 is below 1; 1 is used",
    ]
    assert summary["ok"] is True and summary["warnings"] == expected and summary["errors"] == []
    assert "morning-tokyo" in summary["schedules"] and "cats" in summary["targets"]
    assert err == []  # the JSON document is the whole answer


def test_an_invalid_config_fails_and_shows_its_errors_and_its_warnings(tmp_path, capsys):
    def edit(cfg):
        cfg["schedulerRuntime"]["stallTimeoutMs"] = 10
        cfg["targets"][0]["startDate"] = "yesterday"
        cfg["targets"][1]["minBookmarks"] = -5

    code, summary, err = check(capsys, write(tmp_path, edit))
    assert code == 1 and summary["ok"] is False
    assert summary["warnings"] == ["schedulerRuntime.stallTimeoutMs: 10 is below the 60000 ms floor; the default 900000 is used"]
    assert summary["errors"] == [
        "targets[0].startDate: 'yesterday' is not a date (YYYY-MM-DD)",
        "targets[1].minBookmarks: Input should be greater than or equal to 0",
    ]
    assert err == []

    # The same verdict as text, the file given as the argument: every warning beside every error.
    code = main(["config", "check", str(tmp_path / "config.yaml")])
    out = capsys.readouterr()
    assert code == 1 and out.err == ""
    assert out.out.splitlines() == (["warning: " + summary["warnings"][0]] + [f"error: {line}" for line in summary["errors"]]
                                    + ["config invalid: 2 error(s), 1 warning(s)"])


def test_a_clean_config_has_no_warnings(tmp_path, capsys):
    code, summary, err = check(capsys, write(tmp_path, lambda cfg: None))
    assert (code, summary["ok"], summary["warnings"], err) == (0, True, [], [])


def test_every_cross_reference_error_is_reported_not_only_the_first(tmp_path, capsys):
    """Issue 26: an unknown target id, an unknown route, a duplicate schedule id and a duplicate
    target id, each with its field, in one run; exit 1."""
    def edit(cfg):
        cfg["schedules"][0]["targetIds"] = ["cats", "no-such-target"]
        cfg["schedules"].append(dict(cfg["schedules"][0], targetIds=["cats"]))  # the same id again
        cfg["targets"][1]["delivery"] = {"targets": ["no-such-route"]}
        cfg["targets"].append(dict(cfg["targets"][0]))  # the same id again

    cfg = yaml.safe_load((DEMO / "config.yaml").read_text())
    first, schedules, targets = cfg["schedules"][0]["id"], len(cfg["schedules"]), len(cfg["targets"])
    code, summary, err = check(capsys, write(tmp_path, edit))
    assert code == 1 and summary["ok"] is False
    assert summary["errors"] == [
        f"schedules[{schedules}].id: duplicate id {first!r}",
        f"targets[{targets}].id: duplicate id {cfg['targets'][0]['id']!r}",
        "schedules[0].targetIds: unknown target 'no-such-target'",
        "targets[1].delivery: unknown route 'no-such-route'",
    ]
    assert err == []


def test_the_text_verdict_of_a_valid_config_counts_what_it_holds(tmp_path, capsys):
    path = write(tmp_path, lambda cfg: None)
    assert main(["config", "check", str(path)]) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert line.startswith("config OK: ") and line.endswith(" route(s), 0 warning(s)")
    assert main(["config", "check", str(path), "--config", str(tmp_path / "other.yaml")]) == 2  # given twice
