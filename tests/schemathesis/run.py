"""`make schemathesis`: the OpenAPI document measured against the server it describes.

A dev server (the demo config on the offline catalogue source, loopback only) on a free port with
fixed tokens, then schemathesis against its ``/openapi.json``: every check, a fixed seed, once with
the trigger token, once with the jobs token, once with a wrong token and once with none, with the
settings of ``schemathesis.toml`` beside this file. Schemathesis is a measuring tool, installed in
its own venv by the Makefile (``.venv-st``), never a dependency of the project or of ``make test``.
Exit status 0 when every run passed; the reports are under ``build/schemathesis/<run>``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
TOKENS = {"trigger": "st-trigger-token", "jobs": "st-jobs-token"}
RUNS = {"trigger": f"Bearer {TOKENS['trigger']}", "jobs": f"Bearer {TOKENS['jobs']}", "wrong": "Bearer st-wrong-token",
        "none": None}


def command(schemathesis: str, url: str, auth: str | None, *, seed: int, examples: int, reports: Path) -> list[str]:
    cmd = [schemathesis, "--config-file", str(HERE / "schemathesis.toml"), "run", f"{url}/openapi.json",
           "--checks", "all", "--seed", str(seed), "--max-examples", str(examples), "--workers", "1",
           "--generation-database", "none", "--report", "junit", "--report-dir", str(reports), "--no-color"]
    return cmd + (["-H", f"Authorization: {auth}"] if auth else [])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schemathesis", required=True, help="the schemathesis executable")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--examples", type=int, default=200, help="examples per operation")
    parser.add_argument("--only", choices=sorted(RUNS), action="append", help="one of the runs (repeatable)")
    args = parser.parse_args(argv)
    schemathesis = os.path.abspath(shutil.which(args.schemathesis) or args.schemathesis)  # it runs in build/
    # SIGTERM unwinds like Ctrl-C: subprocess.call kills the running schemathesis, the server stops.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    failed: list[str] = []
    build = REPO / "build"
    build.mkdir(exist_ok=True)
    real = sys.stdout
    with open(build / "schemathesis-dev.log", "w", encoding="utf-8") as log:
        # The handlers' JSON log lines go to sys.stdout as it is when their logger is made (on the
        # first import of pixivflow): to the log, beside the dev server's own lines.
        sys.stdout = log
        from pixivflow.local.devserver import DevServer

        server: Any = DevServer(None, port=0, demo=True, source="catalog", tokens=dict(TOKENS), out=log)
        with server as dev:
            for name in args.only or list(RUNS):
                cmd = command(schemathesis, dev.url, RUNS[name], seed=args.seed, examples=args.examples,
                              reports=build / "schemathesis" / name)
                print(f"== {name}: {shlex.join(cmd)}", file=real, flush=True)
                if subprocess.call(cmd, stdout=real, cwd=build) != 0:  # its .schemathesis/ cache under build/
                    failed.append(name)
        sys.stdout = real
    print(f"schemathesis: {'failed: ' + ', '.join(failed) if failed else 'every run passed'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
