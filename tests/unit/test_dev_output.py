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


STOPPED_BY_A_SIGNAL_TO_ANOTHER_THREAD = r"""
import signal, sys, threading, time
from pixivflow.local import devserver

class Server:  # what run_dev asks of the DevServer, without its servers
    env_file = None
    def __init__(self, *args, **kwargs): pass
    def start(self): pass
    def banner(self): return ["ready"]
    def stop(self): print("server stopped", flush=True)

devserver.DevServer = Server
other = threading.Thread(target=time.sleep, args=(60,), daemon=True)
other.start()
def deliver():
    time.sleep(0.5)
    signal.pthread_kill(other.ident, signal.SIGINT)  # the kernel may pick any thread of the process
threading.Thread(target=deliver, daemon=True).start()
sys.exit(devserver.run_dev(config=None, demo=True))
"""


def test_a_ctrl_c_that_reaches_another_thread_still_stops_the_dev_server():
    """Found by `make test` (the Ctrl-C test waited 90 s under load): a process-directed SIGINT can be
    handed to any thread, and the main thread blocked in Event.wait() never ran the handler."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", STOPPED_BY_A_SIGNAL_TO_ANOTHER_THREAD], capture_output=True, text=True,
                          timeout=30, env={"PYTHONPATH": str(root / "shared"), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["ready", "pixivflow dev: stopping", "server stopped", "pixivflow dev: stopped"]
