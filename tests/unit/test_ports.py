"""The ports are small and the adapters keep them: every Protocol of ``pixivflow.ports`` has at most
twelve methods (a role's fake stays small), the one ledger adapter implements every ledger role with
the signatures the role declares, and the services reach the ledger through a role only."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import Protocol

import pytest

from pixivflow import ports

PACKAGE = Path(ports.__file__).resolve().parents[1]
LEDGER_ROLES = tuple(role.__name__ for role in ports.LEDGER_ROLES)


def _protocols() -> dict[str, type]:
    return {name: obj for name, obj in vars(ports).items()
            if inspect.isclass(obj) and obj.__module__.startswith(ports.__name__) and Protocol in obj.__mro__[1:]}


def _methods(port: type) -> dict[str, object]:
    """The port's methods, its own and those of the ports it extends."""
    found: dict[str, object] = {}
    for base in reversed(port.__mro__):
        if base.__module__.startswith(ports.__name__):
            found.update({n: v for n, v in vars(base).items() if inspect.isfunction(v) and not n.startswith("_")})
    return found


def _same_signature(port: type, adapter: type) -> None:
    for name, declared in _methods(port).items():
        implemented = getattr(adapter, name, None)
        assert callable(implemented), f"{adapter.__name__} lacks {port.__name__}.{name}"
        want = [(p.name, p.kind) for p in inspect.signature(declared).parameters.values()]
        have = [(p.name, p.kind) for p in inspect.signature(implemented).parameters.values()]
        assert have == want, f"{adapter.__name__}.{name}{inspect.signature(implemented)} is not {port.__name__}.{name}"


def test_no_port_has_more_than_twelve_methods() -> None:
    protocols = _protocols()
    assert set(LEDGER_ROLES) <= set(protocols) and "Ledger" not in protocols
    too_big = {name: len(_methods(p)) for name, p in protocols.items() if len(_methods(p)) > 12}
    assert not too_big


@pytest.mark.parametrize("role", LEDGER_ROLES)
def test_the_ledger_adapter_implements_each_role_as_declared(role: str) -> None:
    from pixivflow.adapters.dynamo_ledger import DynamoLedger

    _same_signature(getattr(ports, role), DynamoLedger)


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


def _lines_matching(pattern: str) -> list[str]:
    """The lines of services/, http/ and handlers/ that match ``pattern``, as ``folder/file:line: text``."""
    found = []
    for folder in ("services", "http", "handlers"):
        for path in sorted((PACKAGE / folder).glob("*.py")):
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if re.search(pattern, line):
                    found.append(f"{folder}/{path.name}:{n}: {line.strip()}")
    return found


def test_services_reach_the_ledger_through_a_role_only() -> None:
    reaching = _lines_matching(r"\bengine\.ledger\.\w+\(")
    assert not reaching, "\n".join(reaching)


def test_the_work_sources_declare_what_they_can_do_through_their_port() -> None:
    """Both sources subclass the port, so a capability one lacks answers the port's default (no plan,
    no previews, no suggestions, no governor) rather than an AttributeError the services would
    have to probe for; the Pixiv source plans and suggests, the catalogue hands over whole works."""
    from pixivflow.adapters.catalog_source import CatalogSource
    from pixivflow.adapters.pixiv.source import PixivSource

    for source in (CatalogSource, PixivSource):
        assert ports.WorkSource in source.__mro__
        _same_signature(ports.WorkSource, source)
    assert PixivSource.plan is not ports.WorkSource.plan and PixivSource.autocomplete is not ports.WorkSource.autocomplete
    assert CatalogSource.plan is ports.WorkSource.plan and CatalogSource.governor is None
    assert CatalogSource.download_previews is not ports.WorkSource.download_previews


def test_the_artifact_stores_implement_the_whole_port() -> None:
    from pixivflow.adapters.s3_artifacts import MemoryArtifacts, S3Artifacts

    for store in (MemoryArtifacts, S3Artifacts):
        _same_signature(ports.ArtifactStore, store)


def test_no_service_probes_a_port_for_what_it_can_do() -> None:
    """A capability is a method of the port; asking an adapter whether it has one (``getattr`` or
    ``hasattr`` on the engine's source or store) hides a missing method until it is called."""
    probing = _lines_matching(r"\b(getattr|hasattr)\((self\.)?(engine\.)?(source|artifacts)\b")
    assert not probing, "\n".join(probing)


def test_the_composition_root_and_the_services_read_no_private_attribute_of_another_object() -> None:
    """``runtime``, the services, the HTTP layer and the handlers reach an adapter only through
    what its port declares: no ``other._attr`` (the DynamoDB client is handed to each adapter that
    needs it; the ledger's log is given to its constructor), nor a private API of a library."""
    import ast

    allowed: set[tuple[str, str]] = set()
    files = [PACKAGE / "runtime.py"] + [p for folder in ("services", "http", "handlers")
                                        for p in sorted((PACKAGE / folder).glob("*.py"))]
    reads = set()
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
                reads.add((path.relative_to(PACKAGE).as_posix(), ast.unparse(node)))
    assert reads == allowed


def test_no_service_takes_an_object_holding_every_collaborator() -> None:
    """A use case receives the dataclass of what it uses (``Executions``, ``Deliveries`` ...), built
    by the composition root: no function of services/ takes an ``engine`` or the wiring, no service
    imports ``pixivflow.wiring`` or the runtime, and none imports Powertools (logging and metrics
    are the ``Log`` and ``Metrics`` ports)."""
    import ast

    found = []
    for path in sorted((PACKAGE / "services").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for arg in node.args.args + node.args.kwonlyargs:
                    note = ast.unparse(arg.annotation) if arg.annotation is not None else ""
                    if arg.arg == "engine" or "Wiring" in note or "Engine" in note:
                        found.append(f"services/{path.name}:{node.lineno} {node.name}({arg.arg}: {note})")
            elif isinstance(node, ast.ImportFrom):
                module = "." * node.level + (node.module or "")
                if module.lstrip(".").split(".")[0] in ("wiring", "runtime", "aws_lambda_powertools") or \
                        module in ("..wiring", "..runtime"):
                    found.append(f"services/{path.name}:{node.lineno} imports {module}")
            elif isinstance(node, ast.Import):
                found += [f"services/{path.name}:{node.lineno} imports {a.name}" for a in node.names
                          if a.name.split(".")[0] == "aws_lambda_powertools"]
    assert found == []


def test_no_service_imports_the_configuration_model() -> None:
    """The services read the deployment's configuration through the ``Settings`` ports: the
    pydantic models of ``pixivflow.config`` (PixivFlow's file format) stay outside, so a renamed
    key or a new validation rule touches config/ and the port, not a use case."""
    pattern = re.compile(r"^\s*(from\s+(\.\.|pixivflow\.)config\b|import\s+pixivflow\.config\b)")
    found = [f"services/{path.name}:{n}" for path in sorted((PACKAGE / "services").glob("*.py"))
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert found == []


def _settings_members(port: type) -> dict[str, object]:
    return {n: v for n, v in vars(port).items()
            if not n.startswith("_") and (isinstance(v, property) or inspect.isfunction(v))}


def test_the_configuration_models_provide_every_setting_the_services_read() -> None:
    """mypy checks the models against the ``Settings`` ports where the composition root hands them
    over; this walks the same ports over a loaded published config, so a member a model lost is
    found by ``make test`` too, with its path."""
    from pixivflow.config import parse_config

    published = Path(__file__).resolve().parents[1] / "fixtures" / "pixivflow_configs" / "pixivflow.production.json"
    config = parse_config(json.loads(published.read_text(encoding="utf-8")), base_dir=published.parent)
    target = next(t for t in config.targets if t.delivery is not None)
    schedule = config.schedules[0]
    route = config.route(target.routes()[0])
    instances = [(ports.Settings, config), (ports.ScheduleSettings, schedule), (ports.TargetSettings, target),
                 (ports.TargetDeliverySettings, target.delivery), (ports.NoMatchSettings, target.noMatchPolicy),
                 (ports.RouteSettings, route), (ports.SchedulerRuntimeSettings, config.schedulerRuntime),
                 (ports.TriggerSettings, config.schedulerRuntime.trigger), (ports.DeliverySettings, config.delivery),
                 (ports.DownloadSettings, config.download), (ports.SourceSettings, config.source),
                 (ports.JobsSettings, config.jobs), (ports.PixivSettings, config.pixiv)]
    settings_ports = {name for name, p in _protocols().items() if name.endswith("Settings")}
    assert {p.__name__ for p, _ in instances} == settings_ports
    missing = [f"{port.__name__}.{name}" for port, obj in instances for name in _settings_members(port)
               if not hasattr(obj, name)]
    assert missing == []


def test_every_wake_up_message_is_sent_by_one_function_that_logs_a_refusal() -> None:
    """A message SQS did not take is logged wherever it was sent: the use cases wake the execute and
    deliver functions through ``services.messages`` (``wake_cells``, ``wake_outbox``), never by
    calling the queues themselves."""
    sending = [line for line in _lines_matching(r"\.send_(outbox|execution)\(") if not line.startswith("services/messages.py")]
    assert sending == []
