"""X-Ray tracing is opt-in (issue 16; DESIGN §11 "Tracer optional").

Importing the package never creates a Tracer (it would import the X-Ray SDK and patch botocore);
``runtime.build()`` starts one only when the deployment turned tracing on. The enabled case runs
in a child process, because patching botocore is process-wide and would leak into other tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared"

_CHILD = r"""
import json, sys
import pixivflow.observability as obs
before = obs.tracer() is None and "aws_xray_sdk" not in sys.modules
tracer = obs.start_tracing()
again = obs.start_tracing()
from aws_xray_sdk.core import patcher
print(json.dumps({
    "untraced_at_import": before,
    "started": tracer is not None,
    "disabled": getattr(tracer, "disabled", None),
    "same": tracer is again and obs.tracer() is tracer,
    "patched": sorted(patcher._PATCHED_MODULES),
}))
"""


def _child(extra_env: dict[str, str]) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("POWERTOOLS_", "LAMBDA_", "AWS_LAMBDA"))}
    env.update({"PYTHONPATH": str(SHARED), "AWS_DEFAULT_REGION": "us-east-1", **extra_env})
    out = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_tracing_is_off_unless_the_deployment_turns_it_on(monkeypatch):
    from pixivflow import observability

    for value in (None, "", "true", "1"):
        if value is None:
            monkeypatch.delenv("POWERTOOLS_TRACE_DISABLED", raising=False)
        else:
            monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", value)
        assert observability.tracing_enabled() is False, value
        assert observability.start_tracing() is None, value
    assert observability.tracer() is None


def test_an_enabled_tracer_is_created_once_and_patches_aws_and_http_calls():
    # As deployed with Tracing=Active: Lambda sets LAMBDA_TASK_ROOT, the template sets the flag.
    result = _child({"POWERTOOLS_TRACE_DISABLED": "false", "LAMBDA_TASK_ROOT": "/var/task",
                     "POWERTOOLS_SERVICE_NAME": "pixivflow"})
    assert result == {"untraced_at_import": True, "started": True, "disabled": False, "same": True,
                      "patched": ["botocore", "httpx"]}
