"""The ledger as one dying invocation sees it (deterministic crash scenarios of make sim's bugs):
it dies hard at the first call of ``method`` that ``when`` picks, so that write is never made, and a
dead process gives no lease back (``release_cell`` does nothing once it died)."""

from __future__ import annotations

from typing import Any, Callable


class DyingLedger:
    def __init__(self, inner: Any, method: str, when: Callable[..., bool] = lambda *args, **kwargs: True) -> None:
        self._inner, self._method, self._when = inner, method, when
        self.died = False

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name == self._method:
            def dies(*args: Any, **kwargs: Any) -> Any:
                if not self._when(*args, **kwargs):
                    return attr(*args, **kwargs)
                self.died = True
                raise RuntimeError(f"injected death before {name}")
            return dies
        if name == "release_cell" and self.died:
            return lambda *args, **kwargs: False
        return attr
