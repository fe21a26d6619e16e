"""``make mutants``' runner (tests/mutants/run.py): a mutant runs on a private copy, never
on the tree it came from; a mutant its tests catch is killed, one they miss survives; a malformed
list is refused before anything runs; every listed mutant of the repository is well-formed."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

RUNNER = Path(__file__).resolve().parents[1] / "mutants" / "run.py"
spec = importlib.util.spec_from_file_location("mutant_runner", RUNNER)
run = importlib.util.module_from_spec(spec)
sys.modules["mutant_runner"] = run  # dataclasses look their module up while the class is made
spec.loader.exec_module(run)


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    (root / "shared").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "shared" / "guard.py").write_text("def allowed(owner, me):\n    return owner is None or owner == me\n")
    (root / "tests" / "test_guard.py").write_text(textwrap.dedent("""
        from guard import allowed

        def test_another_owner_is_refused():
            assert not allowed("them", "me")
    """))
    (root / "tests" / "test_nothing.py").write_text("def test_nothing():\n    assert True\n")
    return root


def _mutant(tests: list[str], **kw) -> "run.Mutant":
    return run.Mutant(kw.get("id", "guard-owner"), "shared/guard.py", "owner is None or owner == me", "True", tests, "x.toml",
                      kw.get("equivalent"))


@pytest.mark.size("large")  # three real pytest runs in a copy of a small tree (tests/README.md, test sizes)
def test_a_mutant_its_test_catches_is_killed_and_the_source_tree_is_never_touched(tmp_path):
    root = _tree(tmp_path)
    before = (root / "shared" / "guard.py").read_text()
    box = run.Sandbox(root)
    try:
        killed = run.judge(box, _mutant(["tests/test_guard.py"]), seeds=0)
        survived = run.judge(box, _mutant(["tests/test_nothing.py"]), seeds=0)
        equivalent = run.judge(box, _mutant(["tests/test_nothing.py"], equivalent="cannot be observed"), seeds=0)
        assert (box.dir / "shared" / "guard.py").read_text() == before  # the copy is restored after each
    finally:
        box.close()
    assert killed.verdict == "killed-by-tests" and "test_another_owner_is_refused" in killed.detail
    assert survived.verdict == "survived"
    assert equivalent.verdict == "equivalent" and equivalent.detail == "cannot be observed"
    assert (root / "shared" / "guard.py").read_text() == before


def _ledger_tree(tmp_path: Path) -> Path:
    """A guard whose request a mutant can break instead of weaken: ``_malformed`` raises what DynamoDB
    answers a request whose expression is not valid (a placeholder left unused)."""
    root = _tree(tmp_path)
    (root / "shared" / "guard.py").write_text(textwrap.dedent("""
        from botocore.exceptions import ClientError

        def _malformed():
            raise ClientError({"Error": {"Code": "ValidationException",
                                         "Message": "Value provided in ExpressionAttributeValues unused in expressions: keys: {:me}"}},
                              "UpdateItem")

        def allowed(owner, me):
            return owner is None or owner == me
    """))
    (root / "tests" / "test_both.py").write_text(textwrap.dedent("""
        from guard import allowed

        def test_another_owner_is_refused():
            assert not allowed("them", "me")

        def test_no_owner_is_allowed():
            assert allowed(None, "me")
    """))
    (root / "tests" / "test_refusal.py").write_text(textwrap.dedent("""
        import pytest
        from botocore.exceptions import ClientError
        from guard import _malformed, allowed

        def test_a_malformed_request_is_refused_and_so_is_another_owner():
            with pytest.raises(ClientError):
                _malformed()  # met on purpose, mutated or not (as the contract tests do)
            assert not allowed("them", "me")
    """))
    return root


@pytest.mark.size("large")  # about ten real pytest runs in a copy of a small tree
def test_a_mutant_whose_every_failing_test_met_a_malformed_request_crashed_and_fails_the_run(tmp_path):
    root = _ledger_tree(tmp_path)
    before = (root / "shared" / "guard.py").read_text()
    box = run.Sandbox(root)
    try:
        # every test fails, each on the ValidationException: the guard was never evaluated
        crashed = run.judge(box, run.Mutant("guard-crash", "shared/guard.py", "owner is None or owner == me", "_malformed()",
                                            ["tests/test_both.py"], "x.toml"), seeds=0)
        # the same tests, a valid weakened guard: a kill
        weakened = run.judge(box, run.Mutant("guard-always", "shared/guard.py", "owner is None or owner == me",
                                             "owner is None or owner == me or True", ["tests/test_both.py"], "x.toml"), seeds=0)
        # one test fails on the malformed request first, another on the guard itself: still a kill
        mixed = run.judge(box, run.Mutant("guard-half", "shared/guard.py", "owner is None or owner == me",
                                          "(_malformed() if owner is None else True)", ["tests/test_both.py"], "x.toml"), seeds=0)
        # the only failing test meets the refusal on the unmutated tree too: it failed on the guard
        on_purpose = run.judge(box, run.Mutant("guard-always-2", "shared/guard.py", "owner is None or owner == me",
                                               "owner is None or owner == me or True", ["tests/test_refusal.py"], "x.toml"),
                               seeds=0)
        assert (box.dir / "shared" / "guard.py").read_text() == before  # restored after every judgement
    finally:
        box.close()
    assert on_purpose.verdict == "killed-by-tests"
    assert crashed.verdict == "crashed" and "2 failing test(s)" in crashed.detail
    assert weakened.verdict == "killed-by-tests" and "test_another_owner_is_refused" in weakened.detail
    assert mixed.verdict == "killed-by-tests"


def test_a_malformed_list_is_refused(tmp_path):
    root = _tree(tmp_path)
    lists = tmp_path / "lists"
    lists.mkdir()
    (lists / "a.toml").write_text(textwrap.dedent('''
        [[mutant]]
        id = "Not Kebab"
        file = "shared/guard.py"
        old = "return"
        new = "return"
        tests = ["tests/missing.py"]

        [[mutant]]
        id = "twice"
        file = "shared/nowhere.py"
        old = "x"
        new = "y"
        tests = []
    '''))
    (lists / "b.toml").write_text('[[mutant]]\nid = "twice"\nfile = "shared/guard.py"\nold = "o"\nnew = "0"\ntests = ["tests/test_guard.py"]\n')
    _, errors = run.load(lists, root)
    text = "\n".join(errors)
    assert "not kebab-case" in text and "equals 'old'" in text and "no test file tests/missing.py" in text
    assert "no file shared/nowhere.py" in text and "no tests listed" in text
    assert "already used" in text and "occurs 6 times" in text  # "o" is six times in guard.py


def test_every_mutant_of_the_repository_is_well_formed():
    mutants, errors = run.load()
    assert errors == []
    assert len(mutants) >= 30
    assert {"ledger-reserve-work-condition", "owned-by-outbox-handed-over-live", "delivery-cell-already-ended",
            "rollup-close-waits-for-open-cells"} <= {m.id for m in mutants}


def test_each_mutant_list_is_named_after_the_module_whose_guards_it_holds():
    """``services.execution.toml`` holds the mutants of ``shared/pixivflow/services/execution.py``, and
    only those: whoever changes a guard finds its mutants by the module's name."""
    mutants, _ = run.load()
    misfiled = []
    for m in mutants:
        path = Path(m.file)
        parts = path.with_suffix("").parts
        module = ".".join(parts[2:] if parts[:2] == ("shared", "pixivflow") else parts)
        if m.source != f"{module}.toml":
            misfiled.append(f"{m.id} ({m.file}) is in {m.source}, not {module}.toml")
    assert not misfiled, "\n".join(misfiled)


def _with_sim(root: Path, *, failing: list[int]) -> Path:
    """A stand-in ``tests/simulation/sim.py`` for the copy: it reports the given seeds as failing (the
    real sim's summary lines) and records the arguments it was run with."""
    sim = root / "tests" / "simulation" / "sim.py"
    sim.parent.mkdir(parents=True, exist_ok=True)
    sim.write_text(textwrap.dedent(f"""
        import sys
        from pathlib import Path
        Path("sim-args.txt").write_text(" ".join(sys.argv[1:]))
        failing = {failing!r}
        print(f"sim: seeds=100 fires=700 violations={{len(failing)}} (none) wall=1.0s")
        if failing:
            print(f"sim: failing seeds (replay with SEED=n make sim): {{failing}}")
        sys.exit(1 if failing else 0)
    """))
    return root


def test_a_baseline_whose_sim_fails_on_unmutated_code_stops_the_run_naming_the_seeds(tmp_path):
    box = run.Sandbox(_with_sim(_tree(tmp_path), failing=[17, 42]))
    try:
        problem = run.baseline(box, [_mutant([])], workers=2, seeds=100)
        args = (box.dir / "sim-args.txt").read_text().split()
    finally:
        box.close()
    assert problem is not None and "100-seed make sim" in problem and "[17, 42]" in problem
    # every seed of the baseline runs on both workers: all the failing seeds are named, not the first
    assert args == ["--seeds", "100", "--jobs", "2"]


def test_a_clean_baseline_runs_the_sim_and_passes(tmp_path):
    box = run.Sandbox(_with_sim(_tree(tmp_path), failing=[]))
    try:
        assert run.baseline(box, [_mutant([])], workers=1, seeds=100) is None
        ran = (box.dir / "sim-args.txt").exists()
        assert run.baseline(box, [_mutant([])], workers=1, seeds=0) is None
    finally:
        box.close()
    assert ran
