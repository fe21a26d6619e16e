"""``make mutants``: proof that the proof works.

Every ``tests/mutants.d/*.toml`` lists mutants in this format::

    [[mutant]]
    id = "reserve-work-condition"       # unique, kebab-case
    file = "shared/pixivflow/adapters/....py"
    old = "exact text that occurs exactly once in the file"
    new = "the weakened text"
    tests = ["tests/unit/test_x.py", "tests/e2e/test_y.py::test_z"]   # what should kill it
    # equivalent = "reason"  -- only if it truly cannot be observed

Each mutant is applied to a private COPY of the tree (``shared/``, ``functions/``, ``tests/``,
``events/``, ``template.yaml``, ``pyproject.toml``; one copy per worker, the file restored after each
mutant), never to the working tree. The copy's ``shared/`` goes first on ``PYTHONPATH``, so it is the
copy's package that runs even though the venv's editable install names the working tree. A mutant is
KILLED when its listed tests fail, or else when a ``--seeds``-seed ``make sim`` (concurrent, with
deaths) reports a violation; a mutant that does neither SURVIVED. A mutant CRASHED, and the run fails,
when every test that failed on it met a request refused as malformed (``validation_probe.py``: a
``ValidationException`` from DynamoDB, moto or the twins, or botocore's ``ParamValidationError``):
it broke the request instead of weakening the guard, and its kill proves nothing; write it as a
valid weakened condition (an always-true clause that still uses every placeholder). Before any mutant runs, the
UNMUTATED copy must pass every listed test and the same ``--seeds``-seed ``make sim``: a run whose
baseline is not clean stops there, naming the failing test or seeds (a seed that fails on unmutated
code would otherwise 'kill' every mutant the tests missed). A run that times out counts as
killed (a mutant that hangs is noticed). The table at the end lists every mutant; the exit status is
1 when a mutant survived that is not marked ``equivalent``, when one crashed (or when the list itself
is malformed).

    python tests/mutants/run.py [--jobs 2] [--seeds 100] [--only id,id] [--list]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = Path(__file__).resolve().parent / "validation_probe.py"
LISTS = ROOT / "tests" / "mutants.d"
COPIED = ("shared", "functions", "tests", "events", "template.yaml", "pyproject.toml")
ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
TEST_TIMEOUT_S = 600
SIM_TIMEOUT_S = 900
BASELINE_TIMEOUT_S = 1800
# Environment a test run must not inherit from whoever runs make mutants.
_DROP_ENV = ("POWERTOOLS_", "LOG_LEVEL", "AWS_", "PIXIV", "TRIGGER_", "JOBS_", "LEDGER_", "EXECUTION_", "OUTBOX_",
             "ARTIFACT_", "SIM_", "PYTEST_")


@dataclass
class Mutant:
    id: str
    file: str
    old: str
    new: str
    tests: list[str]
    source: str  # which toml
    equivalent: str | None = None


@dataclass
class Outcome:
    mutant: Mutant
    verdict: str  # killed-by-tests | killed-by-sim | crashed | survived | equivalent | error
    seconds: float
    detail: str = ""
    notes: list[str] = field(default_factory=list)


def load(lists: Path = LISTS, root: Path = ROOT) -> tuple[list[Mutant], list[str]]:
    """Every mutant of every list, and what is wrong with the lists (empty when they are sound)."""
    mutants: list[Mutant] = []
    errors: list[str] = []
    seen: dict[str, str] = {}
    for path in sorted(lists.glob("*.toml")):
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            errors.append(f"{path.name}: not TOML: {exc}")
            continue
        for n, raw in enumerate(data.get("mutant", [])):
            where = f"{path.name} mutant #{n + 1}"
            missing = [k for k in ("id", "file", "old", "new", "tests") if k not in raw]
            if missing:
                errors.append(f"{where}: missing {', '.join(missing)}")
                continue
            m = Mutant(raw["id"], raw["file"], raw["old"], raw["new"], list(raw["tests"]), path.name, raw.get("equivalent"))
            where = f"{path.name} {m.id}"
            if not ID.match(m.id):
                errors.append(f"{where}: id is not kebab-case")
            if m.id in seen:
                errors.append(f"{where}: id already used in {seen[m.id]}")
            seen[m.id] = path.name
            target = root / m.file
            if not target.is_file():
                errors.append(f"{where}: no file {m.file}")
            else:
                count = target.read_text(encoding="utf-8").count(m.old)
                if count != 1:
                    errors.append(f"{where}: 'old' occurs {count} times in {m.file} (must be exactly once)")
            if m.old == m.new:
                errors.append(f"{where}: 'new' equals 'old'")
            if not m.tests and not m.equivalent:
                errors.append(f"{where}: no tests listed")
            for t in m.tests:
                if not (root / t.split("::")[0]).exists():
                    errors.append(f"{where}: no test file {t.split('::')[0]}")
            mutants.append(m)
    return mutants, errors


class Sandbox:
    """One private copy of the tree; ``mutated(m)`` applies a mutant to it and restores it after."""

    def __init__(self, root: Path = ROOT) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="pixivflow-mutants-"))
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
        for name in COPIED:
            src = root / name
            if src.is_dir():
                shutil.copytree(src, self.dir / name, ignore=ignore)
            elif src.exists():
                shutil.copy2(src, self.dir / name)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(_DROP_ENV)}
        # The probe plugin comes from the runner, not from the copied tree.
        shutil.copy2(PROBE, self.dir / PROBE.name)
        self.env["PYTHONPATH"] = os.pathsep.join([str(self.dir / "shared"), str(self.dir / "tests"), str(self.dir)])
        self.probe = self.dir / "probe.json"
        self.env["PIXIVFLOW_MUTANT_PROBE"] = str(self.probe)
        self.env["PYTHONDONTWRITEBYTECODE"] = "1"  # a mutant's bytecode never outlives it
        # A mutant is killed by what its tests prove, never by a test's cost (tests/README.md, sizes).
        self.env["PIXIVFLOW_SMALL_CPU_S"] = "inf"

    def warm(self, tests: list[str] = ()) -> None:
        """Compile the copy once, so each mutant's run does not compile and assertion-rewrite every
        module again (a third of a short run's time). The bytecode is hash-checked (compileall's
        ``checked-hash``; pytest's rewritten test modules are hash-checked too): the mutated file no
        longer matches its bytecode and is compiled afresh, in memory only (the runs never write
        bytecode), and matches again once restored; no timestamp is trusted."""
        dirs = [name for name in ("shared", "functions", "tests") if (self.dir / name).is_dir()]
        writing = {k: v for k, v in self.env.items() if k != "PYTHONDONTWRITEBYTECODE"}
        files = sorted({t.split("::")[0] for t in tests})
        # Only a speed-up: a step that fails or runs out of time leaves the runs to compile as before.
        for args in (["-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "checked-hash", *dirs],
                     ["-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider", "-o", "addopts=", *files]):
            try:
                subprocess.run([sys.executable, *args], cwd=self.dir, env=writing, capture_output=True, timeout=TEST_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                pass

    def apply(self, m: Mutant) -> str:
        path = self.dir / m.file
        original = path.read_text(encoding="utf-8")
        path.write_text(original.replace(m.old, m.new, 1), encoding="utf-8")
        return original

    def restore(self, m: Mutant, original: str) -> None:
        (self.dir / m.file).write_text(original, encoding="utf-8")

    def run(self, args: list[str], timeout: int) -> tuple[int | None, str]:
        try:
            done = subprocess.run([sys.executable, *args], cwd=self.dir, env=self.env, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, f"timed out after {timeout} s"
        return done.returncode, (done.stdout + done.stderr)[-4000:]

    def pytest(self, tests: list[str], *, workers: int = 1, timeout: int = TEST_TIMEOUT_S,
               first_failure: bool = True) -> tuple[int | None, str]:
        spread = ["-n", str(workers), "--dist", "worksteal"] if workers > 1 else []
        self.probe.unlink(missing_ok=True)
        return self.run(["-m", "pytest", "-q", *(["-x"] if first_failure else []), "-p", "no:cacheprovider",
                         "-p", "no:randomly", "-p", PROBE.stem, "-o", "addopts=", *spread, *tests], timeout)

    def probed(self) -> tuple[list[str], dict[str, list[str]]]:
        """The last run's failing tests, and per test the refusals of malformed requests it met."""
        try:
            found = json.loads(self.probe.read_text(encoding="utf-8"))
            return list(found["failed"]), {k: list(v) for k, v in found["met"].items()}
        except (OSError, ValueError, KeyError, TypeError):
            return [], {}

    def sim(self, seeds: int, *, jobs: int = 1, stop_at_first: bool = True) -> tuple[int | None, str]:
        return self.run(["tests/simulation/sim.py", "--seeds", str(seeds), "--jobs", str(jobs),
                         *(["--stop-at-first"] if stop_at_first else [])], SIM_TIMEOUT_S)

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def _failed_line(output: str) -> str:
    for pattern in (r"^FAILED .*$", r"^ERROR .*$", r"^sim:   seed .*$", r"^sim: seeds=.*violations=\d+ \([^)]*\)"):
        found = re.search(pattern, output, re.M)
        if found:
            return found.group(0)[:160]
    return output.strip().splitlines()[-1][:160] if output.strip() else ""


def _all_malformed(failed: list[str], met: dict[str, list[str]], clean: dict[str, list[str]] | None = None) -> bool:
    """Every failing test met a refusal of a malformed request (one it does not meet on the unmutated
    tree, when ``clean`` holds what each met there)."""
    return bool(failed) and all(set(met.get(t, ())) - set((clean or {}).get(t, ())) for t in failed)


def _crashed(box: Sandbox, m: Mutant, original: str) -> tuple[int, str] | None:
    """After a first failure that met a malformed request: every listed test, mutated, and the ones
    that failed, unmutated; (how many failed, the first) when each met a refusal of its own."""
    box.pytest(m.tests, first_failure=False)
    failed, met = box.probed()
    if not _all_malformed(failed, met):
        return None
    mutated = (box.dir / m.file).read_text(encoding="utf-8")
    box.restore(m, original)
    try:
        box.pytest(sorted(failed), first_failure=False)
        _, clean = box.probed()
    finally:
        (box.dir / m.file).write_text(mutated, encoding="utf-8")
    return (len(failed), min(failed)) if _all_malformed(failed, met, clean) else None


def judge(box: Sandbox, m: Mutant, seeds: int) -> Outcome:
    began = time.monotonic()
    original = box.apply(m)
    try:
        code, out = box.pytest(m.tests) if m.tests else (0, "")
        if code != 0:
            if code is not None and _all_malformed(*box.probed()):
                # The first failure met a malformed request: every test decides, as one that fails on
                # the weakened guard itself (or meets only refusals it meets unmutated) makes it a kill.
                crash = _crashed(box, m, original)
                if crash is not None:
                    return Outcome(m, "crashed", time.monotonic() - began,
                                   f"{crash[0]} failing test(s), each on a request refused as malformed: {crash[1]}"[:160])
            return Outcome(m, "killed-by-tests", time.monotonic() - began, _failed_line(out) if code is not None else out)
        if seeds > 0:
            code, out = box.sim(seeds)
            if code != 0:
                return Outcome(m, "killed-by-sim", time.monotonic() - began, _failed_line(out) if code is not None else out)
        verdict = "equivalent" if m.equivalent else "survived"
        return Outcome(m, verdict, time.monotonic() - began, m.equivalent or "")
    finally:
        box.restore(m, original)


def baseline(box: Sandbox, mutants: list[Mutant], workers: int = 1, seeds: int = 0) -> str | None:
    """The unmutated copy must pass every listed test and a ``seeds``-seed make sim: otherwise 'killed'
    would mean nothing (last session seven mutants were "killed by sim" by a seed that failed on the
    unmutated code too). The tests are every listed test at once (longer than one mutant's run), and
    the sim runs every seed (no --stop-at-first: the message names all the failing ones), both spread
    over the run's workers."""
    tests = sorted({t for m in mutants for t in m.tests})
    code, out = box.pytest(tests, workers=workers, timeout=BASELINE_TIMEOUT_S) if tests else (0, "")
    if code != 0:
        return f"the unmutated tree fails its own mutant tests: {_failed_line(out) if code is not None else out}"
    if seeds > 0:
        code, out = box.sim(seeds, jobs=workers, stop_at_first=False)
        if code != 0:
            failing = re.search(r"^sim: failing seeds.*$", out, re.M)
            return (f"the unmutated tree fails the {seeds}-seed make sim: "
                    f"{(failing.group(0) if failing else _failed_line(out)) if code is not None else out}")
    return None


def table(outcomes: list[Outcome]) -> str:
    width = max([len(o.mutant.id) for o in outcomes] + [6])
    lines = [f"{'mutant':<{width}}  {'verdict':<15}  {'s':>5}  detail", "-" * (width + 60)]
    for o in outcomes:
        lines.append(f"{o.mutant.id:<{width}}  {o.verdict:<15}  {o.seconds:>5.0f}  {o.detail}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("MUTANT_JOBS", "2")))
    parser.add_argument("--seeds", type=int, default=int(os.environ.get("MUTANT_SEEDS", "100")),
                        help="seeds of make sim per mutant its tests did not kill (0: none)")
    parser.add_argument("--only", default=None, help="comma-separated mutant ids")
    parser.add_argument("--list", action="store_true", help="check and list the mutants, run nothing")
    parser.add_argument("--no-baseline", action="store_true", help="skip the unmutated run of the listed tests")
    args = parser.parse_args(argv)

    mutants, errors = load()
    for e in errors:
        print(f"mutants: {e}")
    if errors:
        return 1
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {m.id for m in mutants}
        if unknown:
            print(f"mutants: unknown ids {sorted(unknown)}")
            return 1
        mutants = [m for m in mutants if m.id in wanted]
    if args.list:
        for m in mutants:
            print(f"{m.id:<44} {m.source:<14} {m.file}{'  (equivalent)' if m.equivalent else ''}")
        print(f"mutants: {len(mutants)} listed")
        return 0

    # A stopped run (kill, Ctrl-C) still removes its copies: SIGTERM unwinds like Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    began = time.monotonic()
    jobs = max(1, min(args.jobs, len(mutants)))
    boxes = [Sandbox() for _ in range(jobs)]
    try:
        listed = sorted({t for m in mutants for t in m.tests})
        with ThreadPoolExecutor(jobs) as pool:
            list(pool.map(lambda box: box.warm(listed), boxes))
        print(f"mutants: {jobs} copies of the tree compiled in {time.monotonic() - began:.0f} s", flush=True)
        if not args.no_baseline:
            problem = baseline(boxes[0], mutants, workers=jobs, seeds=args.seeds)
            if problem:
                print(f"mutants: BASELINE NOT CLEAN, no mutant was run: {problem}")
                return 1
            print(f"mutants: the unmutated tree passes every listed test and the {args.seeds}-seed make sim "
                  f"({time.monotonic() - began:.0f} s in)", flush=True)
        mutants_began = time.monotonic()
        free = list(boxes)
        outcomes: list[Outcome] = []

        def work(m: Mutant) -> Outcome:
            box = free.pop()
            try:
                outcome = judge(box, m, args.seeds)
            finally:
                free.append(box)
            print(f"mutants: {m.id}: {outcome.verdict} ({outcome.seconds:.0f} s)", flush=True)
            return outcome

        with ThreadPoolExecutor(jobs) as pool:
            outcomes = list(pool.map(work, mutants))
    finally:
        for box in boxes:
            box.close()
    print(table(outcomes))
    survivors = [o for o in outcomes if o.verdict == "survived"]
    crashed = [o for o in outcomes if o.verdict == "crashed"]
    counts = {v: sum(o.verdict == v for o in outcomes)
              for v in ("killed-by-tests", "killed-by-sim", "crashed", "equivalent", "survived")}
    print(f"mutants: {len(outcomes)} run in {time.monotonic() - began:.0f} s: "
          + ", ".join(f"{k}={v}" for k, v in counts.items()))
    if outcomes:
        spent = time.monotonic() - mutants_began
        print(f"mutants: {spent / len(outcomes):.1f} s of wall per mutant on {jobs} worker(s) "
              f"({sum(o.seconds for o in outcomes) / len(outcomes):.0f} s each)")
    if survivors:
        print("mutants: SURVIVED (add a test that kills it, or name it equivalent with the reason): "
              + ", ".join(o.mutant.id for o in survivors))
    if crashed:
        print("mutants: CRASHED (every failing test met a malformed request: write the mutant as a valid weakened "
              "condition): " + ", ".join(o.mutant.id for o in crashed))
    return 1 if survivors or crashed else 0


if __name__ == "__main__":
    sys.exit(main())
