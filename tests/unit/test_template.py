"""template.yaml contract: what the deployed stack must look like (DESIGN §2-§6, §11, §12).

The SAM transform itself is exercised by `make lint` (cfn-lint 1.53.3 + aws-sam-translator in
.venv-lint); here the template is read with pixivflow.local.template.load_template and its contract is
asserted directly.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from pixivflow.local.template import default_template_path, load_template

REPO = Path(__file__).resolve().parents[2]

FUNCTIONS = {
    "TriggerFunction": "trigger",
    "ExecuteFunction": "execute",
    "DeliverFunction": "deliver",
    "StallSweepFunction": "stall_sweep",
    "JobEventsFunction": "job_events",
}
QUEUE_DLQ = {"ExecutionQueue": "ExecutionDLQ", "OutboxQueue": "OutboxDLQ"}
DLQS = ["ExecutionDLQ", "OutboxDLQ", "SchedulerDLQ"]
GSIS = {
    "ActiveSlots": ("activePk", "activeSk"),
    "DueOutbox": ("duePk", "dueSk"),
    "OpenCallbacks": ("callbackPk", "callbackSk"),
    "JobsByCreated": ("jobsPk", "jobsSk"),
    "FailedCells": ("failPk", "failSk"),
    "SlotsByCreated": ("slotsPk", "slotsSk"),
    "DeadRows": ("deadPk", "deadSk"),
}
# Real IAM actions for item-level DynamoDB data access. There is no "dynamodb:TransactWriteItems"
# IAM action: a transaction is authorised per item by PutItem/UpdateItem/DeleteItem/ConditionCheckItem.
DYNAMODB_DATA_ACTIONS = {
    "dynamodb:GetItem",
    "dynamodb:BatchGetItem",
    "dynamodb:Query",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:ConditionCheckItem",
}
# Managed policies / SAM policy templates too wide for this stack.
BROAD_POLICIES = ("DynamoDBCrudPolicy", "AmazonDynamoDBFullAccess", "S3CrudPolicy", "S3FullAccessPolicy",
                  "AmazonSQSFullAccess", "SQSPollerPolicy", "AdministratorAccess", "PowerUserAccess")


@pytest.fixture(scope="module")
def tpl() -> dict[str, Any]:
    return load_template(REPO / "template.yaml")


@pytest.fixture(scope="module")
def resources(tpl: dict[str, Any]) -> dict[str, Any]:
    return tpl["Resources"]


def props(resources: dict[str, Any], logical_id: str) -> dict[str, Any]:
    return resources[logical_id]["Properties"]


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def getatt_target(value: Any) -> str:
    """Logical id named by {"Fn::GetAtt": [id, attr]} (the only form the template should use)."""
    assert isinstance(value, dict) and "Fn::GetAtt" in value, value
    return value["Fn::GetAtt"][0]


def function_timeout(tpl: dict[str, Any], logical_id: str) -> int:
    own = tpl["Resources"][logical_id]["Properties"].get("Timeout")
    return int(own if own is not None else tpl["Globals"]["Function"]["Timeout"])


def inline_statements(resources: dict[str, Any], logical_id: str) -> list[dict[str, Any]]:
    statements: list[dict[str, Any]] = []
    for policy in as_list(props(resources, logical_id).get("Policies", [])):
        if isinstance(policy, dict) and "Statement" in policy:
            statements.extend(as_list(policy["Statement"]))
    return statements


def all_statements(resources: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    for lid, res in resources.items():
        if res["Type"] == "AWS::Serverless::Function":
            out += [(lid, s) for s in inline_statements(resources, lid)]
        elif res["Type"] == "AWS::IAM::Role":
            for policy in res["Properties"].get("Policies", []):
                out += [(lid, s) for s in as_list(policy["PolicyDocument"]["Statement"])]
    return out


def allowed(resources: dict[str, Any], logical_id: str, action: str) -> list[Any]:
    """Resources the function's inline policies allow `action` on."""
    found: list[Any] = []
    for statement in inline_statements(resources, logical_id):
        if statement.get("Effect") == "Allow" and action in as_list(statement["Action"]):
            found += as_list(statement["Resource"])
    return found


# ------------------------------------------------------------------ loader


def test_load_template_turns_short_tags_into_long_form(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(
        "A: !Ref Thing\n"
        "B: !GetAtt Queue.Arn\n"
        "C: !GetAtt Db.Endpoint.Address\n"
        "D: !GetAtt [Queue, QueueName]\n"
        "E: !Sub 'arn:${AWS::Partition}:x'\n"
        "F: !Sub ['${a}-b', {a: !Ref P}]\n"
        "G: !If [Cond, !Join ['', [x, !Select [0, !Split [',', 'a,b']]]], !Ref AWS::NoValue]\n"
        "H: !Not [!Equals [!Ref P, '']]\n"
        "I: !And [!Condition C1, !Or [!Condition C2, !Condition C3]]\n"
        "J: !FindInMap [M, !Ref AWS::Region, k]\n"
        "K: !ImportValue other-stack-output\n"
        "L: !Base64 hello\n"
        "M: !Cidr [!GetAtt Vpc.CidrBlock, 6, 5]\n"
        "N: !GetAZs ''\n",
        encoding="utf-8",
    )
    data = load_template(path)
    assert data == {
        "A": {"Ref": "Thing"},
        "B": {"Fn::GetAtt": ["Queue", "Arn"]},
        "C": {"Fn::GetAtt": ["Db", "Endpoint.Address"]},
        "D": {"Fn::GetAtt": ["Queue", "QueueName"]},
        "E": {"Fn::Sub": "arn:${AWS::Partition}:x"},
        "F": {"Fn::Sub": ["${a}-b", {"a": {"Ref": "P"}}]},
        "G": {"Fn::If": ["Cond", {"Fn::Join": ["", ["x", {"Fn::Select": [0, {"Fn::Split": [",", "a,b"]}]}]]},
                         {"Ref": "AWS::NoValue"}]},
        "H": {"Fn::Not": [{"Fn::Equals": [{"Ref": "P"}, ""]}]},
        "I": {"Fn::And": [{"Condition": "C1"}, {"Fn::Or": [{"Condition": "C2"}, {"Condition": "C3"}]}]},
        "J": {"Fn::FindInMap": ["M", {"Ref": "AWS::Region"}, "k"]},
        "K": {"Fn::ImportValue": "other-stack-output"},
        "L": {"Fn::Base64": "hello"},
        "M": {"Fn::Cidr": [{"Fn::GetAtt": ["Vpc", "CidrBlock"]}, 6, 5]},
        "N": {"Fn::GetAZs": ""},
    }


def test_load_template_rejects_duplicate_keys(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text("Resources:\n  A: 1\n  A: 2\n", encoding="utf-8")
    with pytest.raises(yaml.YAMLError, match="duplicate key 'A'"):
        load_template(path)


def test_load_template_default_path_and_env_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PIXIVFLOW_TEMPLATE", raising=False)
    assert default_template_path() == REPO / "template.yaml"
    assert load_template()["Transform"] == "AWS::Serverless-2016-10-31"

    other = tmp_path / "other.yaml"
    other.write_text("Resources:\n  Only: {Type: AWS::SQS::Queue}\n", encoding="utf-8")
    monkeypatch.setenv("PIXIVFLOW_TEMPLATE", str(other))
    assert load_template() == {"Resources": {"Only": {"Type": "AWS::SQS::Queue"}}}


# ------------------------------------------------------------------ globals, layer, functions


def test_globals_target_python313_on_arm64_with_the_layer(tpl: dict[str, Any]) -> None:
    assert tpl["Transform"] == "AWS::Serverless-2016-10-31"
    glob = tpl["Globals"]["Function"]
    assert glob["Runtime"] == "python3.13"
    assert glob["Architectures"] == ["arm64"]
    assert glob["Layers"] == [{"Ref": "CoreLayer"}]
    env = glob["Environment"]["Variables"]
    assert env["POWERTOOLS_SERVICE_NAME"] == "pixivflow"
    # a parameter (default PixivFlow) so two stacks in one account keep their alarms apart (issue 16)
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == {"Ref": "MetricsNamespace"}
    assert tpl["Parameters"]["MetricsNamespace"]["Default"] == "PixivFlow"
    assert env["POWERTOOLS_LOG_LEVEL"] == {"Ref": "LogLevel"}
    assert env["LEDGER_TABLE"] == {"Ref": "LedgerTable"}
    assert env["EXECUTION_QUEUE_URL"] == {"Ref": "ExecutionQueue"}
    assert env["OUTBOX_QUEUE_URL"] == {"Ref": "OutboxQueue"}
    assert env["PIXIVFLOW_CONFIG"] == {"Fn::Sub": "ssm:${ConfigParameterName}"}
    # no secret is named globally: each function is told only the secrets it reads (issue 21)
    assert not {k for k in env if k.endswith(("_PARAMETER", "_SECRETS_PATH"))}
    assert env["RETENTION_DAYS"] == {"Ref": "RetentionDays"}
    assert tpl["Parameters"]["RetentionDays"]["Default"] == 30
    # PixivFlow's switch for a legacy scheduler block reaches every function (issue 22); blank = unset
    assert env["PIXIV_SCHEDULER_ENABLED"] == {"Ref": "PixivSchedulerEnabled"}
    assert tpl["Parameters"]["PixivSchedulerEnabled"]["Default"] == ""


def test_execute_sees_the_artifact_bucket(tpl: dict[str, Any], resources: dict[str, Any]) -> None:
    env = dict(tpl["Globals"]["Function"]["Environment"]["Variables"])
    env.update(props(resources, "ExecuteFunction").get("Environment", {}).get("Variables", {}))
    assert env["ARTIFACT_BUCKET"] == {"Ref": "ArtifactBucket"}


def test_layer_builds_for_python313_arm64(resources: dict[str, Any]) -> None:
    layer = resources["CoreLayer"]
    assert layer["Type"] == "AWS::Serverless::LayerVersion"
    assert layer["Properties"]["ContentUri"] == "shared/"
    assert layer["Properties"]["CompatibleRuntimes"] == ["python3.13"]
    assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]
    # without BuildArchitecture sam build produces an x86_64 layer (toolchain-facts §6); the
    # makefile method is ours (shared/Makefile), so it can ship bytecode (issue 14)
    assert layer["Metadata"] == {"BuildMethod": "makefile", "BuildArchitecture": "arm64"}
    assert (REPO / "shared" / "requirements.txt").is_file()


def test_the_layer_makefile_fetches_arm64_wheels_for_the_runtime_python() -> None:
    import re

    makefile = (REPO / "shared" / "Makefile").read_text()
    rule = makefile[makefile.index("build-CoreLayer:"):]
    assert re.search(r"^PIP_PLATFORM \?= manylinux2014_aarch64$", makefile, re.M)
    assert re.search(r"^LAMBDA_PYTHON \?= 3\.13$", makefile, re.M)
    assert re.search(r"^REQUIREMENTS \?= requirements\.txt$", makefile, re.M)
    assert "--python-version $(LAMBDA_PYTHON) --only-binary=:all:" in rule


def test_the_built_layer_carries_unchecked_hash_bytecode_for_every_module(tmp_path) -> None:
    """Run the makefile's rule (no wheels: an empty requirements file) and read the bytecode
    headers of every module it ships: hash-based and unchecked (PEP 552), so Lambda's read-only
    /opt never makes an import compile."""
    import subprocess
    import sys

    empty = tmp_path / "requirements.txt"
    empty.write_text("")
    version = "%d.%d" % sys.version_info[:2]
    proc = subprocess.run(["make", "--no-print-directory", "-C", str(REPO / "shared"), "build-CoreLayer",
                           f"ARTIFACTS_DIR={tmp_path / 'out'}", f"PYTHON={sys.executable}", "PIP_PLATFORM=",
                           f"LAMBDA_PYTHON={version}", f"REQUIREMENTS={empty}"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    sources = list((tmp_path / "out" / "python" / "pixivflow").rglob("*.py"))
    assert len(sources) > 50
    for src in sources:
        pyc = src.parent / "__pycache__" / f"{src.stem}.{sys.implementation.cache_tag}.pyc"
        assert int.from_bytes(pyc.read_bytes()[4:8], "little") == 0b01, src  # hash-based, unchecked


_IMPORT_EVERY_MODULE = """
import importlib, json, pkgutil, sys
sys.path[:0] = [{layer!r}, {libraries!r}]
import pixivflow
names = sorted(m.name for m in pkgutil.walk_packages(pixivflow.__path__, "pixivflow."))
for name in names:
    importlib.import_module(name)
handlers = {{}}
for fn in {functions!r}:
    spec = importlib.util.spec_from_file_location(fn + "_app", {functions_dir!r} + "/" + fn + "/app.py")
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    handlers[fn] = callable(app.handler)
print(json.dumps({{"origin": pixivflow.__file__, "modules": names, "handlers": handlers,
                  "loaded": sorted(m for m in sys.modules if m.startswith("pixivflow"))}}))
"""


@pytest.mark.size("large")  # builds the layer and imports every module of it in a fresh interpreter
def test_the_built_layer_is_production_code_that_imports_without_the_workshop(tmp_path) -> None:
    """The layer leaves out what the repository keeps for people (the embedded runtime and the CLI),
    and still imports whole: every module of the package it ships, and each function's handler, in
    an interpreter that sees the built layer and the libraries only (``-S``: not the checkout the dev
    install points at)."""
    import subprocess
    import sys
    import sysconfig

    empty = tmp_path / "requirements.txt"
    empty.write_text("")
    version = "%d.%d" % sys.version_info[:2]
    out = tmp_path / "out"
    proc = subprocess.run(["make", "--no-print-directory", "-C", str(REPO / "shared"), "build-CoreLayer",
                           f"ARTIFACTS_DIR={out}", f"PYTHON={sys.executable}", "PIP_PLATFORM=",
                           f"LAMBDA_PYTHON={version}", f"REQUIREMENTS={empty}"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    package = out / "python" / "pixivflow"
    assert not (package / "local").exists() and not (package / "cli").exists()
    assert (package / "handlers").is_dir() and (package / "domain").is_dir()

    code = _IMPORT_EVERY_MODULE.format(layer=str(out / "python"), libraries=sysconfig.get_paths()["purelib"],
                                       functions=sorted(FUNCTIONS.values()), functions_dir=str(REPO / "functions"))
    env = {"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
    run = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen["origin"].startswith(str(package))
    assert len(seen["modules"]) > 50
    assert not [m for m in seen["loaded"] if m.startswith(("pixivflow.local", "pixivflow.cli"))]
    assert seen["handlers"] == {name: True for name in FUNCTIONS.values()}


def test_the_layer_refuses_bytecode_from_another_python(tmp_path) -> None:
    import subprocess
    import sys

    proc = subprocess.run(["make", "--no-print-directory", "-C", str(REPO / "shared"), "build-CoreLayer",
                           f"ARTIFACTS_DIR={tmp_path}", f"PYTHON={sys.executable}", "LAMBDA_PYTHON=2.7"],
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "bytecode must be compiled by Python 2.7" in proc.stderr
    assert not (tmp_path / "python").exists()


@pytest.mark.parametrize("logical_id,name", sorted(FUNCTIONS.items()))
def test_function_code_and_handler(resources: dict[str, Any], logical_id: str, name: str) -> None:
    p = props(resources, logical_id)
    assert resources[logical_id]["Type"] == "AWS::Serverless::Function"
    assert p["CodeUri"] == f"functions/{name}/"
    assert p["Handler"] == "app.handler"
    assert (REPO / p["CodeUri"] / "app.py").is_file(), f"{p['CodeUri']}app.py is referenced but missing"


def test_exactly_the_five_functions(resources: dict[str, Any]) -> None:
    declared = {lid for lid, r in resources.items() if r["Type"] == "AWS::Serverless::Function"}
    assert declared == set(FUNCTIONS)


def _http_routes(resources: dict[str, Any], logical_id: str) -> set[tuple[str, str]]:
    routes = set()
    for event in props(resources, logical_id)["Events"].values():
        if event["Type"] == "HttpApi":
            assert event["Properties"]["ApiId"] == {"Ref": "HttpApi"}
            routes.add((event["Properties"]["Method"].upper(), event["Properties"]["Path"]))
    return routes


def test_http_routes(resources: dict[str, Any]) -> None:
    """One ANY route per path the shell serves (issue 21 item 4: a wrong method reaches the shell's
    405 + Allow instead of API Gateway's 404), and no path the shell does not serve."""
    from pixivflow.http import jobs_api, trigger_api

    assert resources["HttpApi"]["Type"] == "AWS::Serverless::HttpApi"
    for logical_id, shell in (("TriggerFunction", trigger_api.shell), ("JobEventsFunction", jobs_api.shell)):
        served = {re.sub(r"<(\w+)>", r"{\1}", spec.rule) for spec in shell.routes}
        assert _http_routes(resources, logical_id) == {("ANY", path) for path in served}
    assert ("ANY", "/ui/login") in _http_routes(resources, "TriggerFunction")
    assert ("ANY", "/jobs/{jobId}/events/ack") in _http_routes(resources, "JobEventsFunction")


# ------------------------------------------------------------------ queues and consumers


def _sqs_consumers(resources: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """queue logical id -> (consuming function, SQS event properties)."""
    consumers: dict[str, tuple[str, dict[str, Any]]] = {}
    for lid in FUNCTIONS:
        for event in props(resources, lid).get("Events", {}).values():
            if event["Type"] == "SQS":
                queue = getatt_target(event["Properties"]["Queue"])
                assert queue not in consumers, f"{queue} has two consumers"
                consumers[queue] = (lid, event["Properties"])
    return consumers


def test_sqs_consumers_report_partial_failures(tpl: dict[str, Any], resources: dict[str, Any]) -> None:
    consumers = _sqs_consumers(resources)
    assert {q: c[0] for q, c in consumers.items()} == {
        "ExecutionQueue": "ExecuteFunction",
        "OutboxQueue": "DeliverFunction",
    }
    for queue, (_, event) in consumers.items():
        assert event["FunctionResponseTypes"] == ["ReportBatchItemFailures"], queue
        assert 1 <= event["BatchSize"] <= 10, queue
        # a parameter each (issue 25: the values that reach a rate are named by make bench), within
        # the event source mapping's range of 2 to 1,000, 10 by default
        knob = event["ScalingConfig"]["MaximumConcurrency"]
        name = knob["Ref"]
        param = tpl["Parameters"][name]
        assert (param["Type"], param["Default"], param["MinValue"], param["MaxValue"]) == ("Number", 10, 2, 1000), queue
        assert evaluate(tpl, knob, parameters(tpl, **{name: 400})) == 400, queue


def test_visibility_timeout_is_six_times_the_consumer_timeout(
    tpl: dict[str, Any], resources: dict[str, Any]
) -> None:
    for queue, (function, _) in _sqs_consumers(resources).items():
        visibility = int(props(resources, queue)["VisibilityTimeout"])
        assert visibility >= 6 * function_timeout(tpl, function), (queue, function)


def test_queues_redrive_to_their_dlq_after_five_receives(resources: dict[str, Any]) -> None:
    for queue, dlq in QUEUE_DLQ.items():
        redrive = props(resources, queue)["RedrivePolicy"]
        assert getatt_target(redrive["deadLetterTargetArn"]) == dlq
        assert redrive["deadLetterTargetArn"]["Fn::GetAtt"][1] == "Arn"
        assert int(redrive["maxReceiveCount"]) == 5
    for lid, res in resources.items():
        if res["Type"] == "AWS::SQS::Queue":
            assert res["Properties"]["SqsManagedSseEnabled"] is True, lid
            assert "DelaySeconds" not in res["Properties"], f"{lid}: the first message is never delayed"
    for dlq in DLQS:
        assert resources[dlq]["Type"] == "AWS::SQS::Queue"
        assert int(props(resources, dlq)["MessageRetentionPeriod"]) == 14 * 24 * 3600


# ------------------------------------------------------------------ ledger


def test_ledger_table_keys_gsis_ttl_pitr(resources: dict[str, Any]) -> None:
    table = resources["LedgerTable"]
    assert table["Type"] == "AWS::DynamoDB::Table"
    p = table["Properties"]
    assert p["BillingMode"] == "PAY_PER_REQUEST"
    assert p["KeySchema"] == [
        {"AttributeName": "pk", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ]
    types = {a["AttributeName"]: a["AttributeType"] for a in p["AttributeDefinitions"]}
    expected_attrs = {"pk", "sk"} | {k for keys in GSIS.values() for k in keys}
    assert types == {name: "S" for name in expected_attrs}

    gsis = {g["IndexName"]: g for g in p["GlobalSecondaryIndexes"]}
    assert set(gsis) == set(GSIS)
    for name, (hash_key, range_key) in GSIS.items():
        assert gsis[name]["KeySchema"] == [
            {"AttributeName": hash_key, "KeyType": "HASH"},
            {"AttributeName": range_key, "KeyType": "RANGE"},
        ], name
        # FailedCells carries the reason its page filters on; every other index its keys only.
        projection = ({"ProjectionType": "INCLUDE", "NonKeyAttributes": ["terminalReasonCode"]} if name == "FailedCells"
                      else {"ProjectionType": "KEYS_ONLY"})
        assert gsis[name]["Projection"] == projection, name
    assert "LocalSecondaryIndexes" not in p

    assert p["TimeToLiveSpecification"] == {"AttributeName": "expiresAt", "Enabled": True}
    assert p["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert table.get("DeletionPolicy") == "Retain", "the ledger is the source of truth"
    assert table.get("UpdateReplacePolicy") == "Retain"


# ------------------------------------------------------------------ scheduling


SWEEP_INTERVALS = {1: "rate(1 minute)", 2: "rate(2 minutes)", 5: "rate(5 minutes)", 10: "rate(10 minutes)"}


def test_the_sweep_interval_is_a_parameter_whose_default_keeps_the_minute(tpl: dict[str, Any]) -> None:
    p = tpl["Parameters"]["SweepIntervalMinutes"]
    assert p["Type"] == "Number" and p["Default"] == 1  # existing stacks keep the minute sweep
    assert p["AllowedValues"] == list(SWEEP_INTERVALS)
    assert sorted(int(k) for k in tpl["Mappings"]["SweepIntervals"]) == list(SWEEP_INTERVALS)  # no value without its row


@pytest.mark.parametrize("minutes", list(SWEEP_INTERVALS))
def test_stall_sweep_runs_every_interval_without_retries_and_its_alarm_period_follows(
        tpl: dict[str, Any], resources: dict[str, Any], minutes: int) -> None:
    # "alone" is the lease item's job now (DESIGN §4): reserved concurrency is an optional
    # parameter, see test_no_resource_requires_reserved_concurrency.
    params = parameters(tpl, SweepIntervalMinutes=minutes)
    p = evaluate(tpl, props(resources, "StallSweepFunction"), params)
    schedules = [e["Properties"] for e in p["Events"].values() if e["Type"] == "ScheduleV2"]
    assert len(schedules) == 1
    assert schedules[0]["ScheduleExpression"] == SWEEP_INTERVALS[minutes]  # Scheduler refuses "rate(1 minutes)"
    assert schedules[0]["RetryPolicy"]["MaximumRetryAttempts"] == 0
    assert p["EventInvokeConfig"]["MaximumRetryAttempts"] == 0
    # a tick is never kept waiting past the next one (and the floor both services accept is 60 s)
    assert schedules[0]["RetryPolicy"]["MaximumEventAgeInSeconds"] == minutes * 60
    assert p["EventInvokeConfig"]["MaximumEventAgeInSeconds"] == minutes * 60
    # the sweep is told its own interval (services.sweep.sweep_lease_ms checks its lease against it)
    assert p["Environment"]["Variables"]["SWEEP_INTERVAL_MS"] == str(minutes * 60_000)
    health = evaluate(tpl, props(resources, "HealthAlarm"), params)
    assert {i: st["Period"] for i, st in expression_inputs(health).items()} == dict.fromkeys(("health", "ticks", "failed"), minutes * 60)
    # two bad periods of three, whatever their length: one period may lack its tick at a period's edge
    assert (health["EvaluationPeriods"], health["DatapointsToAlarm"]) == (3, 2)
    assert health["EvaluationPeriods"] * minutes * 60 <= 86_400  # CloudWatch's limit below hourly periods


@pytest.mark.parametrize("minutes", list(SWEEP_INTERVALS))
def test_no_alarm_on_the_sweeps_metrics_expects_them_more_often_than_the_sweep_runs(
        tpl: dict[str, Any], resources: dict[str, Any], minutes: int) -> None:
    """An alarm that treats a missing data point as breaching, on a metric only the sweep's ticks
    produce, must not look at periods shorter than the interval: it would page in healthy periods
    that simply had no tick. Alarms that treat missing data as not breaching expect nothing."""
    params = parameters(tpl, SweepIntervalMinutes=minutes)
    sweep_made = {("AWS/Lambda", "Invocations"), ("AWS/Lambda", "Errors"), ("Ref:MetricsNamespace", "Health"),
                  ("Ref:MetricsNamespace", "MissedFires"), ("Ref:MetricsNamespace", "Stalls")}
    checked = 0
    for lid, raw in alarms(resources).items():
        p = evaluate(tpl, raw, params)
        # the metric as written (its namespace a Ref), the period as this parameter value deploys it
        stats = [(s, expression_inputs(p)[i]) for i, s in expression_inputs(raw).items()] if "Metrics" in raw \
            else [({"Metric": raw}, {"Period": p["Period"]})]
        for written, st in stats:
            namespace, name, dims = metric_key(written["Metric"])
            if (namespace, name) not in sweep_made or (name in ("Invocations", "Errors") and dims != (("FunctionName", "StallSweepFunction"),)):
                continue
            checked += 1
            if p["TreatMissingData"] != "notBreaching":
                assert st["Period"] >= minutes * 60, (lid, name)
    assert checked >= 7  # HealthAlarm's three inputs, MissedFires, the two Stalls alarms, the sweep's Errors


def test_trigger_async_invocations_never_back_fill(resources: dict[str, Any]) -> None:
    invoke = props(resources, "TriggerFunction")["EventInvokeConfig"]
    assert 60 <= invoke["MaximumEventAgeInSeconds"] <= 2700  # half the grace window (DESIGN §6)
    assert invoke["MaximumRetryAttempts"] <= 2
    assert getatt_target(invoke["DestinationConfig"]["OnFailure"]["Destination"]) == "SchedulerDLQ"


def test_scheduler_invoke_role_targets_only_the_trigger(resources: dict[str, Any]) -> None:
    role = props(resources, "SchedulerInvokeRole")
    principals = [s["Principal"]["Service"] for s in role["AssumeRolePolicyDocument"]["Statement"]]
    assert principals == ["scheduler.amazonaws.com"]
    grants = {
        action: [getatt_target(r) for r in as_list(s["Resource"])]
        for policy in role["Policies"]
        for s in as_list(policy["PolicyDocument"]["Statement"])
        for action in as_list(s["Action"])
    }
    assert grants == {"lambda:InvokeFunction": ["TriggerFunction"], "sqs:SendMessage": ["SchedulerDLQ"]}


# ------------------------------------------------------------------ alarms, bucket, outputs


def test_one_alarm_per_dlq(resources: dict[str, Any]) -> None:
    watched: dict[str, dict[str, Any]] = {}
    for res in resources.values():
        if res["Type"] != "AWS::CloudWatch::Alarm" or res["Properties"].get("MetricName") != "ApproximateNumberOfMessagesVisible":
            continue
        p = res["Properties"]
        (dimension,) = p["Dimensions"]
        assert dimension["Name"] == "QueueName"
        watched[getatt_target(dimension["Value"])] = p
    assert set(watched) == set(DLQS)
    for dlq, p in watched.items():
        assert p["Namespace"] == "AWS/SQS", dlq
        assert p["MetricName"] == "ApproximateNumberOfMessagesVisible", dlq
        assert p["Period"] == 300 and p["EvaluationPeriods"] == 1, dlq
        assert p["Threshold"] == 1 and p["ComparisonOperator"] == "GreaterThanOrEqualToThreshold", dlq


def test_artifact_bucket_is_private_encrypted_and_expires(resources: dict[str, Any]) -> None:
    p = props(resources, "ArtifactBucket")
    assert resources["ArtifactBucket"]["Type"] == "AWS::S3::Bucket"
    assert p["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert p["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    rules = p["LifecycleConfiguration"]["Rules"]
    assert any(r["Status"] == "Enabled" and r["ExpirationInDays"] == {"Ref": "RetentionDays"} for r in rules)


def test_outputs(tpl: dict[str, Any]) -> None:
    outputs = tpl["Outputs"]
    assert set(outputs) >= {
        "ApiUrl",
        "LedgerTableName",
        "ExecutionQueueUrl",
        "OutboxQueueUrl",
        "TriggerFunctionArn",
        "SchedulerInvokeRoleArn",
        "SchedulerDLQArn",
        "ArtifactBucketName",
    }
    assert outputs["TriggerFunctionArn"]["Value"] == {"Fn::GetAtt": ["TriggerFunction", "Arn"]}
    assert outputs["SchedulerInvokeRoleArn"]["Value"] == {"Fn::GetAtt": ["SchedulerInvokeRole", "Arn"]}
    assert outputs["SchedulerDLQArn"]["Value"] == {"Fn::GetAtt": ["SchedulerDLQ", "Arn"]}
    assert outputs["LedgerTableName"]["Value"] == {"Ref": "LedgerTable"}


# ------------------------------------------------------------------ IAM


def test_no_wildcard_actions_anywhere(resources: dict[str, Any]) -> None:
    statements = all_statements(resources)
    assert statements, "no inline policy statements found"
    for lid, statement in statements:
        for action in as_list(statement["Action"]):
            assert "*" not in action, f"{lid}: wildcard action {action!r}"
        assert "NotAction" not in statement, lid


def test_functions_use_no_broad_managed_policies(resources: dict[str, Any]) -> None:
    for lid in FUNCTIONS:
        for policy in as_list(props(resources, lid).get("Policies", [])):
            text = json.dumps(policy)
            for broad in BROAD_POLICIES:
                assert broad not in text, f"{lid} uses {broad}"


def test_dynamodb_grants_are_item_level_on_the_ledger_only(resources: dict[str, Any]) -> None:
    table_arn = {"Fn::GetAtt": ["LedgerTable", "Arn"]}
    index_arns = [{"Fn::Sub": "${LedgerTable.Arn}/index/" + name} for name in GSIS]
    for lid in FUNCTIONS:
        dynamo = [s for s in inline_statements(resources, lid)
                  if any(a.startswith("dynamodb:") for a in as_list(s["Action"]))]
        assert dynamo, f"{lid} cannot reach the ledger"
        for statement in dynamo:
            if statement.get("Sid") == "SweepIndexProbe":  # an idle tick's one-entry reads (issue 25): the indexes only
                assert (lid, as_list(statement["Action"]), as_list(statement["Resource"])) == (
                    "StallSweepFunction", ["dynamodb:Scan"], index_arns)
                continue
            assert set(as_list(statement["Action"])) <= DYNAMODB_DATA_ACTIONS, lid
            for resource in as_list(statement["Resource"]):
                assert resource == table_arn or resource in index_arns, (lid, resource)
        # every function claims, updates and reads under conditions
        for action in ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Query",
                       "dynamodb:ConditionCheckItem"):
            assert table_arn in allowed(resources, lid, action), (lid, action)
        assert set(map(json.dumps, index_arns)) <= set(
            map(json.dumps, allowed(resources, lid, "dynamodb:Query"))
        ), lid
        # The operator page reads items and index pages (tests/e2e/operator/test_jobs_page_reads.py):
        # only the sweep's one-entry index probe scans.
        assert "dynamodb:Scan" not in json.dumps([s for s in dynamo if s.get("Sid") != "SweepIndexProbe"]), lid


@pytest.mark.parametrize(
    "logical_id,queues",
    [
        ("TriggerFunction", {"ExecutionQueue", "OutboxQueue"}),
        ("ExecuteFunction", {"ExecutionQueue", "OutboxQueue"}),
        ("DeliverFunction", {"ExecutionQueue", "OutboxQueue"}),
        ("StallSweepFunction", {"ExecutionQueue", "OutboxQueue"}),
        ("JobEventsFunction", {"ExecutionQueue", "OutboxQueue"}),
    ],
)
def test_send_message_grants(resources: dict[str, Any], logical_id: str, queues: set[str]) -> None:
    granted = {getatt_target(r) for r in allowed(resources, logical_id, "sqs:SendMessage")}
    assert granted == queues


def _ssm_parameters(resources: dict[str, Any], logical_id: str) -> set[str]:
    names = set()
    for resource in allowed(resources, logical_id, "ssm:GetParameter"):
        sub = resource["Fn::Sub"]
        assert sub.startswith("arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter${"), sub
        names.add(sub.rsplit("${", 1)[1].rstrip("}"))
    return names


def test_ssm_grants_name_only_the_parameters_each_function_reads(
    tpl: dict[str, Any], resources: dict[str, Any]
) -> None:
    # Each function's SSM read paths (issue 21, README "Security"): route tokens (a route's
    # tokenParameter) and the job event callback signing secret are read only where deliveries
    # and callbacks are sent: deliver. trigger's drain route queues due rows for deliver, so
    # trigger reads its config and its two bearer tokens only. The Pixiv account secrets have a
    # path of their own, read by execute alone.
    assert _ssm_parameters(resources, "TriggerFunction") == {
        "ConfigParameterName", "TriggerTokenParameterName", "JobsTokenParameterName"}
    assert _ssm_parameters(resources, "JobEventsFunction") == {"ConfigParameterName", "JobsTokenParameterName"}
    assert _ssm_parameters(resources, "DeliverFunction") == {"ConfigParameterName", "RouteSecretsPath}/*",
                                                            "CallbackSigningSecretParameterName"}
    assert _ssm_parameters(resources, "ExecuteFunction") == {"ConfigParameterName", "PixivSecretsPath}/*"}
    assert _ssm_parameters(resources, "StallSweepFunction") == {"ConfigParameterName"}
    for name in ("ConfigParameterName", "TriggerTokenParameterName", "JobsTokenParameterName", "RouteSecretsPath",
                 "PixivSecretsPath", "CallbackSigningSecretParameterName"):
        # the ARN is built as parameter${Name}: names must start with "/"
        assert tpl["Parameters"][name]["AllowedPattern"].startswith("^/"), name
        assert tpl["Parameters"][name]["Default"].startswith("/"), name


def test_only_execute_writes_artifacts(resources: dict[str, Any]) -> None:
    assert allowed(resources, "ExecuteFunction", "s3:PutObject") == [{"Fn::Sub": "${ArtifactBucket.Arn}/*"}]
    # The routes that upload or link files read them, and delete them once delivered
    # (deleteAfterDelivery): deliver alone (trigger's drain route only queues rows for it).
    # Nobody else touches the bucket.
    for lid in ("DeliverFunction",):
        assert "s3:PutObject" not in json.dumps(inline_statements(resources, lid)), lid
        for action in ("s3:GetObject", "s3:DeleteObject"):
            assert allowed(resources, lid, action) == [{"Fn::Sub": "${ArtifactBucket.Arn}/*"}], (lid, action)
        assert allowed(resources, lid, "s3:ListBucket") == [{"Fn::GetAtt": ["ArtifactBucket", "Arn"]}], lid
    for lid in set(FUNCTIONS) - {"ExecuteFunction", "DeliverFunction"}:
        assert "s3:" not in json.dumps(inline_statements(resources, lid)), lid


# What each function is told about secrets (DESIGN §12 names) and what its policy lets it read
# are the same list: a name in its environment is granted, and nothing else is.
SECRET_ENV = {
    "TRIGGER_TOKEN_PARAMETER": "TriggerTokenParameterName", "JOBS_TOKEN_PARAMETER": "JobsTokenParameterName",
    "CALLBACK_SIGNING_SECRET_PARAMETER": "CallbackSigningSecretParameterName",
    "ROUTE_SECRETS_PATH": "RouteSecretsPath}/*", "PIXIV_SECRETS_PATH": "PixivSecretsPath}/*",
}


@pytest.mark.parametrize("logical_id, names", [
    ("TriggerFunction", {"TRIGGER_TOKEN_PARAMETER", "JOBS_TOKEN_PARAMETER"}),
    ("ExecuteFunction", {"PIXIV_SECRETS_PATH"}),
    ("DeliverFunction", {"ROUTE_SECRETS_PATH", "CALLBACK_SIGNING_SECRET_PARAMETER"}),
    ("StallSweepFunction", set()),
    ("JobEventsFunction", {"JOBS_TOKEN_PARAMETER"}),
])
def test_each_function_is_told_exactly_the_secrets_it_may_read(resources: dict[str, Any], logical_id: str,
                                                               names: set[str]) -> None:
    env = resources[logical_id]["Properties"].get("Environment", {}).get("Variables", {})
    told = {k for k in env if k in SECRET_ENV}
    assert told == names
    for name in told:
        expected = SECRET_ENV[name].removesuffix("}/*")
        assert env[name] == {"Ref": expected}, name
    assert _ssm_parameters(resources, logical_id) - {"ConfigParameterName"} == {SECRET_ENV[n] for n in names}


def test_only_execute_writes_a_parameter_and_only_pixiv_ones(tpl: dict[str, Any], resources: dict[str, Any]) -> None:
    assert allowed(resources, "ExecuteFunction", "ssm:PutParameter") == [
        {"Fn::Sub": "arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter${PixivSecretsPath}/PIXIV_*"}]
    for lid in set(FUNCTIONS) - {"ExecuteFunction"}:
        assert "ssm:PutParameter" not in json.dumps(inline_statements(resources, lid)), lid
    # the two secret paths may not be one (a CloudFormation rule refuses the stack)
    [assertion] = tpl["Rules"]["SecretPathsApart"]["Assertions"]
    assert assertion["Assert"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "RouteSecretsPath"}, {"Ref": "PixivSecretsPath"}]}]}
    assert tpl["Parameters"]["PixivSecretsPath"]["Default"] != tpl["Parameters"]["RouteSecretsPath"]["Default"]


# ------------------------------------------------------------------ operable in production (issue 16)
#
# Conditions are evaluated the way CloudFormation would, under the template's parameter defaults
# (plus overrides), so "off by default" and "one parameter away" are checked, not just spelled.

NO_VALUE = object()
ALARM_ACTIONS = [{"Fn::If": ["HasAlarmTopic", {"Ref": "AlarmTopicArn"}, {"Ref": "AlarmTopic"}]}]
# The operator CLI commands alarm descriptions may point at (the CLI's documented surface).
CLI_COMMANDS = {
    "pixivflow slots show <slotId>",
    "pixivflow slots list --status failed",
    "pixivflow outbox list --dead",
    "pixivflow schedules sync --dry-run",
}
CLOUDWATCH_RETENTION_DAYS = {1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827,
                             2192, 2557, 2922, 3288, 3653}


def parameters(tpl: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    values = {name: p.get("Default") for name, p in tpl["Parameters"].items()}
    values.update(overrides)
    return values


def evaluate(tpl: dict[str, Any], value: Any, params: dict[str, Any]) -> Any:
    """Resolve parameter Refs, conditions and Fn::If; other intrinsics are left as they are."""
    if isinstance(value, list):
        items = [evaluate(tpl, v, params) for v in value]
        return [v for v in items if v is not NO_VALUE]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        (key, arg), = value.items()
        if key == "Ref":
            if arg == "AWS::NoValue":
                return NO_VALUE
            return params[arg] if arg in params else value
        if key == "Condition":
            return evaluate(tpl, tpl["Conditions"][arg], params)
        if key == "Fn::FindInMap":
            mapping, top, second = (evaluate(tpl, v, params) for v in arg)
            return tpl["Mappings"][mapping][str(top)][second]  # a Ref to a Number parameter is its text
        if key == "Fn::Equals":
            left, right = (evaluate(tpl, v, params) for v in arg)
            return str(left) == str(right)
        if key == "Fn::Not":
            return not evaluate(tpl, arg[0], params)
        if key == "Fn::And":
            return all(evaluate(tpl, v, params) for v in arg)
        if key == "Fn::Or":
            return any(evaluate(tpl, v, params) for v in arg)
        if key == "Fn::If":
            name, when_true, when_false = arg
            return evaluate(tpl, when_true if condition(tpl, name, params) else when_false, params)
    out = {k: evaluate(tpl, v, params) for k, v in value.items()}
    return {k: v for k, v in out.items() if v is not NO_VALUE}


def condition(tpl: dict[str, Any], name: str, params: dict[str, Any]) -> bool:
    return bool(evaluate(tpl, tpl["Conditions"][name], params))


def alarms(resources: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {lid: r["Properties"] for lid, r in resources.items() if r["Type"] == "AWS::CloudWatch::Alarm"}


def _named(value: Any) -> str:
    """A dimension value as text: a literal, or the logical id it refers to."""
    if isinstance(value, dict) and "Ref" in value:
        return value["Ref"]
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return ".".join(value["Fn::GetAtt"])
    return str(value)


def metric_key(m: dict[str, Any]) -> tuple[str, str, tuple[tuple[str, str], ...]]:
    namespace = "Ref:" + m["Namespace"]["Ref"] if isinstance(m["Namespace"], dict) else m["Namespace"]
    dims = tuple(sorted((d["Name"], _named(d["Value"])) for d in m.get("Dimensions", [])))
    return namespace, m["MetricName"], dims


def expression_inputs(p: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """An alarm on an expression: its metric inputs by id (each a MetricStat)."""
    return {m["Id"]: m["MetricStat"] for m in p["Metrics"] if "MetricStat" in m}


def watched_metric(p: dict[str, Any]) -> tuple[str, str, tuple[tuple[str, str], ...]]:
    """The metric an alarm is about: its own, or for an expression (HealthAlarm) its input in the
    stack's namespace (its other inputs are the sweep function's own metrics)."""
    if "Metrics" not in p:
        return metric_key(p)
    (custom,) = [s["Metric"] for s in expression_inputs(p).values() if isinstance(s["Metric"]["Namespace"], dict)]
    return metric_key(custom)


def test_log_retention_parameter_defaults_to_30_days(tpl: dict[str, Any]) -> None:
    p = tpl["Parameters"]["LogRetentionDays"]
    assert p["Type"] == "Number" and p["Default"] == 30
    assert set(p["AllowedValues"]) == CLOUDWATCH_RETENTION_DAYS  # what CloudWatch Logs accepts


def test_every_function_logs_json_to_its_own_log_group_that_expires(tpl: dict[str, Any], resources: dict[str, Any]) -> None:
    groups = {}
    for lid in FUNCTIONS:
        cfg = props(resources, lid)["LoggingConfig"]
        assert cfg["LogFormat"] == "JSON", lid
        assert cfg["ApplicationLogLevel"] == {"Fn::FindInMap": ["LambdaLogLevels", {"Ref": "LogLevel"}, "Level"]}, lid
        assert cfg["SystemLogLevel"] == "INFO", lid  # keep the platform REPORT lines (duration, memory)
        group = cfg["LogGroup"]["Ref"]
        assert resources[group]["Type"] == "AWS::Logs::LogGroup", lid
        groups[lid] = group
    assert len(set(groups.values())) == len(FUNCTIONS)
    log_groups = [lid for lid, r in resources.items() if r["Type"] == "AWS::Logs::LogGroup"]
    assert set(log_groups) == set(groups.values()) | {"ApiAccessLogGroup"}
    for lid in log_groups:
        assert props(resources, lid)["RetentionInDays"] == {"Ref": "LogRetentionDays"}, lid
    assert "LoggingConfig" not in tpl["Globals"]["Function"]


def test_lambda_log_level_filter_matches_powertools_for_every_log_level(tpl: dict[str, Any]) -> None:
    # With the JSON format Lambda drops application lines below ApplicationLogLevel, and Powertools
    # then obeys AWS_LAMBDA_LOG_LEVEL: the mapping must give back the same level for every choice.
    from aws_lambda_powertools.shared.constants import LAMBDA_ADVANCED_LOGGING_LEVELS

    mapping = tpl["Mappings"]["LambdaLogLevels"]
    assert set(mapping) == set(tpl["Parameters"]["LogLevel"]["AllowedValues"])
    for level, entry in mapping.items():
        assert LAMBDA_ADVANCED_LOGGING_LEVELS[entry["Level"]] == level, level


def test_http_api_access_log_is_an_audit_trail_without_the_authorization_header(resources: dict[str, Any]) -> None:
    settings = props(resources, "HttpApi")["AccessLogSettings"]
    assert settings["DestinationArn"] == {"Fn::GetAtt": ["ApiAccessLogGroup", "Arn"]}
    assert props(resources, "ApiAccessLogGroup")["RetentionInDays"] == {"Ref": "LogRetentionDays"}
    line = json.loads(settings["Format"])  # one JSON object per request
    assert set(line) == {"requestId", "requestTime", "sourceIp", "userAgent", "method", "routeKey", "path", "protocol",
                         "status", "responseLength", "latencyMs", "integrationLatencyMs", "integrationError"}
    assert line["requestId"] == "$context.requestId"
    assert line["routeKey"] == "$context.routeKey"
    assert line["status"] == "$context.status"
    assert line["latencyMs"] == "$context.responseLatency"
    assert line["sourceIp"] == "$context.identity.sourceIp"
    # Only API Gateway's own context variables: nothing the caller sent (headers, body, query).
    for key, variable in line.items():
        assert re.fullmatch(r"\$context\.[A-Za-z.]+", variable), key
    assert "authorization" not in settings["Format"].lower()
    assert "header" not in settings["Format"].lower()


def test_alarm_topic_is_created_without_an_external_one_and_alarm_email_subscribes_to_it(
    tpl: dict[str, Any], resources: dict[str, Any]
) -> None:
    topic = resources["AlarmTopic"]
    assert topic["Type"] == "AWS::SNS::Topic" and topic["Condition"] == "CreateAlarmTopic"
    sub = resources["AlarmEmailSubscription"]
    assert sub["Type"] == "AWS::SNS::Subscription" and sub["Condition"] == "HasAlarmEmail"
    assert sub["Properties"] == {"TopicArn": {"Ref": "AlarmTopic"}, "Protocol": "email", "Endpoint": {"Ref": "AlarmEmail"}}
    policy = resources["AlarmTopicPolicy"]
    assert policy["Condition"] == "CreateAlarmTopic"
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    assert statement["Action"] == "sns:Publish" and statement["Resource"] == {"Ref": "AlarmTopic"}
    assert statement["Condition"] == {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}

    default = parameters(tpl)
    assert default["AlarmTopicArn"] == "" and default["AlarmEmail"] == ""
    assert condition(tpl, "CreateAlarmTopic", default) and not condition(tpl, "HasAlarmEmail", default)
    email = parameters(tpl, AlarmEmail="ops@example.com")
    assert condition(tpl, "CreateAlarmTopic", email) and condition(tpl, "HasAlarmEmail", email)
    external = parameters(tpl, AlarmTopicArn="arn:aws:sns:us-east-1:123456789012:ops", AlarmEmail="ops@example.com")
    assert not condition(tpl, "CreateAlarmTopic", external) and not condition(tpl, "HasAlarmEmail", external)

    email_pattern = re.compile(tpl["Parameters"]["AlarmEmail"]["AllowedPattern"])
    assert email_pattern.fullmatch("") and email_pattern.fullmatch("ops@example.com")
    assert not email_pattern.fullmatch("not an address")
    arn_pattern = re.compile(tpl["Parameters"]["AlarmTopicArn"]["AllowedPattern"])
    assert arn_pattern.fullmatch("") and arn_pattern.fullmatch("arn:aws:sns:us-east-1:123456789012:ops")
    assert not arn_pattern.fullmatch("ops")
    output = tpl["Outputs"]["AlarmTopic"]["Value"]
    assert evaluate(tpl, output, default) == {"Ref": "AlarmTopic"}
    assert evaluate(tpl, output, external) == "arn:aws:sns:us-east-1:123456789012:ops"


def test_alarms_watch_every_operator_fact_and_nothing_twice(resources: dict[str, Any]) -> None:
    from typing import get_args

    from pixivflow.domain.outcome_record import (BUSINESS_CANCELLED, BUSINESS_DUPLICATE_ONLY, BUSINESS_FAILED,
                                                 BUSINESS_NO_CANDIDATE, BUSINESS_PARTIAL_SUCCESS, BUSINESS_SUCCESS,
                                                 is_alertable)
    from pixivflow.domain.stall import Rule

    service = ("service", "pixivflow")  # Powertools adds it to every EMF metric (POWERTOOLS_SERVICE_NAME)
    business = (BUSINESS_SUCCESS, BUSINESS_PARTIAL_SUCCESS, BUSINESS_NO_CANDIDATE, BUSINESS_DUPLICATE_ONLY,
                BUSINESS_CANCELLED, BUSINESS_FAILED)
    custom = "Ref:MetricsNamespace"
    expected = {("AWS/SQS", "ApproximateNumberOfMessagesVisible", (("QueueName", f"{q}.QueueName"),)) for q in DLQS}
    expected |= {("AWS/SQS", "ApproximateAgeOfOldestMessage", (("QueueName", f"{q}.QueueName"),)) for q in QUEUE_DLQ}
    expected |= {("AWS/Lambda", metric, (("FunctionName", lid),)) for lid in FUNCTIONS for metric in ("Errors", "Throttles")}
    expected |= {(custom, "AlertableOutcomes", tuple(sorted([("status", s), service]))) for s in business if is_alertable(s)}
    expected |= {(custom, "MissedFires", (service,))}
    expected |= {(custom, "Health", (service,))}
    expected |= {(custom, "Stalls", tuple(sorted([("rule", rule), service]))) for rule in get_args(Rule)}
    watched = [watched_metric(p) for p in alarms(resources).values()]
    assert len(watched) == len(set(watched)), "two alarms watch the same metric"
    assert set(watched) == expected


def test_every_alarm_notifies_the_alarm_topic_and_names_a_cli_command(tpl: dict[str, Any], resources: dict[str, Any]) -> None:
    default = parameters(tpl)
    external = parameters(tpl, AlarmTopicArn="arn:aws:sns:us-east-1:123456789012:ops")
    for lid, p in alarms(resources).items():
        assert p["AlarmActions"] == ALARM_ACTIONS, lid
        assert p["OKActions"] == ALARM_ACTIONS, lid
        assert evaluate(tpl, p["AlarmActions"], default) == [{"Ref": "AlarmTopic"}], lid
        assert evaluate(tpl, p["AlarmActions"], external) == ["arn:aws:sns:us-east-1:123456789012:ops"], lid
        assert p["ComparisonOperator"] == "GreaterThanOrEqualToThreshold", lid
        # a quiet system sends no data points, which is no alarm; but HealthAlarm's expression has a
        # point every interval the sweep runs (its Invocations), so its silence is the sweep having stopped
        assert p["TreatMissingData"] == ("breaching" if lid == "HealthAlarm" else "notBreaching"), lid
        if lid == "HealthAlarm":  # per-interval inputs (default: a minute): two bad periods of three page, one blip does not
            assert (p["EvaluationPeriods"], p["DatapointsToAlarm"], p["Threshold"]) == (3, 2, 1), lid
            deployed = evaluate(tpl, p, default)
            assert {i: (st["Period"], st["Stat"]) for i, st in expression_inputs(deployed).items()} == {
                "health": (60, "Maximum"), "ticks": (60, "Sum"), "failed": (60, "Sum")}, lid
        else:
            assert p["Period"] == 300 and p["EvaluationPeriods"] == 1, lid
        if lid == "HealthAlarm":
            pass
        elif p["MetricName"] == "ApproximateAgeOfOldestMessage":
            assert p["Statistic"] == "Maximum" and p["Threshold"] == 1800, lid  # 30 min: the queued budget
        elif p["Namespace"] != "AWS/SQS":
            assert p["Statistic"] == "Sum" and p["Threshold"] == 1, lid  # one occurrence pages
        text = p["AlarmDescription"]
        assert 40 <= len(text) <= 1024, lid  # CloudWatch's limit
        commands = set(re.findall(r"`(pixivflow [^`]+)`", text))
        assert commands, f"{lid}: the description names no CLI command"
        assert commands <= CLI_COMMANDS, (lid, commands - CLI_COMMANDS)


def test_no_resource_requires_reserved_concurrency(tpl: dict[str, Any], resources: dict[str, Any]) -> None:
    # Reserving any concurrency fails to deploy on an account whose quota is 10 (DESIGN §4).
    default = parameters(tpl)
    assert "ReservedConcurrentExecutions" not in tpl["Globals"]["Function"]
    found = {lid: r["Properties"]["ReservedConcurrentExecutions"] for lid, r in resources.items()
             if "ReservedConcurrentExecutions" in (r.get("Properties") or {})}
    for lid, value in found.items():
        assert evaluate(tpl, value, default) is NO_VALUE, lid
    knobs = {"StallSweepFunction": "SweepReservedConcurrency", "ExecuteFunction": "ExecuteReservedConcurrency",
             "DeliverFunction": "DeliverReservedConcurrency"}
    assert set(found) == set(knobs)
    for lid, name in knobs.items():
        assert tpl["Parameters"][name]["Default"] == "", name
        reserved = parameters(tpl, **{name: "1"})
        assert evaluate(tpl, found[lid], reserved) == "1", name  # one parameter away
        pattern = re.compile(tpl["Parameters"][name]["AllowedPattern"])
        assert pattern.fullmatch("") and pattern.fullmatch("1") and not pattern.fullmatch("0"), name


def test_the_sweep_lease_outlives_every_tick_and_its_watches_are_one_batch_read(
    tpl: dict[str, Any], resources: dict[str, Any]
) -> None:
    from pixivflow.services.sweep import SWEEP_LEASE_MS

    # a tick cannot run longer than the function timeout, so a live tick always holds its lease
    assert function_timeout(tpl, "StallSweepFunction") * 1000 <= SWEEP_LEASE_MS
    assert allowed(resources, "StallSweepFunction", "dynamodb:BatchGetItem") == [
        {"Fn::GetAtt": ["LedgerTable", "Arn"]}, *[{"Fn::Sub": "${LedgerTable.Arn}/index/" + n} for n in GSIS]]


def test_ledger_deletion_protection_is_on_unless_a_dev_stack_turns_it_off(tpl: dict[str, Any], resources: dict[str, Any]) -> None:
    value = props(resources, "LedgerTable")["DeletionProtectionEnabled"]
    assert evaluate(tpl, value, parameters(tpl)) is True
    assert evaluate(tpl, value, parameters(tpl, TableDeletionProtection="false")) is False
    assert tpl["Parameters"]["TableDeletionProtection"]["AllowedValues"] == ["true", "false"]


def test_queues_and_log_groups_carry_explicit_deletion_policies(resources: dict[str, Any]) -> None:
    # The ledger is the source of truth (Retain, above); queues only transport and log groups
    # expire anyway, so both are deleted with the stack, explicitly (cfn-lint I3011).
    kinds = {"AWS::SQS::Queue": 0, "AWS::Logs::LogGroup": 0}
    for lid, res in resources.items():
        if res["Type"] in kinds:
            kinds[res["Type"]] += 1
            assert res.get("DeletionPolicy") == "Delete", lid
            assert res.get("UpdateReplacePolicy") == "Delete", lid
    assert kinds == {"AWS::SQS::Queue": 5, "AWS::Logs::LogGroup": 6}


def test_xray_tracing_is_off_by_default_and_one_parameter_away(tpl: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from pixivflow import observability

    glob = tpl["Globals"]["Function"]
    assert glob["Tracing"] == {"Ref": "Tracing"}
    assert tpl["Parameters"]["Tracing"]["Default"] == "Disabled"
    assert tpl["Parameters"]["Tracing"]["AllowedValues"] == ["Disabled", "Active"]
    flag = glob["Environment"]["Variables"]["POWERTOOLS_TRACE_DISABLED"]
    for tracing, disabled, enabled in (("Disabled", "true", False), ("Active", "false", True)):
        value = evaluate(tpl, flag, parameters(tpl, Tracing=tracing))
        assert value == disabled, tracing
        monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", value)
        assert observability.tracing_enabled() is enabled, tracing  # what the code reads from it


def test_the_readme_operate_section_explains_every_alarm(resources: dict[str, Any]) -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    operate = text.split("## Operate: alarms, logs and what to do", 1)[1].split("\n## ", 1)[0]
    for lid, p in alarms(resources).items():
        generic = next((f"<Function>{kind}Alarm" for kind in ("Errors", "Throttles")
                        if p.get("Namespace") == "AWS/Lambda" and p.get("MetricName") == kind), None)
        assert f"`{lid}`" in operate or (generic and f"`{generic}`" in operate), lid


def test_the_default_alarm_profile_is_one_alarm_on_the_sweeps_health_metric(tpl: dict[str, Any], resources: dict[str, Any]) -> None:
    """Issue 25: a small deployment is watched for one alarm and one metric series. Every other alarm
    exists only in the full profile, and the functions emit only Health unless it is chosen."""
    assert tpl["Parameters"]["AlarmProfile"]["Default"] == "health"
    assert tpl["Parameters"]["AlarmProfile"]["AllowedValues"] == ["health", "full"]
    assert tpl["Conditions"]["FullAlarms"] == {"Fn::Equals": [{"Ref": "AlarmProfile"}, "full"]}
    every = alarms(resources)
    unconditional = sorted(lid for lid, _ in every.items() if resources[lid].get("Condition") != "FullAlarms")
    assert unconditional == ["HealthAlarm"]
    health = every["HealthAlarm"]
    inputs = {i: metric_key(st["Metric"]) for i, st in expression_inputs(health).items()}
    sweep_fn = (("FunctionName", "StallSweepFunction"),)
    assert inputs == {"health": ("Ref:MetricsNamespace", "Health", (("service", "pixivflow"),)),
                      "ticks": ("AWS/Lambda", "Invocations", sweep_fn), "failed": ("AWS/Lambda", "Errors", sweep_fn)}
    assert health["TreatMissingData"] == "breaching"  # a sweep that stops is a problem too
    assert tpl["Globals"]["Function"]["Environment"]["Variables"]["PIXIVFLOW_METRICS"] == {"Ref": "AlarmProfile"}
    sweep = resources["StallSweepFunction"]["Properties"]
    assert "DEAD_LETTER_QUEUE_URLS" in sweep["Environment"]["Variables"]
    granted = [st for st in sweep["Policies"][0]["Statement"] if "sqs:GetQueueAttributes" in st["Action"]]
    assert [sorted(r["Fn::GetAtt"][0] for r in st["Resource"]) for st in granted] == [["ExecutionDLQ", "OutboxDLQ", "SchedulerDLQ"]]


def _metric_math(expression: str, values: dict[str, float | None]) -> float | None:
    """One period of a CloudWatch metric-math expression, for the subset HealthAlarm uses: metric ids,
    numbers, + - * /, comparisons (1 or 0), FILL(m, v) and IF(c, a, b). A missing input makes the
    arithmetic on it missing, as CloudWatch leaves a timestamp out when an input lacks it."""
    import ast

    def ev(node: ast.AST) -> float | None:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return float(node.value)
        if isinstance(node, ast.Name):
            return values[node.id]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("FILL", "IF"):
            args = [ev(a) for a in node.args]
            if node.func.id == "FILL":
                return args[1] if args[0] is None else args[0]
            if args[0] is None:
                return None
            return args[1] if args[0] else args[2]
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            if a is None or b is None:
                return None
            ops = {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b}
            return ops[type(node.op)] if type(node.op) in ops else a / b
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            a, b = ev(node.left), ev(node.comparators[0])
            if a is None or b is None:
                return None
            cmp = {ast.Lt: a < b, ast.LtE: a <= b, ast.Gt: a > b, ast.GtE: a >= b, ast.Eq: a == b, ast.NotEq: a != b}
            return 1.0 if cmp[type(node.ops[0])] else 0.0
        raise AssertionError(f"not in the metric-math subset this test evaluates: {ast.dump(node)}")

    return ev(ast.parse(expression, mode="eval"))


@pytest.mark.parametrize("minutes, alarm", [
    # (Health's Maximum, the sweep's Invocations, its Errors) per minute; None = no data point
    ([(None, 1, 0)] * 3, False),  # healthy: the sweep ran cleanly and published no Health
    ([(None, 2, 1), (None, 1, 0), (None, 1, 0)], False),  # a failed tick beside a clean one in its minute
    ([(1, 1, 0), (None, 1, 0), (None, 1, 0)], False),  # one bad minute of three is a blip
    ([(2, 1, 0), (None, 1, 0), (1, 1, 0)], True),  # problems counted (stalls, missed fires, dead letters...)
    ([(1, None, None), (1, None, None), (None, 1, 0)], True),  # an alertable outcome published by another function
    ([(None, None, None)] * 3, True),  # the sweep stopped: no invocation, nothing published
    ([(None, 1, 1)] * 3, True),  # every tick failed (an exception or a timeout) before it could count
    ([(None, 1, 0), (None, None, None), (None, 1, 1)], True),  # a missed minute, then a failed tick
])
def test_the_health_alarm_fires_on_every_problem_and_on_a_sweep_that_stopped_or_failed(
        resources: dict[str, Any], minutes: list[tuple[float | None, float | None, float | None]], alarm: bool) -> None:
    """Issue 25 (a): Health is published only when a tick counts a problem, so the alarm must still
    page on every condition it paged on when Health was published every minute: problems, and a
    sweep that did not run or did not finish; and only then."""
    p = alarms(resources)["HealthAlarm"]
    (returned,) = [m for m in p["Metrics"] if m.get("ReturnData")]
    assert p["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    breaching = 0
    for health, ticks, failed in minutes[-p["EvaluationPeriods"]:]:
        value = _metric_math(returned["Expression"], {"health": health, "ticks": ticks, "failed": failed})
        if value is None:
            breaching += p["TreatMissingData"] == "breaching"
        else:
            breaching += value >= p["Threshold"]
    assert (breaching >= p["DatapointsToAlarm"]) is alarm
