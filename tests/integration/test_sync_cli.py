"""`pixivflow schedules sync [--dry-run]` on moto: the command an operator runs after editing the config."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
import yaml
from moto import mock_aws

from pixivflow.cli import main

ACCOUNT = "123456789012"
FUNCTION = f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:pixivflow-trigger"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/pixivflow-scheduler"
GROUP = "pixivflow-test"


def config(tmp_path: Path, schedules: list[dict]) -> str:
    doc = {
        "source": {"kind": "catalog", "path": "catalog.json"},
        "schedules": schedules,
        "targets": [{"id": "cats", "type": "illustration", "mode": "search", "tag": "cats", "storageMode": "persistent"}],
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def sync(path: str, *extra: str) -> int:
    return main(["schedules", "sync", "--config", path, "--group", GROUP, "--function-arn", FUNCTION,
                 "--role-arn", ROLE, *extra])


@pytest.fixture
def scheduler(monkeypatch):
    for name in ("SCHEDULER_TARGET_ARN", "SCHEDULER_ROLE_ARN", "SCHEDULER_DLQ_ARN", "SCHEDULER_GROUP"):
        monkeypatch.delenv(name, raising=False)
    with mock_aws():
        yield boto3.client("scheduler")


def group_state(client) -> dict[str, tuple[str, str, str]]:
    try:
        names = [s["Name"] for s in client.list_schedules(GroupName=GROUP)["Schedules"]]
    except client.exceptions.ResourceNotFoundException:
        return {}
    out = {}
    for name in names:
        got = client.get_schedule(Name=name, GroupName=GROUP)
        assert json.loads(got["Target"]["Input"]) == {"scheduleId": name, "scheduledTime": "<aws.scheduler.scheduled-time>"}
        assert (got["Target"]["Arn"], got["Target"]["RoleArn"]) == (FUNCTION, ROLE)
        out[name] = (got["ScheduleExpression"], got["ScheduleExpressionTimezone"], got["State"])
    return out


FIRST = [
    {"id": "morning", "cron": "0 8 * * *", "timezone": "Asia/Tokyo"},
    {"id": "weekdays", "cron": "30 9 * * 1-5", "timezone": "Europe/Berlin"},
    {"id": "nightly", "cron": "0 23 * * *", "timezone": "UTC"},
    {"id": "paused", "cron": "15 6 * * *", "enabled": False},
]


def test_dry_run_prints_the_plan_and_changes_nothing(scheduler, tmp_path, capsys):
    path = config(tmp_path, FIRST)
    assert sync(path, "--dry-run") == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "create morning cron(0 8 * * ? *) Asia/Tokyo ENABLED",
        "create weekdays cron(30 9 ? * MON-FRI *) Europe/Berlin ENABLED",
        "create nightly cron(0 23 * * ? *) UTC ENABLED",
        "create paused cron(15 6 * * ? *) UTC DISABLED",
        "dry run: nothing changed",
    ]
    assert group_state(scheduler) == {}


def test_add_update_disable_delete_then_idempotent(scheduler, tmp_path, capsys):
    path = config(tmp_path, FIRST)
    assert sync(path) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "applied"
    assert group_state(scheduler) == {
        "morning": ("cron(0 8 * * ? *)", "Asia/Tokyo", "ENABLED"),
        "weekdays": ("cron(30 9 ? * MON-FRI *)", "Europe/Berlin", "ENABLED"),
        "nightly": ("cron(0 23 * * ? *)", "UTC", "ENABLED"),
        "paused": ("cron(15 6 * * ? *)", "UTC", "DISABLED"),
    }

    # A second run is a no-op.
    assert sync(path) == 0
    assert capsys.readouterr().out.splitlines() == ["schedules are in sync"]

    second = [
        {"id": "morning", "cron": "0 7 * * *", "timezone": "Asia/Tokyo"},  # cron changed
        {"id": "weekdays", "cron": "30 9 * * 1-5", "timezone": "Europe/Berlin", "enabled": False},  # paused
        {"id": "paused", "cron": "15 6 * * *"},  # resumed
        {"id": "evening", "cron": "0 19 * * 6,0", "timezone": "America/New_York"},  # new
        # nightly removed from the config: its schedule is deleted
    ]
    path = config(tmp_path, second)
    before = group_state(scheduler)
    assert sync(path, "--dry-run") == 0
    assert capsys.readouterr().out.splitlines() == [
        "create evening cron(0 19 ? * SAT,SUN *) America/New_York ENABLED",
        "update morning cron(0 7 * * ? *) Asia/Tokyo ENABLED (changed: ScheduleExpression)",
        "update weekdays cron(30 9 ? * MON-FRI *) Europe/Berlin DISABLED (changed: State)",
        "update paused cron(15 6 * * ? *) UTC ENABLED (changed: State)",
        "delete nightly",
        "dry run: nothing changed",
    ]
    assert group_state(scheduler) == before

    assert sync(path) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "applied"
    assert group_state(scheduler) == {
        "morning": ("cron(0 7 * * ? *)", "Asia/Tokyo", "ENABLED"),
        "weekdays": ("cron(30 9 ? * MON-FRI *)", "Europe/Berlin", "DISABLED"),
        "paused": ("cron(15 6 * * ? *)", "UTC", "ENABLED"),
        "evening": ("cron(0 19 ? * SAT,SUN *)", "America/New_York", "ENABLED"),
    }

    assert sync(path) == 0
    assert capsys.readouterr().out.splitlines() == ["schedules are in sync"]
    assert sync(path, "--dry-run") == 0
    assert capsys.readouterr().out.splitlines() == ["schedules are in sync"]


def test_targets_come_from_flags_or_the_environment(scheduler, tmp_path, capsys, monkeypatch):
    path = config(tmp_path, FIRST[:1])
    assert main(["schedules", "sync", "--config", path, "--group", GROUP]) == 2
    assert capsys.readouterr().err.strip() == (
        "pixivflow schedules sync: --function-arn, --role-arn required (or SCHEDULER_TARGET_ARN / SCHEDULER_ROLE_ARN)")
    assert group_state(scheduler) == {}

    monkeypatch.setenv("SCHEDULER_TARGET_ARN", FUNCTION)
    monkeypatch.setenv("SCHEDULER_ROLE_ARN", ROLE)
    monkeypatch.setenv("SCHEDULER_GROUP", GROUP)
    assert main(["schedules", "sync", "--config", path]) == 0
    assert group_state(scheduler) == {"morning": ("cron(0 8 * * ? *)", "Asia/Tokyo", "ENABLED")}


def test_other_groups_are_left_alone(scheduler, tmp_path):
    scheduler.create_schedule(Name="keep-me", ScheduleExpression="rate(5 minutes)", FlexibleTimeWindow={"Mode": "OFF"},
                              Target={"Arn": FUNCTION, "RoleArn": ROLE})
    assert sync(config(tmp_path, FIRST[:1])) == 0
    assert [s["Name"] for s in scheduler.list_schedules(GroupName="default")["Schedules"]] == ["keep-me"]


def test_sync_answers_one_json_document_with_json(tmp_path, scheduler, capsys):
    path = config(tmp_path, FIRST)
    assert sync(path, "--json", "--dry-run") == 0
    planned = json.loads(capsys.readouterr().out)
    assert (planned["inSync"], planned["dryRun"], planned["applied"]) == (False, True, False)
    assert sorted(planned["create"]) == sorted(s["id"] for s in FIRST) and group_state(scheduler) == {}
    assert sync(path, "--json") == 0
    assert json.loads(capsys.readouterr().out)["applied"] is True
    assert sync(path, "--json") == 0
    again = json.loads(capsys.readouterr().out)
    assert (again["inSync"], again["applied"], again["create"]) == (True, False, [])


# -- the audit record of an applied sync (where it goes: tests/e2e/operator/test_cli_audit.py) --------------

AT = 1_796_079_600_000  # 2026-11-30T23:00:00Z


def synced(*extra: str) -> int:
    return main(["schedules", "sync", "--config", extra[0], "--group", GROUP, "--function-arn", FUNCTION,
                 "--role-arn", ROLE, *extra[1:]], now_ms=lambda: AT)


def sync_record(event: str = "schedules.synced", level: str = "INFO", **fields) -> dict:
    return {"level": level, "event": event, "timestamp": "2026-11-30T23:00:00.000Z", "operator": "ops-alice",
            "group": GROUP, "create": ["morning"], "update": {}, "delete": [], **fields}


@pytest.fixture
def operator(monkeypatch):
    monkeypatch.setenv("USER", "ops-alice")


def test_an_applied_sync_with_json_is_one_document_carrying_its_audit_record(scheduler, tmp_path, capsys, operator):
    path = config(tmp_path, FIRST[:1])
    assert synced(path, "--json", "--verbose") == 0
    out, err = capsys.readouterr()
    assert err == ""
    document = json.loads(out)
    assert (document["applied"], document["audit"]) == (True, [sync_record()])
    assert synced(path, "--json", "--verbose") == 0  # in sync: nothing done, nothing recorded
    out, err = capsys.readouterr()
    assert (err, json.loads(out)["applied"], json.loads(out)["audit"]) == ("", False, [])


def test_an_applied_sync_prints_its_audit_line_only_with_verbose(scheduler, tmp_path, capsys, operator):
    path = config(tmp_path, FIRST[:1])
    assert synced(path, "--dry-run", "--verbose") == 0  # a dry run changes nothing: no record
    assert capsys.readouterr() == ("create morning cron(0 8 * * ? *) Asia/Tokyo ENABLED\ndry run: nothing changed\n", "")
    assert synced(path) == 0
    assert capsys.readouterr() == ("create morning cron(0 8 * * ? *) Asia/Tokyo ENABLED\napplied\n", "")
    scheduler.delete_schedule(Name="morning", GroupName=GROUP)
    assert synced(path, "--verbose") == 0
    assert capsys.readouterr() == ("create morning cron(0 8 * * ? *) Asia/Tokyo ENABLED\napplied\n",
                                   json.dumps(sync_record(), sort_keys=True) + "\n")


def test_a_sync_that_fails_half_way_keeps_its_record_beside_the_error(scheduler, tmp_path, capsys, operator, monkeypatch):
    from botocore.exceptions import ClientError

    import pixivflow.adapters.scheduler_sync as scheduler_sync

    def denied(client, plan, group):
        raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "not allowed"}}, "CreateSchedule")

    monkeypatch.setattr(scheduler_sync, "apply_sync", denied)
    path = config(tmp_path, FIRST[:1])
    error = "pixivflow schedules sync: AWS answered AccessDeniedException: not allowed\n"
    failed = sync_record("schedules.sync_failed", "WARNING",
                         error="An error occurred (AccessDeniedException) when calling the CreateSchedule operation: not allowed")
    assert synced(path) == 1
    assert capsys.readouterr() == ("", error)
    assert synced(path, "--verbose") == 1
    assert capsys.readouterr() == ("", json.dumps(failed, sort_keys=True) + "\n" + error)
    assert synced(path, "--json") == 1
    out, err = capsys.readouterr()
    assert err == error and json.loads(out) == {"audit": [failed], "error": "AWS answered AccessDeniedException: not allowed"}
