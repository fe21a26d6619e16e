"""Cold start, measured from outside: each handler module imported in a fresh
interpreter, median of several runs, as a ratio to importing the bare stack (boto3 + Powertools'
Logger and Metrics + pydantic) the same way.

Three ways to import it:

* ``source``: the checkout (``shared/`` and the venv's site-packages), with whatever bytecode
  caches this machine has written: a warm developer machine.
* ``layer``: the layer directory SAM's makefile build produces (``shared/Makefile``
  ``build-CoreLayer``: the requirements and ``pixivflow`` with bytecode compiled
  ``--invalidation-mode unchecked-hash``), on ``sys.path`` alone (``python -S``: no site-packages).
* ``layer w/o bytecode``: the same directory with its bytecode ignored and nothing written
  (``-B`` and an empty ``PYTHONPYCACHEPREFIX``), as on Lambda's read-only ``/opt`` when a layer
  ships only sources: every cold start compiles every module again.

The first invocation is timed in a fresh interpreter too: import, then moto and the template's
resources, then one invocation with a cheap event of that handler's kind (the runtime graph is
built, clients are created and the config is read at that point: from SSM, as the
template deploys it).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FUNCTIONS = ("trigger", "execute", "deliver", "stall_sweep", "job_events")
LAYER_DIR = ROOT / "build" / "bench-layer"
NOPYC_DIR = ROOT / "build" / "bench-layer-nopyc"  # the same layer without its bytecode
BARE = "import boto3, pydantic\nfrom aws_lambda_powertools import Logger, Metrics"
BARE_LABEL = "boto3 + pydantic + Powertools Logger/Metrics"
BARE_FUNCTION_LABEL = ("the three libraries imported and one boto3 DynamoDB client built (INIT), then one GetItem "
                       "(its first invocation)")

_IMPORT = """
import sys, time
sys.path[:0] = {paths!r}
t = time.perf_counter()
{body}
print((time.perf_counter() - t) * 1000)
"""

_HANDLER = """
import importlib.util
spec = importlib.util.spec_from_file_location("app", {path!r})
app = importlib.util.module_from_spec(spec)
spec.loader.exec_module(app)
"""

_FIRST = """
import json, os, sys, time
sys.path[:0] = {paths!r}
import importlib.util
spec = importlib.util.spec_from_file_location("app", {path!r})
app = importlib.util.module_from_spec(spec)
t, c = time.perf_counter(), time.process_time()
spec.loader.exec_module(app)
imported, imported_cpu = (time.perf_counter() - t) * 1000, (time.process_time() - c) * 1000
# Lambda's context object, built here: importing pixivflow.local's stand-in would load local
# tooling (PyYAML among it) outside the timed span, which Lambda never does for us.
from types import SimpleNamespace
def context_for(n):
    return SimpleNamespace(function_name="pixivflow-" + {name!r}, memory_limit_in_mb=512, function_version="$LATEST",
                           invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:pixivflow-" + {name!r},
                           aws_request_id="cold-%d" % n, log_group_name="/aws/lambda/pixivflow-" + {name!r},
                           log_stream_name="cold", get_remaining_time_in_millis=lambda: 60_000)
context = context_for(1)
t, c = time.perf_counter(), time.process_time()
app.handler({event!r}, context)
first, first_cpu = (time.perf_counter() - t) * 1000, (time.process_time() - c) * 1000
t = time.perf_counter()
app.handler({event!r}, context_for(2))
warm = (time.perf_counter() - t) * 1000
{peak_rss}
print(json.dumps({{"import_ms": imported, "first_ms": first, "warm_ms": warm,
                  "import_cpu_ms": imported_cpu, "first_cpu_ms": first_cpu, "max_rss_mb": rss_mb}}))
"""

# The bare function Lambda would cold-start in the same runtime: the three libraries imported, one
# boto3 client built (INIT), then one call (its first invocation), on the same moto server.
_BARE_FIRST = """
import json, os, sys, time
sys.path[:0] = {paths!r}
t, c = time.perf_counter(), time.process_time()
import boto3, pydantic
from aws_lambda_powertools import Logger, Metrics
client = boto3.client("dynamodb")
imported, imported_cpu = (time.perf_counter() - t) * 1000, (time.process_time() - c) * 1000
t, c = time.perf_counter(), time.process_time()
client.get_item(TableName=os.environ["LEDGER_TABLE"], Key={{"pk": {{"S": "BARE"}}, "sk": {{"S": "BARE"}}}})
first, first_cpu = (time.perf_counter() - t) * 1000, (time.process_time() - c) * 1000
t = time.perf_counter()
client.get_item(TableName=os.environ["LEDGER_TABLE"], Key={{"pk": {{"S": "BARE"}}, "sk": {{"S": "BARE"}}}})
warm = (time.perf_counter() - t) * 1000
{peak_rss}
print(json.dumps({{"import_ms": imported, "first_ms": first, "warm_ms": warm,
                  "import_cpu_ms": imported_cpu, "first_cpu_ms": first_cpu, "max_rss_mb": rss_mb}}))
"""


def _events() -> dict[str, Any]:
    http = {"version": "2.0", "routeKey": "$default", "rawPath": "/capabilities", "rawQueryString": "",
            "headers": {"authorization": "Bearer cold-start-jobs-token"},
            "requestContext": {"http": {"method": "GET", "path": "/capabilities", "protocol": "HTTP/1.1",
                                        "sourceIp": "127.0.0.1", "userAgent": "bench"}, "requestId": "cold",
                               "routeKey": "$default", "stage": "$default", "accountId": "123456789012",
                               "apiId": "local", "domainName": "localhost", "domainPrefix": "localhost",
                               "time": "30/Nov/2026:00:00:00 +0000", "timeEpoch": 0},
            "body": None, "isBase64Encoded": False}

    def sqs(body: dict) -> dict:
        return {"Records": [{"messageId": "m1", "receiptHandle": "r1", "body": json.dumps(body),
                             "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "0", "SenderId": "x",
                                            "ApproximateFirstReceiveTimestamp": "0"},
                             "messageAttributes": {}, "md5OfBody": "", "eventSource": "aws:sqs",
                             "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q", "awsRegion": "us-east-1"}]}

    return {
        "trigger": {"scheduleId": "morning-tokyo", "scheduledTime": "2026-11-30T23:00:00Z"},
        "execute": sqs({"slotId": "morning-tokyo@2026-12-01T0800", "targetId": "cats"}),
        "deliver": sqs({"kind": "delivery", "key": "pixivflow:review:illustration:1:morning-tokyo@2026-12-01T0800:cats"}),
        "stall_sweep": {"source": "aws.scheduler"},
        "job_events": http,
    }


_AWS_ENV = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_REGION": "us-east-1"}


def _moto_server():
    """moto in server mode on 127.0.0.1, in this process: the probe talks to it over HTTP, so its
    first invocation imports boto3 and creates its clients itself, as on Lambda."""
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # its request lines are not the report's
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    return server, f"http://{host}:{port}"


def _provision(endpoint: str, prefix: str) -> dict[str, str]:
    saved = {k: os.environ.get(k) for k in (*_AWS_ENV, "AWS_ENDPOINT_URL")}
    os.environ.update(_AWS_ENV)
    os.environ["AWS_ENDPOINT_URL"] = endpoint
    try:
        sys.path.insert(0, str(ROOT / "shared"))
        from pixivflow.local.provision import provision

        return provision(prefix=prefix)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _config_parameter(endpoint: str, name: str) -> str:
    """The demo config as the deployed functions read it: a JSON document in an SSM parameter
    (``PIXIVFLOW_CONFIG=ssm:<name>``, template.yaml), its catalogue path made absolute. So the first
    invocation builds its SSM client and makes the GetParameter call, as on Lambda."""
    import boto3
    import yaml

    cfg = yaml.safe_load((ROOT / "events" / "demo" / "config.yaml").read_text(encoding="utf-8"))
    cfg["source"]["path"] = str((ROOT / "events" / "demo" / cfg["source"]["path"]).resolve())
    ssm = boto3.client("ssm", endpoint_url=endpoint, region_name=_AWS_ENV["AWS_REGION"],
                       aws_access_key_id="bench", aws_secret_access_key="bench")
    ssm.put_parameter(Name=name, Value=json.dumps(cfg), Type="String", Overwrite=True)
    return f"ssm:{name}"


def _run(code: str, *, flags: tuple[str, ...] = (), env: dict[str, str] | None = None) -> str:
    full = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    full.update(env or {})
    proc = subprocess.run([sys.executable, *flags, "-c", code], capture_output=True, text=True, env=full, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"cold-start probe failed: {proc.stderr[-2000:]}")
    return proc.stdout.strip().splitlines()[-1]


def _median_import(body: str, paths: list[str], runs: int, *, flags: tuple[str, ...] = (), env: dict | None = None) -> float:
    samples = [float(_run(_IMPORT.format(paths=paths, body=body), flags=flags, env=env)) for _ in range(runs)]
    return statistics.median(samples)


def _layer_fingerprint() -> str:
    digest = hashlib.sha256()
    for path in sorted((ROOT / "shared").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix in (".py", ".json", ".txt", "") :
            digest.update(str(path.relative_to(ROOT)).encode())
            digest.update(path.read_bytes())
    digest.update(sys.version.encode())
    return digest.hexdigest()


def built_layer() -> dict[str, Any] | None:
    """The layer ``build_layer`` made, when it was made from this very tree (else None)."""
    stamp = LAYER_DIR / ".fingerprint"
    if stamp.exists() and stamp.read_text() == _layer_fingerprint():
        return build_layer()
    return None


def build_layer() -> dict[str, Any]:
    """The layer exactly as SAM's makefile build makes it, for this interpreter (the bench imports it
    with this Python, so its wheels and bytecode are this Python's; SAM builds for python3.13/arm64)."""
    stamp = LAYER_DIR / ".fingerprint"
    fingerprint = _layer_fingerprint()
    if not (stamp.exists() and stamp.read_text() == fingerprint):
        if LAYER_DIR.exists():
            shutil.rmtree(LAYER_DIR)
        LAYER_DIR.mkdir(parents=True)
        version = "%d.%d" % sys.version_info[:2]
        proc = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT / "shared"), "build-CoreLayer",
                               f"ARTIFACTS_DIR={LAYER_DIR}", f"PYTHON={sys.executable}", "PIP_PLATFORM=",
                               f"LAMBDA_PYTHON={version}"], capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            return {"ok": False, "note": f"make build-CoreLayer failed: {(proc.stderr or proc.stdout)[-500:]}"}
        if NOPYC_DIR.exists():
            shutil.rmtree(NOPYC_DIR)
        shutil.copytree(LAYER_DIR / "python", NOPYC_DIR / "python", ignore=shutil.ignore_patterns("__pycache__"))
        stamp.write_text(fingerprint)
    python = LAYER_DIR / "python"
    sources = [p for p in python.rglob("*.py")]
    compiled = 0
    unchecked = 0
    for src in sources:
        cache = src.parent / "__pycache__" / f"{src.stem}.{sys.implementation.cache_tag}.pyc"
        if cache.exists():
            compiled += 1
            flags = int.from_bytes(cache.read_bytes()[4:8], "little")
            unchecked += flags == 0b01  # PEP 552: hash-based, not checked against the source
    return {"ok": True, "dir": str(python), "nopyc_dir": str(NOPYC_DIR / "python"), "modules": len(sources), "pyc": compiled, "unchecked_hash": unchecked,
            "note": f"{python.relative_to(ROOT)}: {len(sources)} modules, {compiled} with bytecode, "
                    f"{unchecked} of them unchecked-hash (shared/Makefile build-CoreLayer)"}


# The probe's own peak resident memory after both invocations: Linux's VmHWM, which is this program's
# alone. getrusage's ru_maxrss is not: Linux carries it across fork and exec, so a probe started by
# the bench (a process of 2 GB by then) reported the bench's peak, not its own.
_PEAK_RSS = """
try:
    with open("/proc/self/status") as status:
        rss_mb = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024
except (OSError, StopIteration):
    import resource
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
""".strip("\n")


# Where a handler's cold start goes beyond the bare function's, step by step in a fresh interpreter
# from the same layer: each step's wall ms, in the order a first invocation takes them.
_PARTS = """
import json, os, sys, time
sys.path[:0] = {paths!r}
parts = {{}}
def step(name, t=[time.perf_counter()]):
    now = time.perf_counter()
    parts[name] = (now - t[0]) * 1000
    t[0] = now
import boto3, pydantic
from aws_lambda_powertools import Logger, Metrics
client = boto3.client("dynamodb")
step("the bare function's INIT (its libraries, one client)")
import pixivflow.config
step("the config's pydantic models (import, class creation)")
ssm = boto3.client("ssm")
step("the SSM client (the config is an SSM parameter)")
text = ssm.get_parameter(Name=os.environ["PIXIVFLOW_CONFIG"][4:])["Parameter"]["Value"]
step("GetParameter")
pixivflow.config.parse_text(text)
step("the config's validation (its schema built on first use)")
import pixivflow.runtime, pixivflow.services.execution, pixivflow.services.delivery, pixivflow.services.sweep
step("the engine's modules (runtime graph, services, adapters)")
print(json.dumps(parts))
"""


def _median_parts(paths: list[str], runs: int, *, flags: tuple[str, ...], env: dict[str, str]) -> dict[str, float]:
    samples = [json.loads(_run(_PARTS.format(paths=paths), flags=flags, env=env)) for _ in range(runs)]
    return {k: statistics.median(s[k] for s in samples) for k in samples[0]}


def _median_first(code: str, runs: int, *, flags: tuple[str, ...], env: dict[str, str]) -> dict[str, float]:
    """INIT (the import, and for the bare function its client) plus the first invocation, in a
    fresh interpreter each run: the median of each part and of their sum."""
    samples = [json.loads(_run(code, flags=flags, env=env)) for _ in range(runs)]
    out = {key: statistics.median(s[key] for s in samples)
           for key in ("import_ms", "first_ms", "warm_ms", "import_cpu_ms", "first_cpu_ms", "max_rss_mb")}
    out["init_first_ms"] = statistics.median(s["import_ms"] + s["first_ms"] for s in samples)
    # the same span in the probe's own CPU: what a shared, loaded machine leaves steadier (the time
    # moto, in this process, takes to answer is in the wall-clock figure only)
    out["init_first_cpu_ms"] = statistics.median(s["import_cpu_ms"] + s["first_cpu_ms"] for s in samples)
    return out


def measure(runs: int = 5, quick: bool = False, functions: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Per handler: its import from the source tree, from the built layer with and without its
    bytecode (the import-only figures), and what counts: INIT + first invocation from
    the built layer in a fresh interpreter, as a ratio to the bare function's INIT + first call.

    ``quick`` (the report's test): INIT + first invocation only, one run, from the layer when one
    is already built for this tree, else from the source tree (``from`` says which); it never runs
    pip."""
    src_paths = [str(ROOT / "shared")]
    handlers: dict[str, dict[str, Any]] = {}
    if quick:
        runs = 1
        layer = built_layer() or {"ok": False, "note": "not built (quick run: make bench builds it)"}
    else:
        _run(_IMPORT.format(paths=src_paths, body=BARE))  # one discarded run: the first reads the files from disk
        layer = build_layer()
    bare_source = None if quick else _median_import(BARE, src_paths, runs)
    bare_layer = bare_nopyc = None
    # from the built layer (``python -S``: the layer alone on sys.path, as /opt/python on Lambda);
    # the source tree when the layer cannot be built (then the ratio says so)
    first_paths, first_flags = ([layer["dir"]], ("-S",)) if layer["ok"] else (src_paths, ())
    if layer["ok"] and not quick:
        bare_layer = _median_import(BARE, [layer["dir"]], runs, flags=("-S",))
        bare_nopyc = _median_import(BARE, [layer["nopyc_dir"]], max(1, runs // 2), flags=("-S", "-B"))
    events = _events()
    server, endpoint = _moto_server()
    try:
        config = _config_parameter(endpoint, "/pixivflow/cold-start/config")
        bare_env = {**_AWS_ENV, "AWS_ENDPOINT_URL": endpoint, **_provision(endpoint, "cold-bare")}
        bare_first = _median_first(_BARE_FIRST.format(paths=first_paths, peak_rss=_PEAK_RSS), runs, flags=first_flags, env=bare_env)
        parts = _median_parts(first_paths, runs, flags=first_flags,
                              env={**_AWS_ENV, "AWS_ENDPOINT_URL": endpoint, "PIXIVFLOW_CONFIG": config})
        for name in functions or FUNCTIONS:
            path = str(ROOT / "functions" / name / "app.py")
            body = _HANDLER.format(path=path)
            row: dict[str, Any] = {}
            if not quick:
                row["source_ms"] = _median_import(body, src_paths, runs)
                row["source_ratio"] = row["source_ms"] / bare_source
            if layer["ok"] and not quick:
                row["layer_ms"] = _median_import(body, [layer["dir"]], runs, flags=("-S",))
                row["layer_ratio"] = row["layer_ms"] / bare_layer
                row["layer_nopyc_ms"] = _median_import(body, [layer["nopyc_dir"]], max(1, runs // 2), flags=("-S", "-B"))
            env = {**_AWS_ENV, "AWS_ENDPOINT_URL": endpoint, "JOBS_TOKEN": "cold-start-jobs-token",
                   "TRIGGER_TOKEN": "cold-start-trigger", "POWERTOOLS_METRICS_NAMESPACE": "Bench", "PIXIVFLOW_CONFIG": config,
                   **_provision(endpoint, f"cold-{name.replace('_', '-')}")}
            first = _median_first(_FIRST.format(paths=first_paths, path=path, event=events[name], name=name, peak_rss=_PEAK_RSS), runs,
                                  flags=first_flags, env=env)
            row["init_ms"] = first["import_ms"]
            row["first_invocation_ms"] = first["first_ms"]
            row["warm_invocation_ms"] = first["warm_ms"]
            row["init_first_ms"] = first["init_first_ms"]
            row["init_first_ratio"] = first["init_first_ms"] / bare_first["init_first_ms"]
            row["init_first_cpu_ms"] = first["init_first_cpu_ms"]
            row["init_first_cpu_ratio"] = first["init_first_cpu_ms"] / bare_first["init_first_cpu_ms"]
            # what a memory size must hold (SweepMemorySize, ExecuteMemorySize): the interpreter alone,
            # without Lambda's runtime client beside it
            row["max_rss_mb"] = first["max_rss_mb"]
            handlers[name] = row
    finally:
        server.stop()
    return {"runs": runs, "bare_label": BARE_LABEL, "bare_source_ms": bare_source, "bare_layer_ms": bare_layer,
            "bare_layer_nopyc_ms": bare_nopyc, "layer": layer, "handlers": handlers,
            "from": "built layer" if layer["ok"] else "source tree (the layer did not build)",
            "bare_function": {"label": BARE_FUNCTION_LABEL, **bare_first}, "parts_ms": parts,
            "worst_ratio": max(r["init_first_ratio"] for r in handlers.values()),
            "worst_cpu_ratio": max(r["init_first_cpu_ratio"] for r in handlers.values()),
            "worst_import_ratio": max((r.get("layer_ratio", r.get("source_ratio", 0.0)) for r in handlers.values()), default=None)}


if __name__ == "__main__":
    print(json.dumps(measure(runs=int(sys.argv[1]) if len(sys.argv) > 1 else 5), indent=1))
