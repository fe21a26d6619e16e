"""The one text rule of the HTTP edge.

Every string the edge accepts -- a body field at any depth (object keys included), a path
parameter, a query value -- is checked ONCE, by the shell, against the rule its route declares
for it beside the route (``HttpShell.route(text=..., query=...)``), before any handler or model
sees it. A route cannot skip it: the rule is not opted into, only tuned per field.

The default rule (``TEXT``): no lone UTF-16 surrogate (no UTF-8 encoder accepts one: the ledger
write would fail long after admission), no C0/C1 control character or DEL (U+0085 NEL among them:
they split log lines and reach an operator's terminal), and a UTF-8 byte cap. ``ID`` caps a value
that becomes part of a DynamoDB key at 1,024 bytes, so with its ``SLOT#``/``REQUEST#`` prefix a
partition key stays under 2,048 bytes and a sort key under 1,024 (real DynamoDB answers a larger
key with ValidationException -- a 500 -- even on a read), and refuses what makes two ids look alike
or one read backwards: bidi controls, zero-width characters, a BOM (``domain/text.py``); free text
that must fit a key (a tag) takes ``KEYED_TEXT``, the cap without that. A field may allow ``\\n``
(``PROSE``).

A failure is a ``BodyProblem`` (400, reason ``invalid_text`` / ``text_too_long``) whose message and
``detail.field`` name the field (``params.query.tags[0]``, ``jobId``, ``after``); the shell answers it
in the route's surface shape, and nothing has been read or written by then.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from ..domain.text import BIDI_CONTROLS, INVISIBLE_SPACES, JOINERS, invisible_in
from .bodies import BAD_TEXT, BodyProblem

# C0 controls, DEL, C1 controls (U+0080..U+009F, U+0085 included) and lone surrogates.
_FORBIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_FORBIDDEN_BUT_NEWLINE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
MAX_ID_BYTES = 1024
MAX_TEXT_BYTES = 8192
# The same characters as a JSON Schema character class, for the OpenAPI document. A lone surrogate
# cannot be spelled in a class every regex engine reads alike (an engine that reads UTF-16 code
# units would bar every astral character with it), and a JSON body that is valid UTF-8 holds none.
_CONTROL_CLASS = "\x00-\x1f\x7f-\x9f"
_CONTROL_CLASS_BUT_NEWLINE = "\x00-\x09\x0b-\x1f\x7f-\x9f"
_INVISIBLE_CLASS = "".join(sorted(BIDI_CONTROLS | INVISIBLE_SPACES | JOINERS))


@dataclass(frozen=True)
class TextRule:
    """What one field may hold. ``message``: the refusal text when a surface fixes it (the refetch
    route's ``requestId must be a UUID``); else the rule's own words naming the field."""

    max_bytes: int = MAX_TEXT_BYTES
    newline: bool = False
    message: str | None = None
    identifier: bool = False  # names something: no invisible or direction-changing character

    def problem(self, value: str, field: str) -> BodyProblem | None:
        """Why ``value`` (at ``field``) breaks the rule, or None."""
        pattern = _FORBIDDEN_BUT_NEWLINE if self.newline else _FORBIDDEN
        if pattern.search(value) is not None:
            return BodyProblem(400, "invalid_text", self.message or f"{field} {BAD_TEXT}", field=field)
        if self.identifier and (hidden := invisible_in(value)) is not None:
            return BodyProblem(400, "invalid_text", self.message or f"{field} holds {hidden}, an invisible or "
                               "direction-changing character an identifier may not hold", field=field)
        # A lone surrogate was refused above, so plain UTF-8 encoding cannot fail here.
        if len(value) > self.max_bytes or len(value.encode("utf-8")) > self.max_bytes:
            return BodyProblem(400, "text_too_long", self.message or f"{field} is longer than {self.max_bytes} bytes",
                               field=field)
        return None

    def schema(self) -> dict[str, Any]:
        """This rule as a JSON Schema string (``maxLength`` counts characters, a bound the byte cap
        implies; the cap itself is in the description). The barred characters are one class under
        ``not``: a search for any of them, which reads the same in every regex dialect."""
        barred = (_CONTROL_CLASS_BUT_NEWLINE if self.newline else _CONTROL_CLASS) + (
            _INVISIBLE_CLASS if self.identifier else "")
        what = "control characters other than newline" if self.newline else "control characters"
        if self.identifier:
            what += ", bidi controls, zero-width characters or a BOM"
        return {"type": "string", "maxLength": self.max_bytes, "not": {"pattern": f"[{barred}]"},
                "description": f"at most {self.max_bytes} bytes of UTF-8; no {what}"}


TEXT = TextRule()
ID = TextRule(max_bytes=MAX_ID_BYTES, identifier=True)
KEYED_TEXT = TextRule(max_bytes=MAX_ID_BYTES)  # free text that becomes part of a key (a search tag)
PROSE = TextRule(newline=True)


def _pattern(field: str) -> str:
    """``params.query.tags[3]`` -> ``params.query.tags[]``: a declared rule covers every item."""
    return re.sub(r"\[\d+\]", "[]", field)


@dataclass(frozen=True)
class TextRules:
    """A route's rules: ``fields`` by dotted path (``[]`` = every item of a list), else ``default``."""

    fields: Mapping[str, TextRule]
    default: TextRule = TEXT

    def rule(self, field: str) -> TextRule:
        return self.fields.get(_pattern(field), self.default)

    def check_value(self, value: str, field: str) -> None:
        problem = self.rule(field).problem(value, field)
        if problem is not None:
            raise problem

    def check_document(self, document: Any, root: str = "") -> None:
        """Every string of a parsed JSON document, keys too, in document order (an explicit
        stack: the body's depth is already bounded, but no recursion is needed)."""
        stack: list[tuple[str, Any]] = [(root, document)]
        while stack:
            where, item = stack.pop()
            if isinstance(item, str):
                self.check_value(item, where or "body")
            elif isinstance(item, dict):
                children = []
                for key, child in item.items():
                    path = f"{where}.{key}" if where else str(key)
                    # An object key is text the edge accepts too (pydantic and the Task parser read
                    # them); named by its parent, never echoed: the key itself is the bad text.
                    problem = self.default.problem(str(key), f"{where or 'body'} (an object key)")
                    if problem is not None:
                        problem.field = where or "body"
                        raise problem
                    children.append((path, child))
                stack.extend(reversed(children))
            elif isinstance(item, list):
                stack.extend(reversed([(f"{where}[{i}]", child) for i, child in enumerate(item)]))


NO_RULES = TextRules({})

__all__ = ["ID", "KEYED_TEXT", "MAX_ID_BYTES", "MAX_TEXT_BYTES", "NO_RULES", "PROSE", "TEXT", "TextRule", "TextRules"]
