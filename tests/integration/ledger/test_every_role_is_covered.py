"""The ledger's contract suite follows its roles and misses none of their methods: every role Protocol
of ``pixivflow.ports`` that ``DynamoLedger`` implements has its own file here, and every method the
role declares is called (``.<name>(``) in that file. A method added to a role without a contract test
(on moto and on the twin, like the rest of the folder) fails this test."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Protocol

import pytest

from pixivflow import ports
from pixivflow.adapters.dynamo_ledger import DynamoLedger

HERE = Path(__file__).resolve().parent
ROLE_FILES = {
    "Occurrences": "test_occurrences.py",
    "CellLeases": "test_cell_leases.py",
    "CellMoves": "test_cell_moves.py",
    "WorkReservations": "test_work_reservations.py",
    "DeliveryRows": "test_delivery_rows.py",
    "SweepIndexes": "test_sweep_indexes.py",
    "RequestKeys": "test_request_keys.py",
    "SchedulePauses": "test_schedule_pauses.py",
    "OperatorTools": "test_operator_tools.py",
    "OperatorPages": "test_operator_pages.py",
    "UiSessions": "test_ui_sessions.py",
    "TopicSpaces": "test_topic_spaces.py",
}


def _methods(role: type) -> list[str]:
    """The role's methods, its own and those of the ports it extends."""
    return sorted({name for base in role.__mro__ if base.__module__.startswith(ports.__name__)
                   for name, value in vars(base).items() if inspect.isfunction(value) and not name.startswith("_")})


def _ledger_roles() -> set[str]:
    """The Protocols of ``pixivflow.ports`` whose every method the ledger adapter has."""
    return {name for name, obj in vars(ports).items()
            if inspect.isclass(obj) and obj.__module__.startswith(ports.__name__) and Protocol in obj.__mro__[1:]
            and _methods(obj) and all(callable(getattr(DynamoLedger, m, None)) for m in _methods(obj))}


def test_every_role_the_ledger_implements_has_its_own_test_file() -> None:
    assert _ledger_roles() == set(ROLE_FILES) == {role.__name__ for role in ports.LEDGER_ROLES}
    assert all((HERE / f).is_file() for f in ROLE_FILES.values())


@pytest.mark.parametrize("role", sorted(ROLE_FILES))
def test_every_method_of_the_role_is_called_in_its_test_file(role: str) -> None:
    text = (HERE / ROLE_FILES[role]).read_text(encoding="utf-8")
    methods = _methods(getattr(ports, role))
    assert methods, f"{role} declares no method"
    untested = [m for m in methods if not re.search(rf"\.{m}\(", text)]
    assert untested == [], f"{role} methods with no contract test in {ROLE_FILES[role]}: {untested}"
