"""DynamoDB expression language for the in-memory twin (condition, key, filter, update, projection).

Only the language DynamoDB documents, evaluated over low-level attribute values
(``{"S": "x"}``, ``{"N": "1"}``, ``{"M": {...}}`` …). Parsed expressions are cached by their text:
the ledger sends the same few dozen expressions over and over.

Semantics kept from DynamoDB where the ledger depends on them:
* every operand of an update is read from the item BEFORE the update (``SET a = b, b = a`` swaps);
* a comparison with a missing attribute is false, except ``<>``, which is true;
* values of different types are never equal and never ordered;
* numbers compare as decimals, strings by code point (= UTF-8 byte order), binary by bytes.
"""

from __future__ import annotations

import marshal
import re
from decimal import Decimal
from functools import lru_cache
from typing import Any, Mapping

from .reserved import RESERVED_WORDS

_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+)|(?P<name>#[A-Za-z0-9_]+)|(?P<value>:[A-Za-z0-9_]+)|(?P<ident>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op><>|<=|>=|[=<>(),.\[\]+\-]))"
)
_KEYWORDS = {"AND", "OR", "NOT", "BETWEEN", "IN", "SET", "REMOVE", "ADD", "DELETE"}


class ExpressionError(ValueError):
    """A malformed expression, a missing placeholder or a type error: DynamoDB's ValidationException."""


def _tokens(text: str, raw: list[str] | None = None) -> list[tuple[str, str]]:
    """The tokens of ``text`` (keywords upper-cased); ``raw`` collects each token as written."""
    out: list[tuple[str, str]] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ExpressionError(f"Invalid expression: unexpected text at {text[pos:pos + 12]!r}")
        kind = m.lastgroup or ""
        tok = m.group(kind)
        if kind == "ident" and tok.upper() in _KEYWORDS:
            kind, tok = "kw", tok.upper()
        out.append((kind, tok))
        if raw is not None:
            raw.append(m.group(m.lastgroup or ""))
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.raw: list[str] = []
        self.toks = _tokens(text, self.raw)
        self.i = 0

    def peek(self, offset: int = 0) -> tuple[str, str] | None:
        j = self.i + offset
        return self.toks[j] if j < len(self.toks) else None

    def take(self, kind: str | None = None, tok: str | None = None) -> tuple[str, str]:
        t = self.peek()
        if t is None or (kind and t[0] != kind) or (tok and t[1] != tok):
            raise ExpressionError(f"Invalid expression: expected {tok or kind}, got {t[1] if t else 'end'}")
        self.i += 1
        return t

    def at(self, kind: str, tok: str | None = None) -> bool:
        t = self.peek()
        return t is not None and t[0] == kind and (tok is None or t[1] == tok)

    def done(self) -> None:
        if self.i != len(self.toks):
            raise ExpressionError(f"Invalid expression: unexpected {self.toks[self.i][1]!r}")

    # paths: a.b[1].#c
    def path(self) -> tuple:
        parts: list[Any] = [self._segment()]
        while True:
            if self.at("op", "."):
                self.take()
                parts.append(self._segment())
            elif self.at("op", "["):
                self.take()
                parts.append(int(self.take("num")[1]))
                self.take("op", "]")
            else:
                return ("path", tuple(parts))

    def _segment(self) -> tuple[str, str]:
        kind, tok = self.take()
        if kind == "kw":  # AND, SET, ... are reserved words too
            raise ExpressionError(f"Attribute name is a reserved keyword; reserved keyword: {self.raw[self.i - 1]}")
        if kind not in ("name", "ident"):
            raise ExpressionError(f"Invalid expression: {tok!r} is not an attribute name")
        if kind == "ident" and tok.upper() in RESERVED_WORDS:
            # DynamoDB refuses a reserved word named bare anywhere in a document path (reserved.py)
            raise ExpressionError(f"Attribute name is a reserved keyword; reserved keyword: {tok}")
        return (kind, tok)

    # conditions
    def condition(self) -> tuple:
        left = self._and()
        while self.at("kw", "OR"):
            self.take()
            left = ("or", left, self._and())
        return left

    def _and(self) -> tuple:
        left = self._not()
        while self.at("kw", "AND"):
            self.take()
            left = ("and", left, self._not())
        return left

    def _not(self) -> tuple:
        if self.at("kw", "NOT"):
            self.take()
            return ("not", self._not())
        return self._primary()

    def _primary(self) -> tuple:
        if self.at("op", "("):
            self.take()
            inner = self.condition()
            self.take("op", ")")
            return inner
        t = self.peek()
        if t and t[0] == "ident" and self.peek(1) == ("op", "(") and t[1] != "size":
            return self._function()
        left = self.operand()
        if self.at("kw", "BETWEEN"):
            self.take()
            low = self.operand()
            self.take("kw", "AND")
            return ("between", left, low, self.operand())
        if self.at("kw", "IN"):
            self.take()
            self.take("op", "(")
            options = [self.operand()]
            while self.at("op", ","):
                self.take()
                options.append(self.operand())
            self.take("op", ")")
            if len(options) > 100:
                raise ExpressionError("Invalid expression: IN takes at most 100 operands")
            return ("in", left, tuple(options))
        kind, op = self.take("op")
        if op not in ("=", "<>", "<", "<=", ">", ">="):
            raise ExpressionError(f"Invalid expression: {op!r} is not a comparator")
        return ("cmp", op, left, self.operand())

    def _function(self) -> tuple:
        name = self.take("ident")[1]
        self.take("op", "(")
        args = [self.operand()]
        while self.at("op", ","):
            self.take()
            args.append(self.operand())
        self.take("op", ")")
        arity = {"attribute_exists": 1, "attribute_not_exists": 1, "attribute_type": 2, "begins_with": 2, "contains": 2}
        if name not in arity:
            raise ExpressionError(f"Invalid function name; function: {name}")
        if len(args) != arity[name] or args[0][0] != "path":
            raise ExpressionError(f"Invalid arguments for {name}")
        return ("fn", name, tuple(args))

    def operand(self) -> tuple:
        if self.at("value"):
            return ("value", self.take()[1])
        if self.at("ident", "size") and self.peek(1) == ("op", "("):
            self.take()
            self.take("op", "(")
            p = self.path()
            self.take("op", ")")
            return ("size", p)
        return self.path()

    # updates
    def update(self) -> list[tuple]:
        clauses: list[tuple] = []
        seen: set[str] = set()
        while self.peek() is not None:
            kw = self.take("kw")[1]
            if kw in seen:
                raise ExpressionError(f"Invalid UpdateExpression: The \"{kw}\" section can only be used once")
            seen.add(kw)
            while True:
                if kw == "SET":
                    target = self.path()
                    self.take("op", "=")
                    clauses.append(("set", target, self._set_value()))
                elif kw == "REMOVE":
                    clauses.append(("remove", self.path()))
                elif kw in ("ADD", "DELETE"):
                    target = self.path()
                    clauses.append((kw.lower(), target, ("value", self.take("value")[1])))
                else:
                    raise ExpressionError(f"Invalid UpdateExpression: {kw}")
                if self.at("op", ","):
                    self.take()
                    continue
                break
        if not clauses:
            raise ExpressionError("Invalid UpdateExpression: empty")
        return clauses

    def _set_value(self) -> tuple:
        left = self._set_operand()
        if self.at("op", "+") or self.at("op", "-"):
            op = self.take()[1]
            return ("arith", op, left, self._set_operand())
        return left

    def _set_operand(self) -> tuple:
        t = self.peek()
        if t and t[0] == "ident" and self.peek(1) == ("op", "(") and t[1] in ("if_not_exists", "list_append"):
            name = self.take()[1]
            self.take("op", "(")
            a = self._set_operand() if name == "list_append" else self.path()
            self.take("op", ",")
            b = self._set_operand()
            self.take("op", ")")
            return (name, a, b)
        if self.at("value"):
            return ("value", self.take()[1])
        return self.path()

    def projection(self) -> list[tuple]:
        paths = [self.path()]
        while self.at("op", ","):
            self.take()
            paths.append(self.path())
        return paths


def _parse(text: str, kind: str, rule: str) -> Any:
    """Parse ``text`` by one grammar rule; a refusal names the parameter as DynamoDB does
    ("Invalid UpdateExpression: ...")."""
    try:
        p = _Parser(text)
        out = getattr(p, rule)()
        p.done()
    except ExpressionError as exc:
        detail = str(exc)
        for prefix in ("Invalid expression: ", f"Invalid {kind}: "):
            detail = detail.removeprefix(prefix)
        raise ExpressionError(f"Invalid {kind}: {detail}") from None
    return out


@lru_cache(maxsize=4096)
def parse_condition(text: str, kind: str = "ConditionExpression") -> tuple:
    """A ConditionExpression, FilterExpression or KeyConditionExpression (``kind`` names it in errors)."""
    return _parse(text, kind, "condition")


@lru_cache(maxsize=4096)
def parse_update(text: str) -> tuple:
    return tuple(_parse(text, "UpdateExpression", "update"))


@lru_cache(maxsize=1024)
def parse_projection(text: str) -> tuple:
    return tuple(_parse(text, "ProjectionExpression", "projection"))


# --------------------------------------------------------------------------- evaluation

_MISSING = object()


@lru_cache(maxsize=8192)
def tree_placeholders(tree: Any) -> tuple[frozenset[str], frozenset[str]]:
    names, values = placeholders(tree)
    return frozenset(names), frozenset(values)


def clone(value: Any) -> Any:
    """A copy of an attribute value or item (dicts, lists and immutable leaves only): copy.deepcopy
    was the twin's hottest function, and this one recursing into every leaf the next (leaves are
    copied by reference, so only containers cost a call). A stored item is plain dicts, lists, str,
    bytes and bools (``canon``), which marshal round-trips in C at less than half the cost of the
    recursion; anything marshal refuses (a subclass, a Decimal) takes the recursion."""
    t = type(value)
    if t is dict or t is list:
        try:
            return marshal.loads(marshal.dumps(value))
        except ValueError:
            pass
    if t is dict:
        return {k: (clone(v) if type(v) is dict or type(v) is list else v) for k, v in value.items()}
    if t is list:
        return [(clone(v) if type(v) is dict or type(v) is list else v) for v in value]
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clone(v) for v in value]
    return value


def placeholders(tree: Any, names: set[str] | None = None, values: set[str] | None = None) -> tuple[set[str], set[str]]:
    """Every ``#name`` and ``:value`` a parsed expression uses (found statically, never by evaluation)."""
    names = set() if names is None else names
    values = set() if values is None else values
    if isinstance(tree, tuple):
        if len(tree) == 2 and tree[0] == "name" and isinstance(tree[1], str):
            names.add(tree[1])
        elif len(tree) == 2 and tree[0] == "value" and isinstance(tree[1], str):
            values.add(tree[1])
        else:
            for part in tree:
                placeholders(part, names, values)
    return names, values


@lru_cache(maxsize=4096)
def _check_placeholders(trees: tuple, names: frozenset[str], values: frozenset[str]) -> None:
    """DynamoDB's placeholder rules for one request's expressions and placeholder keys (cached: the same
    few combinations come back on every call; a refusal is not cached and is recomputed)."""
    if not trees:  # placeholders without any expression: refused before any "unused" check
        for label, given in (("ExpressionAttributeNames", names), ("ExpressionAttributeValues", values)):
            if given:
                raise ExpressionError(f"{label} can only be specified when using expressions")
    used_n: set[str] = set()
    used_v: set[str] = set()
    for tree in trees:
        n, v = tree_placeholders(tree)
        used_n |= n
        used_v |= v
    missing_n = used_n - names
    if missing_n:
        raise ExpressionError("An expression attribute name used in the document path is not defined; "
                              f"attribute name: {sorted(missing_n)[0]}")
    missing_v = used_v - values
    if missing_v:
        raise ExpressionError("An expression attribute value used in expression is not defined; "
                              f"attribute value: {sorted(missing_v)[0]}")
    unused_n = names - used_n
    if unused_n:
        raise ExpressionError(f"Value provided in ExpressionAttributeNames unused in expressions: keys: {{{', '.join(sorted(unused_n))}}}")
    unused_v = values - used_v
    if unused_v:
        raise ExpressionError(f"Value provided in ExpressionAttributeValues unused in expressions: keys: {{{', '.join(sorted(unused_v))}}}")


class Context:
    """The placeholders of one request. Like DynamoDB, every placeholder an expression uses must be
    defined, and every one defined must be used by one of the request's expressions."""

    def __init__(self, names: Mapping[str, str] | None, values: Mapping[str, Any] | None, *trees: Any) -> None:
        self.names = dict(names or {})
        self.values = dict(values or {})
        _check_placeholders(trees, frozenset(self.names), frozenset(self.values))

    def name(self, seg: tuple[str, str]) -> str:
        kind, tok = seg
        return tok if kind == "ident" else self.names[tok]

    def value(self, tok: str) -> Any:
        return self.values[tok]


def resolve(item: Mapping[str, Any], path: tuple, ctx: Context) -> Any:
    node: Any = {"M": item}
    for seg in path[1]:
        if isinstance(seg, int):
            if "L" not in node or seg >= len(node["L"]):
                return _MISSING
            node = node["L"][seg]
        else:
            name = ctx.name(seg)
            if "M" not in node or name not in node["M"]:
                return _MISSING
            node = node["M"][name]
    return node


def _operand(item: Mapping[str, Any], node: tuple, ctx: Context) -> Any:
    kind = node[0]
    if kind == "value":
        return ctx.value(node[1])
    if kind == "path":
        return resolve(item, node, ctx)
    if kind == "size":
        v = resolve(item, node[1], ctx)
        if v is _MISSING:
            return _MISSING
        (t, raw), = v.items()
        if t in ("S",):
            n = len(raw.encode("utf-8"))
        elif t in ("B",):
            n = len(raw)
        elif t in ("L", "M", "SS", "NS", "BS"):
            n = len(raw)
        else:
            raise ExpressionError(f"Invalid operand type for size: {t}")
        return {"N": str(n)}
    raise ExpressionError(f"Invalid operand {kind}")


def _key(v: Any) -> tuple[str, Any]:
    (t, raw), = v.items()
    if t == "N":
        return t, Decimal(raw)
    if t == "B":
        return t, bytes(raw)
    if t in ("SS", "BS"):
        return t, frozenset(raw)
    if t == "NS":
        return t, frozenset(Decimal(x) for x in raw)
    return t, raw


def values_equal(a: Any, b: Any) -> bool:
    if a is _MISSING or b is _MISSING:
        return False
    return _key(a) == _key(b)


def _compare(op: str, a: Any, b: Any) -> bool:
    if a is _MISSING or b is _MISSING:
        return op == "<>"
    ta, ka = _key(a)
    tb, kb = _key(b)
    if op == "=":
        return ta == tb and ka == kb
    if op == "<>":
        return not (ta == tb and ka == kb)
    if ta != tb or ta not in ("S", "N", "B"):
        return False
    return {"<": ka < kb, "<=": ka <= kb, ">": ka > kb, ">=": ka >= kb}[op]


def evaluate(item: Mapping[str, Any] | None, tree: tuple, ctx: Context) -> bool:
    item = item or {}
    kind = tree[0]
    if kind == "and":
        left = evaluate(item, tree[1], ctx)
        right = evaluate(item, tree[2], ctx)  # both sides always checked for placeholders
        return left and right
    if kind == "or":
        left = evaluate(item, tree[1], ctx)
        right = evaluate(item, tree[2], ctx)
        return left or right
    if kind == "not":
        return not evaluate(item, tree[1], ctx)
    if kind == "cmp":
        return _compare(tree[1], _operand(item, tree[2], ctx), _operand(item, tree[3], ctx))
    if kind == "between":
        v, lo, hi = (_operand(item, n, ctx) for n in tree[1:])
        return _compare(">=", v, lo) and _compare("<=", v, hi)
    if kind == "in":
        v = _operand(item, tree[1], ctx)
        options = [_operand(item, o, ctx) for o in tree[2]]
        return any(_compare("=", v, o) for o in options)
    if kind == "fn":
        name, args = tree[1], tree[2]
        target = resolve(item, args[0], ctx)
        if name == "attribute_exists":
            return target is not _MISSING
        if name == "attribute_not_exists":
            return target is _MISSING
        other = _operand(item, args[1], ctx)
        if target is _MISSING:
            return False
        (t, raw), = target.items()
        if name == "attribute_type":
            return other.get("S") == t
        if name == "begins_with":
            (ot, oraw), = other.items()
            return t == ot and t in ("S", "B") and raw[: len(oraw)] == oraw
        if name == "contains":
            (ot, oraw), = other.items()
            if t == "S" and ot == "S":
                return oraw in raw
            if t in ("SS", "NS", "BS"):
                return _key(other)[1] in _key(target)[1] if ot == t[0] else False
            if t == "L":
                return any(values_equal(x, other) for x in raw)
            return False
    raise ExpressionError(f"Invalid condition {kind}")


def _set_value(item: Mapping[str, Any], node: tuple, ctx: Context) -> Any:
    kind = node[0]
    if kind == "value":
        return clone(ctx.value(node[1]))
    if kind == "path":
        v = resolve(item, node, ctx)
        if v is _MISSING:
            raise ExpressionError("The provided expression refers to an attribute that does not exist in the item")
        return clone(v)
    if kind == "if_not_exists":
        v = resolve(item, node[1], ctx)
        return clone(v) if v is not _MISSING else _set_value(item, node[2], ctx)
    if kind == "list_append":
        a, b = _set_value(item, node[1], ctx), _set_value(item, node[2], ctx)
        if "L" not in a or "L" not in b:
            raise ExpressionError("Incorrect operand type for operator or function; operator or function: list_append")
        return {"L": a["L"] + b["L"]}
    if kind == "arith":
        a, b = _set_value(item, node[2], ctx), _set_value(item, node[3], ctx)
        if "N" not in a or "N" not in b:
            raise ExpressionError("An operand in the update expression has an incorrect data type")
        x, y = Decimal(a["N"]), Decimal(b["N"])
        return {"N": _num(x + y if node[1] == "+" else x - y)}
    raise ExpressionError(f"Invalid update operand {kind}")


def _num(d: Decimal) -> str:
    text = format(d.normalize(), "f") if d == d.to_integral_value() else str(d.normalize())
    return "0" if text in ("-0", "") else text


def _assign(item: dict[str, Any], path: tuple, value: Any, ctx: Context) -> None:
    segs = path[1]
    node: Any = {"M": item}
    for seg in segs[:-1]:
        node = node["L"][seg] if isinstance(seg, int) else node["M"].get(ctx.name(seg))
        if node is None:
            raise ExpressionError("The document path provided in the update expression is invalid for update")
    last = segs[-1]
    if isinstance(last, int):
        lst = node.get("L")
        if lst is None:
            raise ExpressionError("The document path provided in the update expression is invalid for update")
        if last >= len(lst):
            lst.append(value)
        else:
            lst[last] = value
    else:
        if "M" not in node:
            raise ExpressionError("The document path provided in the update expression is invalid for update")
        node["M"][ctx.name(last)] = value


def _remove(item: dict[str, Any], path: tuple, ctx: Context) -> None:
    segs = path[1]
    node: Any = {"M": item}
    for seg in segs[:-1]:
        node = node.get("L", [])[seg] if isinstance(seg, int) else node.get("M", {}).get(ctx.name(seg))
        if node is None:
            return
    last = segs[-1]
    if isinstance(last, int):
        lst = node.get("L")
        if lst is not None and last < len(lst):
            del lst[last]
    else:
        node.get("M", {}).pop(ctx.name(last), None)


def updated_roots(clauses: tuple, ctx: Context) -> set[str]:
    """The top-level attribute names an update expression writes (found statically, before any read)."""
    return {ctx.name(c[1][1][0]) for c in clauses if not isinstance(c[1][1][0], int)}


def apply_update(old: Mapping[str, Any], clauses: tuple, ctx: Context) -> tuple[dict[str, Any], set[str]]:
    """The item after the update, and the top-level attribute names it touched.

    Copy on write: ``new`` starts as a shallow copy of ``old`` and a top-level attribute is copied
    deeply only before a clause changes something inside it (a path of more than one segment), so
    ``old`` is never changed and the attributes no clause reaches inside are shared with it. A stored
    item is never changed in place (every write stores a new one), so sharing is safe; copying the
    whole item for every update was a fifth of the twin's UpdateItem."""
    new = dict(old)
    touched: set[str] = set()
    # Two paths overlap when one equals the other or lies inside it. Kept as sets (the paths so far,
    # and every ancestor of them) rather than comparing each path with every earlier one: an update
    # of the ledger SETs a dozen attributes or more.
    targets: set[str] = set()
    ancestors: set[str] = set()
    planned: list[tuple[str, tuple, Any]] = []
    for clause in clauses:  # every operand from the OLD item
        kind, path = clause[0], clause[1]
        rendered = "/".join(str(s) if isinstance(s, int) else ctx.name(s) for s in path[1])
        above = [rendered[:i] for i, c in enumerate(rendered) if c == "/"] if "/" in rendered else []
        if rendered in targets or rendered in ancestors or any(a in targets for a in above):
            raise ExpressionError(f"Invalid UpdateExpression: Two document paths overlap with each other; path: [{rendered}]")
        targets.add(rendered)
        ancestors.update(above)
        if kind == "set":
            planned.append(("set", path, _set_value(old, clause[2], ctx)))
        elif kind == "remove":
            planned.append(("remove", path, None))
        else:
            planned.append((kind, path, ctx.value(clause[2][1])))
        root = path[1][0]
        touched.add(str(root) if isinstance(root, int) else ctx.name(root))
    owned: set[str] = set()  # top-level attributes of ``new`` copied already (free to change inside)
    for kind, path, value in planned:
        root = path[1][0]
        if len(path[1]) > 1 and not isinstance(root, int):
            name = ctx.name(root)
            if name not in owned and name in new:
                new[name] = clone(new[name])
            owned.add(name)
        if kind == "set":
            _assign(new, path, value, ctx)
        elif kind == "remove":
            _remove(new, path, ctx)
        elif kind == "add":
            current = resolve(new, path, ctx)
            (t, raw), = value.items()
            if current is _MISSING:
                _assign(new, path, clone(value), ctx)
            elif t == "N" and "N" in current:
                _assign(new, path, {"N": _num(Decimal(current["N"]) + Decimal(raw))}, ctx)
            elif t in ("SS", "NS", "BS") and t in current:
                merged = list(current[t]) + [x for x in raw if x not in current[t]]
                _assign(new, path, {t: merged}, ctx)
            else:
                raise ExpressionError("An operand in the update expression has an incorrect data type")
        elif kind == "delete":
            current = resolve(new, path, ctx)
            (t, raw), = value.items()
            if current is _MISSING:
                continue
            if t not in ("SS", "NS", "BS") or t not in current:
                raise ExpressionError("An operand in the update expression has an incorrect data type")
            left = [x for x in current[t] if x not in raw]
            if left:
                _assign(new, path, {t: left}, ctx)
            else:
                _remove(new, path, ctx)
    return new, touched


def project(item: Mapping[str, Any], paths: tuple, ctx: Context) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path in paths:
        v = resolve(item, path, ctx)
        if v is _MISSING:
            continue
        # top-level (the ledger projects top-level attributes only; nested paths keep their root)
        root = path[1][0]
        name = ctx.name(root)
        if len(path[1]) == 1:
            out[name] = clone(v)
        else:
            out.setdefault(name, clone(item[name]))
    return out


def sort_key(v: Any) -> Any:
    t, k = _key(v)
    return k
