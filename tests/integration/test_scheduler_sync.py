"""EventBridge Scheduler sync on moto: plan, apply, converge."""

from __future__ import annotations

import json

import boto3
import botocore.session
import pytest
from botocore.validate import ParamValidator
from moto import mock_aws

from pixivflow.adapters.scheduler_sync import (
    DesiredSchedule,
    SyncPlan,
    SyncTarget,
    apply_sync,
    desired_request,
    plan_sync,
    read_existing,
)

REGION = "us-east-1"
ACCOUNT = "123456789012"
TARGET = SyncTarget(
    function_arn=f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:pixivflow-trigger",
    role_arn=f"arn:aws:iam::{ACCOUNT}:role/pixivflow-scheduler",
    dead_letter_arn=f"arn:aws:sqs:{REGION}:{ACCOUNT}:pixivflow-scheduler-dlq",
    group="pixivflow",
)
MORNING = DesiredSchedule("morning", "0 8 * * *", "Asia/Tokyo", True)
WEEKDAYS = DesiredSchedule("weekdays", "30 9 * * 1-5", "Europe/Berlin", True)
NIGHTLY = DesiredSchedule("nightly", "0 23 * * *", "UTC", True)


@pytest.fixture
def aws_env(monkeypatch):
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SECURITY_TOKEN": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)


@pytest.fixture
def scheduler(aws_env):
    with mock_aws():
        yield boto3.client("scheduler", region_name=REGION)


def sync(client, desired):
    plan = plan_sync(desired, read_existing(client, TARGET.group), TARGET)
    apply_sync(client, plan, TARGET.group)
    return plan


# --------------------------------------------------------------------------- pure planning


def test_request_is_accepted_by_the_botocore_model():
    model = botocore.session.get_session().get_service_model("scheduler")
    request = desired_request(WEEKDAYS, TARGET)
    for operation in ("CreateSchedule", "UpdateSchedule"):
        report = ParamValidator().validate(request, model.operation_model(operation).input_shape)
        assert not report.has_errors(), report.generate_report()
    assert set(request) <= set(model.operation_model("CreateSchedule").input_shape.members)


def test_request_shape():
    request = desired_request(WEEKDAYS, TARGET)
    assert request["Name"] == "weekdays"
    assert request["GroupName"] == "pixivflow"
    assert request["ScheduleExpression"] == "cron(30 9 ? * MON-FRI *)"
    assert request["ScheduleExpressionTimezone"] == "Europe/Berlin"
    assert request["FlexibleTimeWindow"] == {"Mode": "OFF"}
    assert request["State"] == "ENABLED"
    target = request["Target"]
    assert json.loads(target["Input"]) == {"scheduleId": "weekdays", "scheduledTime": "<aws.scheduler.scheduled-time>"}
    assert target["RetryPolicy"] == {"MaximumEventAgeInSeconds": 2700, "MaximumRetryAttempts": 3}
    assert target["DeadLetterConfig"] == {"Arn": TARGET.dead_letter_arn}


def test_no_dead_letter_config_without_a_queue():
    bare = SyncTarget(function_arn=TARGET.function_arn, role_arn=TARGET.role_arn)
    request = desired_request(DesiredSchedule("x", "0 8 * * *", "", False), bare)
    assert "DeadLetterConfig" not in request["Target"]
    assert request["ScheduleExpressionTimezone"] == "UTC"
    assert request["State"] == "DISABLED"


def test_an_untranslatable_cron_fails_the_plan():
    with pytest.raises(ValueError):
        plan_sync([DesiredSchedule("both", "0 8 1 * 1", "UTC", True)], [], TARGET)


def test_duplicate_ids_fail_the_plan():
    with pytest.raises(ValueError):
        plan_sync([MORNING, MORNING], [], TARGET)


def test_describe_lines():
    plan = plan_sync([MORNING], [], TARGET)
    assert plan.describe() == ["create morning cron(0 8 * * ? *) Asia/Tokyo ENABLED"]
    assert SyncPlan([], [], ["gone"], []).describe() == ["delete gone"]


# --------------------------------------------------------------------------- on moto


def test_missing_group_reads_as_empty_and_apply_creates_it(scheduler):
    assert read_existing(scheduler, "pixivflow") == []
    sync(scheduler, [MORNING])
    assert scheduler.get_schedule_group(Name="pixivflow")["Name"] == "pixivflow"


def test_created_schedule_carries_every_managed_field(scheduler):
    plan = sync(scheduler, [MORNING])
    assert [r["Name"] for r in plan.create] == ["morning"]

    got = scheduler.get_schedule(Name="morning", GroupName="pixivflow")
    assert got["ScheduleExpression"] == "cron(0 8 * * ? *)"
    assert got["ScheduleExpressionTimezone"] == "Asia/Tokyo"
    assert got["FlexibleTimeWindow"] == {"Mode": "OFF"}
    assert got["State"] == "ENABLED"
    target = got["Target"]
    assert target["Arn"] == TARGET.function_arn
    assert target["RoleArn"] == TARGET.role_arn
    assert json.loads(target["Input"]) == {"scheduleId": "morning", "scheduledTime": "<aws.scheduler.scheduled-time>"}
    assert target["RetryPolicy"] == {"MaximumEventAgeInSeconds": 2700, "MaximumRetryAttempts": 3}
    assert target["DeadLetterConfig"] == {"Arn": TARGET.dead_letter_arn}


def test_add_update_disable_delete_then_converge(scheduler):
    first = sync(scheduler, [MORNING, WEEKDAYS, NIGHTLY])
    assert sorted(r["Name"] for r in first.create) == ["morning", "nightly", "weekdays"]
    assert plan_sync([MORNING, WEEKDAYS, NIGHTLY], read_existing(scheduler, "pixivflow"), TARGET).empty

    changed = [
        DesiredSchedule("morning", "0 7 * * *", "Asia/Tokyo", True),  # cron changed
        DesiredSchedule("weekdays", "30 9 * * 1-5", "Europe/Paris", True),  # zone changed
        DesiredSchedule("nightly", "0 23 * * *", "UTC", False),  # paused
        DesiredSchedule("evening", "0 19 * * 6,0", "America/New_York", True),  # new
    ]
    plan = plan_sync(changed, read_existing(scheduler, "pixivflow"), TARGET)
    assert [r["Name"] for r in plan.create] == ["evening"]
    assert sorted(r["Name"] for r in plan.update) == ["morning", "nightly", "weekdays"]
    assert plan.changes["morning"] == ["ScheduleExpression"]
    assert plan.changes["weekdays"] == ["ScheduleExpressionTimezone"]
    assert plan.changes["nightly"] == ["State"]
    assert plan.delete == [] and plan.unchanged == []
    assert "update nightly cron(0 23 * * ? *) UTC DISABLED (changed: State)" in plan.describe()
    apply_sync(scheduler, plan, "pixivflow")

    assert scheduler.get_schedule(Name="morning", GroupName="pixivflow")["ScheduleExpression"] == "cron(0 7 * * ? *)"
    assert scheduler.get_schedule(Name="weekdays", GroupName="pixivflow")["ScheduleExpressionTimezone"] == "Europe/Paris"
    assert scheduler.get_schedule(Name="nightly", GroupName="pixivflow")["State"] == "DISABLED"
    assert scheduler.get_schedule(Name="evening", GroupName="pixivflow")["ScheduleExpression"] == "cron(0 19 ? * SAT,SUN *)"

    # Drop two plans: their schedules go; the others stay untouched.
    remaining = changed[:1] + changed[3:]
    plan = plan_sync(remaining, read_existing(scheduler, "pixivflow"), TARGET)
    assert plan.delete == ["nightly", "weekdays"]
    assert sorted(plan.unchanged) == ["evening", "morning"]
    assert plan.create == [] and plan.update == []
    apply_sync(scheduler, plan, "pixivflow")
    names = sorted(s["Name"] for s in scheduler.list_schedules(GroupName="pixivflow")["Schedules"])
    assert names == ["evening", "morning"]

    # Idempotent: the next plan is empty and applying it changes nothing.
    again = plan_sync(remaining, read_existing(scheduler, "pixivflow"), TARGET)
    assert again.empty and again.describe() == []
    assert sorted(again.unchanged) == ["evening", "morning"]


def test_drift_in_a_managed_field_is_repaired(scheduler):
    sync(scheduler, [MORNING])
    tampered = desired_request(MORNING, TARGET)
    tampered["Target"] = dict(tampered["Target"], RetryPolicy={"MaximumEventAgeInSeconds": 86400, "MaximumRetryAttempts": 185})
    tampered["FlexibleTimeWindow"] = {"Mode": "FLEXIBLE", "MaximumWindowInMinutes": 15}
    scheduler.update_schedule(**tampered)

    plan = sync(scheduler, [MORNING])
    assert plan.changes["morning"] == ["FlexibleTimeWindow", "Target.RetryPolicy"]
    got = scheduler.get_schedule(Name="morning", GroupName="pixivflow")
    assert got["FlexibleTimeWindow"] == {"Mode": "OFF"}
    assert got["Target"]["RetryPolicy"]["MaximumEventAgeInSeconds"] == 2700
    assert plan_sync([MORNING], read_existing(scheduler, "pixivflow"), TARGET).empty


def test_other_groups_are_not_touched(scheduler):
    scheduler.create_schedule(**dict(desired_request(NIGHTLY, TARGET), GroupName="default"))
    sync(scheduler, [MORNING])
    assert scheduler.get_schedule(Name="nightly", GroupName="default")["Name"] == "nightly"
    assert [s["Name"] for s in read_existing(scheduler, "pixivflow")] == ["morning"]


def test_apply_tolerates_a_stale_plan(scheduler):
    plan = plan_sync([MORNING], [], TARGET)  # planned before anything existed
    sync(scheduler, [MORNING])  # ...meanwhile someone created it
    apply_sync(scheduler, plan, "pixivflow")  # create -> conflict -> update
    stale_delete = SyncPlan([], [], ["never-existed"], [])
    apply_sync(scheduler, stale_delete, "pixivflow")
    assert [s["Name"] for s in read_existing(scheduler, "pixivflow")] == ["morning"]
