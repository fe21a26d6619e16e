"""``--json`` on every command that prints a result, ``--verbose`` on every command that acts.

Every command of the parser prints a result except ``dev`` (a server: its banner is for a person,
its ``--env-file`` for a shell), so every other command takes ``--json`` and answers one JSON
document on stdout. The commands that act keep an audit record of it and take ``--verbose``
(``test_cli_audit.py`` proves where the record goes). ``demo`` takes ``--json`` too: the per-occurrence
lines and the summary become one document at the end, and what the handlers log goes to stderr."""

from __future__ import annotations

import argparse
import json

from support.cli import pixivflow

from pixivflow.cli.parser import build_parser

NO_RESULT = {"dev"}
AUDITING = {"schedules sync", "schedules pause", "schedules resume", "outbox redrive", "jobs reindex", "slots reindex",
            "failures retry", "failures reindex"}


def commands(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    """Every runnable command of the grammar, by its words (``outbox redrive``)."""
    found: dict[str, argparse.ArgumentParser] = {}
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]  # noqa: SLF001
    if not subs:
        return {prefix: parser}
    for name, child in subs[0].choices.items():
        found.update(commands(child, f"{prefix} {name}".strip()))
    return found


def test_every_command_that_prints_a_result_accepts_json():
    grammar = commands(build_parser())
    assert set(grammar) == {"demo", "dev", "schedules sync", "schedules next", "schedules pause", "schedules resume",
                            "schedules history", "slots list", "slots show", "outbox list", "outbox redrive", "jobs show",
                            "jobs reindex", "config check", "slots reindex", "failures list", "failures retry",
                            "failures reindex"}
    without = sorted(name for name, parser in grammar.items() if "--json" not in parser._option_string_actions)  # noqa: SLF001
    assert without == sorted(NO_RESULT)


def test_every_command_that_acts_takes_verbose_and_says_where_its_record_goes():
    grammar = commands(build_parser())
    auditing = sorted(name for name, parser in grammar.items() if parser.get_default("audits"))
    assert auditing == sorted(AUDITING)
    for name in auditing:
        help_text = " ".join(grammar[name].format_help().split())
        assert "--verbose print the audit record (one JSON line: who, when, what) on stderr" in help_text, name


def test_demo_with_json_answers_one_document_and_nothing_on_stderr(monkeypatch):
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    run = pixivflow("demo", "--days", "0", "--json", now=0)  # no day: the runtime starts and stops, nothing fires
    assert (run.code, run.err) == (0, "")
    document = json.loads(run.out)
    assert {k: document[k] for k in ("days", "occurrences", "slots", "problems", "ok", "schedules")} == {
        "days": 0, "occurrences": [], "slots": {}, "problems": [], "ok": True, "schedules": 3}


def test_demo_with_json_sends_what_the_run_prints_to_stderr(monkeypatch):
    """The handlers' log lines and metrics print to sys.stdout: under ``--json`` they must not land
    beside the document."""
    import pixivflow.local.demo as demo

    def run_demo(*, out, as_json, **_):
        print('{"level":"INFO","message":"a handler log line"}')  # what a handler would print during the run
        print(json.dumps({"ok": True}), file=out)
        return 0

    monkeypatch.setattr(demo, "run_demo", run_demo)
    run = pixivflow("demo", "--json", "--verbose", now=0)
    assert run.__dict__ == {"code": 0, "out": '{"ok": true}\n', "err": '{"level":"INFO","message":"a handler log line"}\n'}
