"""`pixivflow dev` writes each of its lines whole (found by `make test`: the Ctrl-C test once read an
activity line run into "pixivflow dev: stopping", then a lone newline). print() writes a line's text
and its newline separately, so a background thread's activity line could land between them."""

from __future__ import annotations

from pixivflow.local import devserver


class _Stream:
    """Records each write, and whether another thread could have written at that moment."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, bool]] = []

    def write(self, text: str) -> int:
        free = devserver._OUT_LOCK.acquire(blocking=False)  # noqa: SLF001 - the lock the lines share
        if free:
            devserver._OUT_LOCK.release()  # noqa: SLF001
        self.writes.append((text, free))
        return len(text)

    def flush(self) -> None:
        pass


def test_a_line_is_one_write_made_while_no_other_line_can_be_written():
    stream = _Stream()
    devserver._say(stream, "pixivflow dev: stopping")  # noqa: SLF001
    assert stream.writes == [("pixivflow dev: stopping\n", False)]


def test_activity_lines_go_through_the_same_writer():
    stream = _Stream()
    server = devserver.DevServer.__new__(devserver.DevServer)  # only what activity() reads
    server.out, server.log_activity = stream, True
    server.activity("dev fire morning-tokyo -> morning-tokyo@2026-12-01T0800")
    assert stream.writes == [("  dev fire morning-tokyo -> morning-tokyo@2026-12-01T0800\n", False)]
