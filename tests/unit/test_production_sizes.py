"""Files with one job: no production module (everything in shared/pixivflow but the dev workshop in
local/) over 600 lines, no function over 80. A module that grows past them is split by what it
does, as the executor (execution / binding / storing) and the ledger adapter were."""

from __future__ import annotations

import ast
from pathlib import Path

import pixivflow

PACKAGE = Path(pixivflow.__file__).resolve().parent
MAX_LINES, MAX_FUNCTION_LINES = 600, 80


def _production() -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py")) if p.relative_to(PACKAGE).parts[0] != "local"]


def test_no_production_module_is_over_600_lines() -> None:
    long = {p.relative_to(PACKAGE).as_posix(): n for p in _production()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}


def test_no_production_function_is_over_80_lines() -> None:
    long = []
    for path in _production():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(PACKAGE).as_posix()}:{node.lineno} {node.name} ({lines} lines)")
    assert long == []
