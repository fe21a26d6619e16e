"""DESIGN §12: importing a handler creates no AWS client and reads no config; handlers import only
pixivflow and the standard library, and stay thin."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS = ["trigger", "execute", "deliver", "stall_sweep", "job_events"]

PROBE = r"""
import importlib.util, os, sys
import botocore.session
def refuse(*a, **k):
    raise SystemExit("an AWS client was created at import time")
botocore.session.Session.create_client = refuse
os.environ.pop("PIXIVFLOW_CONFIG", None)
os.environ["LEDGER_TABLE"] = ""
for name in sys.argv[1:]:
    spec = importlib.util.spec_from_file_location(f"fn_{name}", os.path.join("functions", name, "app.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert callable(module.handler), name
import pixivflow.runtime as rt
assert rt._runtime is None, "the runtime was built at import time"
print("ok")
"""


def test_importing_the_handlers_creates_no_client_and_reads_no_config():
    done = subprocess.run([sys.executable, "-c", PROBE, *FUNCTIONS], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("ok")


def test_handlers_import_only_pixivflow_and_the_standard_library():
    stdlib = set(sys.stdlib_module_names)
    for name in FUNCTIONS:
        tree = ast.parse((ROOT / "functions" / name / "app.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                roots = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                roots = [(node.module or "").split(".")[0]]
            else:
                continue
            for root in roots:
                assert root == "pixivflow" or root in stdlib, f"functions/{name}/app.py imports {root}"


def test_domain_core_imports_no_aws_or_http_library():
    for path in (ROOT / "shared" / "pixivflow" / "domain").glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                for n in names:
                    assert n.split(".")[0] not in {"boto3", "botocore", "httpx", "aws_lambda_powertools"}, f"{path.name} imports {n}"


def _imports(path: Path) -> list[tuple[str, int]]:
    """(module, level) of every import in a file, relative imports resolved against pixivflow.services."""
    tree = ast.parse(path.read_text())
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((a.name, 0) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.append((node.module or "", node.level))
    return found


def test_services_see_ports_only():
    """DESIGN §3: no services/ module imports adapters/ (or boto3/httpx), so the same service code runs
    on DynamoDB/SQS, on moto and on the in-memory twins."""
    services = list((ROOT / "shared" / "pixivflow" / "services").glob("*.py"))
    assert services
    for path in services:
        for module, level in _imports(path):
            parts = module.split(".")
            absolute = parts if level == 0 else ["pixivflow", *parts] if level == 2 else ["pixivflow", "services", *parts]
            assert absolute[:2] != ["pixivflow", "adapters"], f"services/{path.name} imports {'.' * level}{module}"
            assert absolute[0] not in {"boto3", "botocore", "httpx"}, f"services/{path.name} imports {module}"


LEAN = r"""
import importlib.util, os, sys
name = sys.argv[1]
spec = importlib.util.spec_from_file_location("app", os.path.join("functions", name, "app.py"))
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(",".join(sorted(m for m in sys.modules if m.split(".")[0] in ("pixivflow", "aws_lambda_powertools", "boto3", "botocore", "pydantic", "httpx", "yaml", "croniter", "asyncio"))))
"""

# What no handler module imports (issue 14: each imports only what its own function needs; the
# runtime graph, the config and the services come with the first invocation).
# Powertools' batch utility neither (issue 25): it loads asyncio and every stream's event classes for
# what handlers/_sqs.py does in a loop.
NEVER_AT_IMPORT = {"boto3", "botocore.client", "httpx", "yaml", "croniter", "pydantic", "pixivflow.config", "pixivflow.runtime",
                   "pixivflow.services.timing", "pixivflow.wiring", "aws_lambda_powertools.utilities.parser",
                   "aws_lambda_powertools.utilities.batch", "asyncio"}
ONLY_FOR: dict[str, set[str]] = {
    "aws_lambda_powertools.event_handler": set(),
}


def test_each_handler_imports_only_what_its_own_function_needs():
    for name in FUNCTIONS:
        done = subprocess.run([sys.executable, "-c", LEAN, name], cwd=ROOT, capture_output=True, text=True, timeout=60,
                              env={"PYTHONPATH": str(ROOT / "shared"), "PATH": "/usr/bin:/bin"})
        assert done.returncode == 0, done.stderr[-2000:]
        loaded = set(done.stdout.strip().split(","))
        assert f"pixivflow.handlers.{name}" in loaded and "pixivflow.entry" not in loaded, name
        assert not loaded & NEVER_AT_IMPORT, (name, sorted(loaded & NEVER_AT_IMPORT))
        for module, users in ONLY_FOR.items():
            assert (module in loaded) == (name in users), (name, module)


FIRST = r"""
import importlib.util, json, os, sys
from pixivflow.local.twins import TwinCloud
from pixivflow.local.provision import provision
from pixivflow.local.lambda_context import context_for
name, event = sys.argv[1], json.loads(sys.argv[2])
os.environ.update({"AWS_ACCESS_KEY_ID": "t", "AWS_SECRET_ACCESS_KEY": "t", "AWS_DEFAULT_REGION": "us-east-1",
                   "PIXIVFLOW_CONFIG": os.path.join("events", "demo", "config.yaml"), "TRIGGER_TOKEN": "t", "JOBS_TOKEN": "t"})
before = set(sys.modules)  # the harness's own imports are not the function's
with TwinCloud():
    os.environ.update(provision(prefix="lean"))
    spec = importlib.util.spec_from_file_location("app", os.path.join("functions", name, "app.py"))
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    result = app.handler(event, context_for(name))
print(json.dumps({"result": result, "loaded": sorted(set(sys.modules) - before)}))
"""


def _first_invocation(name: str, event: dict) -> dict:
    """One function imported and invoked once on the twins, in a fresh interpreter: its result and
    the modules that import and invocation loaded."""
    import json

    done = subprocess.run([sys.executable, "-c", FIRST, name, json.dumps(event)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, env={"PYTHONPATH": str(ROOT / "shared"), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_sweep_tick_on_an_idle_ledger_loads_no_http_client_library():
    """Issue 25 (cold start): httpx and httpcore come with the first request a function sends (a route
    post, a callback); a tick with nothing to deliver never imports them, nor Powertools' batch or
    event handler modules (asyncio)."""
    out = _first_invocation("stall_sweep", {"source": "aws.scheduler"})
    assert out["result"]["errors"] == 0
    unexpected = [m for m in out["loaded"] if m.split(".")[0] in ("httpx", "httpcore", "asyncio")
                  or m.startswith(("aws_lambda_powertools.utilities.batch", "aws_lambda_powertools.event_handler"))]
    assert unexpected == [], unexpected


# What a scheduled fire has no use for (issue 25, cold start): it admits a slot and dispatches its
# cells, so it never posts to a route, reads a work, stores a file or sends a callback; a config
# without an unknown key needs no "did you mean" (difflib).
NOT_ON_A_FIRE = ("pixivflow.adapters.routes", "pixivflow.adapters.webhook", "pixivflow.adapters.callback_http",
                 "pixivflow.adapters.catalog_source", "pixivflow.adapters.pixiv", "pixivflow.adapters.s3_artifacts",
                 "pixivflow.adapters.job_store", "httpx", "difflib")


def test_a_scheduled_fire_imports_no_route_source_artifact_or_callback_adapter():
    """Issue 25: the runtime graph builds the route channel, the work source, the artifact store and
    the callback sender on first use; the trigger's first invocation admits and dispatches without
    importing any of them."""
    out = _first_invocation("trigger", {"scheduleId": "morning-tokyo", "scheduledTime": "2026-11-30T23:00:00Z"})
    assert out["result"]["status"] == "admitted" and out["result"]["sent"] == 3, out["result"]
    unexpected = [m for m in out["loaded"] if m.startswith(NOT_ON_A_FIRE)]
    assert unexpected == [], unexpected


FROM_SSM = r"""
import importlib.util, json, os, sys
from moto import mock_aws
from pixivflow.local.provision import provision
from pixivflow.local.lambda_context import context_for
os.environ.update({"AWS_ACCESS_KEY_ID": "t", "AWS_SECRET_ACCESS_KEY": "t", "AWS_DEFAULT_REGION": "us-east-1",
                   "PIXIVFLOW_CONFIG": "ssm:/pixivflow/config", "TRIGGER_TOKEN": "t", "JOBS_TOKEN": "t"})
with mock_aws():
    import boto3, yaml
    document = json.dumps(yaml.safe_load(open(os.path.join("events", "demo", "config.yaml"), encoding="utf-8")))
    boto3.client("ssm").put_parameter(Name="/pixivflow/config", Value=document, Type="String")
    os.environ.update(provision(prefix="ssm"))
    before = set(sys.modules)
    spec = importlib.util.spec_from_file_location("app", os.path.join("functions", "stall_sweep", "app.py"))
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    result = app.handler({"source": "aws.scheduler"}, context_for("stall_sweep"))
print(json.dumps({"result": result, "loaded": sorted(set(sys.modules) - before)}))
"""


@pytest.mark.size("large")  # a fresh interpreter with moto's SSM, whose import is most of its 2 s (tests/README.md, test sizes)
def test_the_config_is_read_from_ssm_without_powertools_parameters():
    """Issue 25 (cold start): the deployed config is an SSM parameter, read with a client made through
    pixivflow.aws like every other (DESIGN §12). Powertools' parameters utility and the boto3 session
    of its own that its provider builds cost a first invocation about 55 ms; nothing loads it."""
    import json

    done = subprocess.run([sys.executable, "-c", FROM_SSM], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(ROOT / "shared"), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["result"]["errors"] == 0, (out["result"], done.stdout[-3000:], done.stderr[-2000:])
    assert [m for m in out["loaded"] if m.startswith("aws_lambda_powertools.utilities.parameters")] == [], done.stdout[-3000:]


def test_a_config_parameter_that_does_not_exist_is_a_config_error_naming_it(monkeypatch):
    from moto import mock_aws

    from pixivflow import runtime
    from pixivflow.domain.errors import ConfigError

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        with pytest.raises(ConfigError) as info:
            runtime._ssm_reader("/pixivflow/no-such-config")
    assert "/pixivflow/no-such-config" in str(info.value) and "PIXIVFLOW_CONFIG" in str(info.value)


def _http_event(path: str, token: str) -> dict:
    return {"version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": "",
            "headers": {"authorization": f"Bearer {token}"},
            "requestContext": {"http": {"method": "GET", "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1",
                                        "userAgent": "test"}, "requestId": "r", "routeKey": "$default", "stage": "$default",
                               "accountId": "123456789012", "apiId": "local", "domainName": "localhost",
                               "domainPrefix": "localhost", "time": "30/Nov/2026:00:00:00 +0000", "timeEpoch": 0},
            "body": None, "isBase64Encoded": False}


def test_an_http_request_builds_no_openapi_model():
    """Issue 25 (cold start): Powertools' OpenAPI models and parameter classes (pydantic models,
    about 50 ms to import) serve only the generated document (/openapi.json, /docs); a request to
    either HTTP function answers without loading them."""
    for name, path in (("job_events", "/capabilities"), ("trigger", "/health")):
        out = _first_invocation(name, _http_event(path, "t"))
        assert out["result"]["statusCode"] == 200, (name, out["result"])
        loaded = [m for m in out["loaded"] if m.startswith(("aws_lambda_powertools.event_handler.openapi.models",
                                                           "aws_lambda_powertools.event_handler.openapi.params"))]
        assert loaded == [], (name, loaded)
