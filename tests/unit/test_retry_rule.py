"""The outbox's one retry rule (``domain.outbox.after_failed_attempt``), which every kind of row
follows: ``maxAttempts`` N is at most N sends, then dead; a failure that cannot be retried is dead
at once; the wait is the jittered backoff unless the route said when."""

from __future__ import annotations

import pytest

from pixivflow.domain.ack import retry_delay_ms
from pixivflow.domain.outbox import after_failed_attempt

BASE, TOP = 30_000, 21_600_000


def _after(attempt: int, budget: int, *, retryable: bool = True, retry_after_ms: int | None = None, draws: list | None = None):
    def uniform() -> float:
        if draws is not None:
            draws.append(1)
        return 0.5

    return after_failed_attempt(attempt, budget, retryable=retryable, error="HTTP 503", uniform=uniform, base_ms=BASE,
                                max_ms=TOP, retry_after_ms=retry_after_ms)


@pytest.mark.parametrize("budget", [1, 2, 12])
def test_a_budget_of_n_is_n_sends_then_dead(budget: int) -> None:
    verdicts = [_after(n, budget) for n in range(1, budget + 1)]
    assert [v.dead for v in verdicts] == [False] * (budget - 1) + [True]
    assert verdicts[-1].error == f"attempt budget exhausted after {budget} attempts: HTTP 503"
    assert [v.delay_ms for v in verdicts[:-1]] == [retry_delay_ms(n, 0.5, BASE, TOP) for n in range(1, budget)]


def test_a_failure_that_cannot_be_retried_is_dead_at_once_and_draws_no_jitter() -> None:
    draws: list = []
    verdict = _after(1, 12, retryable=False, draws=draws)
    assert (verdict.dead, verdict.error, draws) == (True, "HTTP 503", [])


def test_the_route_saying_when_wins_over_the_backoff_and_jitter_is_drawn_once() -> None:
    draws: list = []
    verdict = _after(3, 12, retry_after_ms=37_000, draws=draws)
    assert (verdict.dead, verdict.delay_ms, draws) == (False, 37_000, [1])
    assert _after(12, 12, retry_after_ms=37_000).dead  # the budget still ends it
