"""What every use case's collaborators share: the clock and the metrics, and the two calls made on
them. Each use case declares its collaborators as a frozen dataclass of its own (``Outbox``,
``SlotRollup``, ``Admissions`` ...) that inherits these calls; the composition root builds it."""

from __future__ import annotations

from ..ports import Clock, Metrics


class Clocked:
    clock: Clock

    def now(self) -> int:
        return self.clock.now_ms()


class Measured(Clocked):
    metrics: Metrics | None

    def metric(self, name: str, value: float = 1, **dimensions: str) -> None:
        if self.metrics is not None:
            self.metrics.count(name, value, **dimensions)
