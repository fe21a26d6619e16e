"""Route kinds are declared once (``pixivflow.route_kinds``): the product asks a route what it can
do and never which kind it is, and a route's ``capabilities`` block narrows what its kind can do,
never widens it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pixivflow import route_kinds
from pixivflow.config import RouteModel

PACKAGE = Path(route_kinds.__file__).resolve().parents[1]
# Text from outside (a route's or PixivFlow's error message) is classified by the words in it;
# these two classifiers may name a kind as a word in that text.
CLASSIFIERS = {("domain/ack.py", "telegram"), ("domain/reasons.py", "telegram")}


def _code_files() -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py")) if p.relative_to(PACKAGE).parts[0] not in ("route_kinds", "local")]


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body \
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            found.add(id(body[0].value))
    return found


def test_no_code_outside_the_registry_names_a_route_kind() -> None:
    """No ``==``, ``in`` or dispatch table on a kind's name or key anywhere but route_kinds/."""
    named = {k.name for k in route_kinds.BUILT_IN} | {k.value for k in route_kinds.BUILT_IN}
    found = []
    for path in _code_files():
        rel = path.relative_to(PACKAGE).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs \
                    and node.value in named and (rel, node.value) not in CLASSIFIERS:
                found.append(f"{rel}:{node.lineno} names the kind {node.value!r}")
            if isinstance(node, ast.Attribute) and node.attr in ("route_type", "route_kind", "name") and \
                    isinstance(node.value, ast.Attribute) and node.value.attr == "route_kind" and \
                    (rel, ast.unparse(node)) != ("config/routes.py", "self.route_kind.name"):  # route_type itself
                found.append(f"{rel}:{node.lineno} reads {ast.unparse(node)}")
            if isinstance(node, ast.Compare) and any(isinstance(n, ast.Attribute) and n.attr == "route_type"
                                                     for n in [node.left, *node.comparators]):
                found.append(f"{rel}:{node.lineno} compares a route's type")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance" and \
                    any(isinstance(a, ast.Name) and a.id.endswith("Route") for a in ast.walk(node.args[1])):
                found.append(f"{rel}:{node.lineno} tests a route's class")
    assert found == []


def test_every_built_in_kind_is_registered_once_with_its_own_model() -> None:
    kinds = route_kinds.kinds()
    assert set(route_kinds.BUILT_IN) <= set(kinds)
    assert len({k.model for k in kinds}) == len({k.name for k in kinds}) == len(kinds)
    assert all(issubclass(k.model, RouteModel) and route_kinds.kind_of(k.model.model_construct()) is k for k in kinds)
    with pytest.raises(ValueError, match="clashes"):
        route_kinds.register(route_kinds.RouteKind(name="telegram2", key="type", value="telegram",
                                                   model=RouteModel, parse_ack=lambda r, a: None, sender=lambda t: None))


@pytest.mark.parametrize(("block", "previews", "files"), [
    ({"type": "httpMultipart", "url": "https://x.example/s"}, True, True),
    ({"type": "httpMultipart", "url": "https://x.example/s", "capabilities": {"image": False}}, False, True),
    ({"type": "httpMultipart", "url": "https://x.example/s", "capabilities": {"file": False, "image": True}}, True, False),
    # a capability the kind does not have is not granted by saying so
    ({"type": "webhook", "url": "https://x.example/g", "capabilities": {"image": True}}, False, True),
    ({"kind": "webhook", "url": "https://x.example/j"}, False, False),
])
def test_a_routes_capabilities_narrow_its_kind_and_never_widen_it(block: dict, previews: bool, files: bool) -> None:
    route = route_kinds.validate(block)
    assert (route.takes_previews, route.carries_files) == (previews, files)


def test_every_route_is_judged_by_its_own_kind_and_all_findings_are_listed() -> None:
    from pixivflow.config import parse_config
    from pixivflow.domain.errors import ConfigError

    doc = {"source": {"kind": "catalog", "path": "catalog.json"}, "delivery": {"targets": {
        "json": {"kind": "webhook", "url": "ftp://nowhere"},
        "bot": {"type": "telegram", "botId": "b", "botToken": "nope", "chatId": "1", "publishChatId": "2",
                "controlPlaneUrl": "https://cp.example", "controlPlaneToken": "t"},
        "submit": {"type": "httpMultipart", "url": "https://x.example/s", "arrayFormat": "csv"}}}}
    with pytest.raises(ConfigError) as raised:
        parse_config(doc)
    text = str(raised.value)
    assert "delivery.targets.json.url: must be an http(s) URL" in text
    assert "delivery.targets.bot.botToken: must be a Telegram bot token" in text
    assert "delivery.targets.submit.arrayFormat: Input should be 'comma', 'repeat' or 'json'" in text
