"""The ports are small and the adapters keep them: every Protocol of ``pixivflow.ports`` has at most
twelve methods (a role's fake stays small), the one ledger adapter implements every ledger role with
the signatures the role declares, and the services reach the ledger through a role only."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Protocol

import pytest

from pixivflow import ports

PACKAGE = Path(ports.__file__).resolve().parent
LEDGER_ROLES = ("Occurrences", "CellLeases", "CellMoves", "WorkReservations", "DeliveryRows", "SweepIndexes",
                "RequestKeys", "SchedulePauses", "OperatorTools", "UiSessions", "TopicSpaces")


def _protocols() -> dict[str, type]:
    return {name: obj for name, obj in vars(ports).items()
            if inspect.isclass(obj) and obj.__module__ == ports.__name__ and Protocol in obj.__mro__[1:]}


def _methods(port: type) -> dict[str, object]:
    """The port's methods, its own and those of the ports it extends."""
    found: dict[str, object] = {}
    for base in reversed(port.__mro__):
        if base.__module__ == ports.__name__:
            found.update({n: v for n, v in vars(base).items() if inspect.isfunction(v) and not n.startswith("_")})
    return found


def test_no_port_has_more_than_twelve_methods() -> None:
    protocols = _protocols()
    assert set(LEDGER_ROLES) <= set(protocols) and "Ledger" not in protocols
    too_big = {name: len(_methods(p)) for name, p in protocols.items() if len(_methods(p)) > 12}
    assert not too_big


@pytest.mark.parametrize("role", LEDGER_ROLES)
def test_the_ledger_adapter_implements_each_role_as_declared(role: str) -> None:
    from pixivflow.adapters.dynamo_ledger import DynamoLedger

    for name, declared in _methods(getattr(ports, role)).items():
        implemented = getattr(DynamoLedger, name, None)
        assert callable(implemented), f"DynamoLedger lacks {role}.{name}"
        want = [(p.name, p.kind) for p in inspect.signature(declared).parameters.values()]
        have = [(p.name, p.kind) for p in inspect.signature(implemented).parameters.values()]
        assert have == want, f"DynamoLedger.{name}{inspect.signature(implemented)} is not {role}.{name}{inspect.signature(declared)}"


def test_every_ledger_method_belongs_to_exactly_one_role() -> None:
    owners: dict[str, list[str]] = {}
    for role in LEDGER_ROLES:
        for name in _methods(getattr(ports, role)):
            owners.setdefault(name, []).append(role)
    assert {n: r for n, r in owners.items() if len(r) > 1} == {}


def test_the_queue_adapter_implements_its_port() -> None:
    from pixivflow.adapters.sqs_queues import SqsQueues

    for name in _methods(ports.Queues):
        assert callable(getattr(SqsQueues, name, None)), f"SqsQueues lacks Queues.{name}"


def test_services_reach_the_ledger_through_a_role_only() -> None:
    reaching = []
    for folder in ("services", "http", "handlers"):
        for path in sorted((PACKAGE / folder).glob("*.py")):
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if re.search(r"\bengine\.ledger\.\w+\(", line):
                    reaching.append(f"{folder}/{path.name}:{n}: {line.strip()}")
    assert not reaching, "\n".join(reaching)
