"""Make one EventBridge Scheduler group match the configured schedules.

Planning is pure (``desired_request`` / ``plan_sync``): it compares only the
fields this project manages, so a schedule edited by hand in a field we do not
own (description, KMS key, start date...) is left alone, while any drift in a
managed field is corrected. ``read_existing`` and ``apply_sync`` are the only
functions that talk to AWS.

Every scheduled invocation carries ``{"scheduleId": ..., "scheduledTime":
"<aws.scheduler.scheduled-time>"}``; the trigger function turns that fire time
into the occurrence (see ``pixivflow.domain.occurrence.occurrence_for_fire``).
Disabled plans stay in the group as ``DISABLED`` (pause/resume keeps history);
schedules of the group that no plan names are deleted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from ..domain.cron import to_eventbridge_cron

SCHEDULED_TIME_PLACEHOLDER = "<aws.scheduler.scheduled-time>"
DEFAULT_GROUP = "default"


@dataclass(frozen=True)
class DesiredSchedule:
    schedule_id: str
    cron: str  # 5-field Unix cron, as in the config
    timezone: str
    enabled: bool


@dataclass(frozen=True)
class SyncTarget:
    function_arn: str
    role_arn: str
    dead_letter_arn: str | None = None
    group: str = "pixivflow"
    # <= half the 90 min grace: a fire older than this is dropped, never back-filled
    max_event_age_s: int = 2700
    max_retries: int = 3


@dataclass
class SyncPlan:
    create: list[dict] = field(default_factory=list)
    update: list[dict] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    # schedule name -> managed fields that differ (explains each update)
    changes: dict[str, list[str]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        """True when applying the plan would make no call."""
        return not (self.create or self.update or self.delete)

    def describe(self) -> list[str]:
        """One human line per action, e.g. ``create morning cron(0 8 * * ? *) Asia/Tokyo ENABLED``."""
        lines = [f"create {_summary(req)}" for req in self.create]
        for req in self.update:
            changed = ", ".join(self.changes.get(req["Name"], []))
            lines.append(f"update {_summary(req)}" + (f" (changed: {changed})" if changed else ""))
        lines.extend(f"delete {name}" for name in self.delete)
        return lines


def _summary(req: dict) -> str:
    return f"{req['Name']} {req['ScheduleExpression']} {req['ScheduleExpressionTimezone']} {req['State']}"


def _input_for(schedule_id: str) -> str:
    return json.dumps(
        {"scheduleId": schedule_id, "scheduledTime": SCHEDULED_TIME_PLACEHOLDER},
        separators=(",", ":"),
    )


def desired_request(s: DesiredSchedule, t: SyncTarget) -> dict:
    """The exact ``create_schedule`` / ``update_schedule`` keyword arguments for one plan."""
    target: dict[str, Any] = {
        "Arn": t.function_arn,
        "RoleArn": t.role_arn,
        "Input": _input_for(s.schedule_id),
        "RetryPolicy": {
            "MaximumEventAgeInSeconds": t.max_event_age_s,
            "MaximumRetryAttempts": t.max_retries,
        },
    }
    if t.dead_letter_arn:
        target["DeadLetterConfig"] = {"Arn": t.dead_letter_arn}
    return {
        "Name": s.schedule_id,
        "GroupName": t.group,
        "ScheduleExpression": to_eventbridge_cron(s.cron),
        "ScheduleExpressionTimezone": (s.timezone or "").strip() or "UTC",
        "FlexibleTimeWindow": {"Mode": "OFF"},
        "State": "ENABLED" if s.enabled else "DISABLED",
        "Target": target,
    }


def _managed(schedule: dict) -> dict[str, Any]:
    """The fields we own, normalised so a get_schedule response and a request compare equal."""
    target = schedule.get("Target") or {}
    raw_input = target.get("Input")
    try:
        parsed_input = json.loads(raw_input) if raw_input is not None else None
    except (TypeError, ValueError):
        parsed_input = raw_input
    window = schedule.get("FlexibleTimeWindow") or {}
    retry = target.get("RetryPolicy") or {}
    dlq = (target.get("DeadLetterConfig") or {}).get("Arn")
    return {
        "ScheduleExpression": schedule.get("ScheduleExpression"),
        "ScheduleExpressionTimezone": schedule.get("ScheduleExpressionTimezone") or "UTC",
        "State": schedule.get("State") or "ENABLED",
        "FlexibleTimeWindow": (window.get("Mode"), window.get("MaximumWindowInMinutes")),
        "Target.Arn": target.get("Arn"),
        "Target.RoleArn": target.get("RoleArn"),
        "Target.Input": parsed_input,
        "Target.RetryPolicy": (retry.get("MaximumEventAgeInSeconds"), retry.get("MaximumRetryAttempts")),
        "Target.DeadLetterConfig": dlq or None,
    }


def plan_sync(desired: list[DesiredSchedule], existing: list[dict], target: SyncTarget) -> SyncPlan:
    """Compare the wanted schedules with ``existing`` (get_schedule responses of the group)."""
    plan = SyncPlan()
    seen: set[str] = set()
    current = {item["Name"]: item for item in existing}
    for schedule in desired:
        if schedule.schedule_id in seen:
            raise ValueError(f"schedule id {schedule.schedule_id!r} is listed twice")
        seen.add(schedule.schedule_id)
        request = desired_request(schedule, target)
        have = current.get(schedule.schedule_id)
        if have is None:
            plan.create.append(request)
            continue
        want_view, have_view = _managed(request), _managed(have)
        diff = [key for key in want_view if want_view[key] != have_view[key]]
        if diff:
            plan.update.append(request)
            plan.changes[schedule.schedule_id] = diff
        else:
            plan.unchanged.append(schedule.schedule_id)
    plan.delete = sorted(name for name in current if name not in seen)
    return plan


def _error_code(exc: ClientError) -> str:
    return exc.response.get("Error", {}).get("Code", "")


def _group_exists(client, group: str) -> bool:
    if group == DEFAULT_GROUP:
        return True
    try:
        client.get_schedule_group(Name=group)
    except ClientError as exc:
        if _error_code(exc) == "ResourceNotFoundException":
            return False
        raise
    return True


def read_existing(client, group: str) -> list[dict]:
    """Every schedule of ``group`` as a get_schedule response; [] when the group does not exist."""
    if not _group_exists(client, group):
        return []
    names: list[str] = []
    token: str | None = None
    while True:
        kwargs: dict[str, Any] = {"GroupName": group}
        if token:
            kwargs["NextToken"] = token
        page = client.list_schedules(**kwargs)
        names.extend(item["Name"] for item in page.get("Schedules", []))
        token = page.get("NextToken")
        if not token:
            break
    found: list[dict] = []
    for name in dict.fromkeys(names):
        try:
            response = client.get_schedule(Name=name, GroupName=group)
        except ClientError as exc:
            if _error_code(exc) == "ResourceNotFoundException":
                continue  # deleted between list and get
            raise
        response.pop("ResponseMetadata", None)
        found.append(response)
    return found


def apply_sync(client, plan: SyncPlan, group: str) -> None:
    """Create the group when missing, then carry out the plan. Safe to re-run."""
    if not _group_exists(client, group):
        try:
            client.create_schedule_group(Name=group)
        except ClientError as exc:
            if _error_code(exc) != "ConflictException":  # created concurrently
                raise
    for request in plan.create:
        try:
            client.create_schedule(**request)
        except ClientError as exc:
            if _error_code(exc) != "ConflictException":
                raise
            client.update_schedule(**request)  # appeared since the plan was made
    for request in plan.update:
        try:
            client.update_schedule(**request)
        except ClientError as exc:
            if _error_code(exc) != "ResourceNotFoundException":
                raise
            client.create_schedule(**request)  # vanished since the plan was made
    for name in plan.delete:
        try:
            client.delete_schedule(Name=name, GroupName=group)
        except ClientError as exc:
            if _error_code(exc) != "ResourceNotFoundException":
                raise


__all__ = [
    "DesiredSchedule",
    "SyncPlan",
    "SyncTarget",
    "apply_sync",
    "desired_request",
    "plan_sync",
    "read_existing",
]
