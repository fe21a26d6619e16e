"""A failure carries its terminal reason from where it is raised to the cell's outcome: only text
from outside (a source's or a route's message) is classified by its words. Rewording one of our
own messages never changes the reason code, nor so the Protocol v1 error code, a consumer sees."""

from __future__ import annotations

import ast
import inspect
from dataclasses import replace
from pathlib import Path

import pytest

from pixivflow.domain import errors
from pixivflow.domain.ack import AckKind, DeliveryAck, settlement_for
from pixivflow.domain.apply import decide
from pixivflow.domain.outcomes import TargetOutcome
from pixivflow.domain.reasons import INTERNAL_TO_PROTOCOL, classify_error_text, protocol_error, terminal_reason_for
from pixivflow.services import binding

SERVICES = Path(binding.__file__).resolve().parent
# Words the text classifier would read as another reason (a timeout, a rate limit, a 401, Telegram,
# a configuration problem): a reworded message made of them must not move any code.
MISLEADING = "timed out after 429 rate limit: 401 unauthorized, telegram config invalid, download failed (HTTP 503)"


def _fatal_errors() -> list[type[errors.FatalSourceError]]:
    return [c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, errors.FatalSourceError)]


def test_every_failure_our_code_ends_a_cell_with_names_its_reason() -> None:
    """Each non-retryable ``TargetOutcome.failed`` the services build passes ``reason_code``."""
    unnamed = []
    for path in sorted(SERVICES.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "TargetOutcome.failed":
                keywords = {k.arg: k.value for k in node.keywords}
                retryable = keywords.get("retryable")
                if not (isinstance(retryable, ast.Constant) and retryable.value is True) and "reason_code" not in keywords:
                    unnamed.append(f"services/{path.name}:{node.lineno}")
    assert unnamed == []


@pytest.mark.parametrize("code", sorted(INTERNAL_TO_PROTOCOL))
def test_a_named_reason_outranks_any_wording(code: str) -> None:
    outcome = TargetOutcome.failed(MISLEADING, retryable=False, reason_code=code)
    assert terminal_reason_for(outcome) == code
    assert terminal_reason_for(replace(outcome, error="something else entirely")) == code
    assert protocol_error(code)["code"] == INTERNAL_TO_PROTOCOL[code]


@pytest.mark.parametrize("error_class", _fatal_errors())
def test_a_fatal_source_error_ends_the_cell_with_its_own_reason_whatever_its_message(error_class) -> None:
    plain, reworded = binding._fatal(error_class("the source gave up")), binding._fatal(error_class(MISLEADING))
    assert decide(plain, None).reason_code == decide(reworded, None).reason_code == error_class.reason


@pytest.mark.parametrize("error", [errors.WorkGoneError("work 5 was deleted (HTTP 404)", status=404),
                                   errors.SourceError("download_failed: page 0 answered HTTP 410", status=410,
                                                      reason="download_failed")])
def test_a_gone_work_is_judged_by_the_sources_words_not_ours(error) -> None:
    pinned, locked = binding._fetch_failed("pinned", "5", error), binding._fetch_failed("locked", "5", error)
    assert not pinned.retryable and not locked.retryable
    expected = error.reason or classify_error_text(str(error))
    assert terminal_reason_for(pinned) == terminal_reason_for(locked) == expected
    assert terminal_reason_for(replace(pinned, error=MISLEADING)) == expected


@pytest.mark.parametrize("error", [errors.TransientSourceError("connection reset"),
                                   errors.SourceOutage("Pixiv answered HTTP 503", status=503),
                                   errors.RateLimitedError("Rate Limit", status=429)])
def test_the_pinned_and_the_locked_paths_retry_the_same_work_on_the_same_failures(error) -> None:
    assert binding._fetch_failed("pinned", "5", error).retryable
    assert binding._fetch_failed("locked", "5", error).retryable


@pytest.mark.parametrize("remote_id", ["r4", "rv-401", "timeout-429"])
def test_a_downstreams_terminal_status_ends_the_cell_by_the_status_not_by_our_sentence(remote_id: str) -> None:
    plan = settlement_for(DeliveryAck(AckKind.REMOTE_FAILED, 200, remote_id=remote_id, remote_status="rejected"))
    assert plan.cell_reason == "internal_error"
    invalid = settlement_for(DeliveryAck(AckKind.REMOTE_FAILED, 200, remote_id=remote_id, remote_status="Invalid "))
    assert invalid.cell_reason == "configuration_error"


def test_a_pinned_work_whose_source_cannot_work_at_all_ends_the_cell_at_once_like_a_locked_one() -> None:
    """A rejected token while fetching a pinned work is the source's fatal error (``auth_failed``
    through ``run_target``), as on the locked path, never "retry the same work" until a timeout."""
    from types import SimpleNamespace

    def refuse(work_type: str, work_id: str):
        raise errors.AuthenticationError("auth_failed: Pixiv OAuth answered HTTP 400 (invalid_grant)")

    run = SimpleNamespace(target=SimpleNamespace(type="illustration"), heartbeat=lambda: None,
                          ctx=SimpleNamespace(source=SimpleNamespace(get_work=refuse)))
    with pytest.raises(errors.AuthenticationError):
        binding._run_pinned(run, SimpleNamespace(pinned_id="5"))
