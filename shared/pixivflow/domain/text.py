"""Two rules for text that reaches an identifier, a page or a log, each in one place.

* **Numbers are ASCII digits.** ``str.isdigit`` is true for ``²`` and ``٣``, which ``int`` either
  refuses (a 500) or reads as 3 (a Pixiv id nobody typed). Every numeric input -- a query or path
  parameter, a config id -- is ``ascii_digits``.
* **Nothing invisible changes how text reads.** A bidi control (U+202E turns ``abc`` round), a
  zero-width space or joiner, a word joiner or a BOM makes two different identifiers look the same,
  or one look like another. An identifier (a key, an id, a schedule or target name) refuses them
  (``invisible_in``); free text (tags, labels, titles) keeps them, but a page or a log line shows the
  bidi controls and the invisible spaces as their code points (``escape_invisible``), while the
  joiners that a ZWJ emoji sequence or a Persian or Indic word needs (U+200C, U+200D) stay as they are.
"""

from __future__ import annotations

# Bidi: ALM, LRM, RLM, the embeddings and overrides (LRE..RLO, PDF) and the isolates (LRI..PDI).
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# Zero-width space, word joiner, BOM / zero-width no-break space.
INVISIBLE_SPACES = frozenset("\u200b\u2060\ufeff")
JOINERS = frozenset("\u200c\u200d")  # ZWNJ, ZWJ: legal in free text, never in an identifier
_NOT_IN_IDENTIFIERS = BIDI_CONTROLS | INVISIBLE_SPACES | JOINERS
_SHOWN = BIDI_CONTROLS | INVISIBLE_SPACES
_SHOW = {ord(c): f"<U+{ord(c):04X}>" for c in _SHOWN}
_SHOW_IN_JSON = {ord(c): f"\\u{ord(c):04x}" for c in _SHOWN}


def ascii_digits(text: str) -> bool:
    """Only the digits 0-9, at least one."""
    return text.isascii() and text.isdigit()


def invisible_in(text: str) -> str | None:
    """The first character an identifier may not hold, as ``U+XXXX``, or None."""
    for char in text:
        if char in _NOT_IN_IDENTIFIERS:
            return f"U+{ord(char):04X}"
    return None


def escape_invisible(text: str) -> str:
    """Free text as a person should read it: bidi controls and invisible spaces shown as ``<U+XXXX>``."""
    return text.translate(_SHOW)


def escape_invisible_json(text: str) -> str:
    """A serialised JSON document with the same characters written as ``\\uXXXX`` escapes (still the
    same JSON: a reader decodes them back; a terminal or a log viewer shows them as written)."""
    return text.translate(_SHOW_IN_JSON)


__all__ = ["BIDI_CONTROLS", "INVISIBLE_SPACES", "JOINERS", "ascii_digits", "escape_invisible", "escape_invisible_json",
           "invisible_in"]
