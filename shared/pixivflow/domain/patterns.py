"""Regular expressions compiled on their first use, to keep a cold start short.

A module that holds a rule table of patterns compiled them all at import, so every function paid
for every table whether its first invocation classified an error or not (``reasons`` and ``scan``
hold 26 of them, ``language`` 8 wide Unicode classes). ``LazyPattern`` compiles on the first search and keeps the compiled pattern, so
a warm invocation pays nothing more than one attribute read.
"""

from __future__ import annotations

import re
from typing import Any


class LazyPattern:
    __slots__ = ("pattern", "flags", "_compiled")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self.flags = flags
        self._compiled: re.Pattern[str] | None = None

    def compiled(self) -> re.Pattern[str]:
        compiled = self._compiled
        if compiled is None:  # two threads may both compile once; either result is the same pattern
            compiled = self._compiled = re.compile(self.pattern, self.flags)
        return compiled

    def search(self, text: str, *args: Any) -> re.Match[str] | None:
        return self.compiled().search(text, *args)

    def match(self, text: str, *args: Any) -> re.Match[str] | None:
        return self.compiled().match(text, *args)

    def fullmatch(self, text: str, *args: Any) -> re.Match[str] | None:
        return self.compiled().fullmatch(text, *args)

    def findall(self, text: str, *args: Any) -> list[Any]:
        return self.compiled().findall(text, *args)

    def sub(self, repl: Any, text: str, count: int = 0) -> str:
        return self.compiled().sub(repl, text, count)

    def __repr__(self) -> str:
        return f"LazyPattern({self.pattern!r}, {self.flags!r})"
