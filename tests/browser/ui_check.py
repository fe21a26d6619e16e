"""`make ui-check`: the operator page in a real browser (issue 12).

Starts the dev server in-process on free loopback ports (demo config, offline catalogue, a virtual
clock at a fire of ``morning-tokyo``), runs that occurrence through the real functions, then drives
``/usr/bin/chromium`` headless through the Chrome DevTools Protocol over ``--remote-debugging-pipe``
(file descriptors 3 and 4: no websocket library, no chromedriver session, no browser download). It
logs in through the form, opens the occurrence list and one occurrence, and fails on any console
error, uncaught exception or browser log error, on a missing table, or on a login that did not
stick (the session cookie is Secure: Chromium keeps it for http://127.0.0.1, a trustworthy origin).
Issue 26 adds: the Chinese reason texts must draw as glyphs, not tofu (a CJK character's pixels
differ from an unassigned code point's .notdef box), the occurrence's thumbnail loads from the local
S3 under the page's CSP, the jobs and dead-letter pages open, one action
(run now, from its form) succeeds, a schedule is paused and resumed from its forms, and a POST
without the CSRF token is refused. Screenshots of every
page are written next to the browser profile and their paths printed.

Not part of ``make test`` (it needs Chromium); ``.ci/run`` installs ``chromium`` and
``fonts-noto-cjk`` (Debian) when missing, runs it, and fails when it cannot. Exit 0 when every check passes, 1 otherwise.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "shared"))
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", "--no-default-browser-check", "--disable-extensions",
         "--disable-features=Translate,MediaRouter,OptimizationHints", "--window-size=1280,900", "--remote-debugging-pipe"]
TOKEN = "ui-check-trigger-token-3f9c2a"
T0 = 1_796_079_600_000  # 2026-11-30T23:00:00Z: 08:00 in Tokyo, a fire of morning-tokyo
SLOT = "morning-tokyo@2026-12-01T0800"
WAIT_S = 20.0


class CheckFailed(Exception):
    pass


class Browser:
    """Chromium with a CDP connection over its debugging pipe (NUL-separated JSON messages)."""

    def __init__(self, profile: Path) -> None:
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def wire_fds() -> None:  # in the child: the browser reads commands on fd 3, writes on fd 4
            a, b = os.dup(to_chrome_r), os.dup(from_chrome_w)  # (fresh numbers first: the pipes may be 3 or 4)
            os.dup2(a, 3)
            os.dup2(b, 4)

        # close_fds runs after preexec_fn: keeping 3 and 4 keeps what wire_fds put there
        self.proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                     pass_fds=(3, 4), preexec_fn=wire_fds,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._ids = itertools.count(1)
        self._buffer = b""
        self._replies: dict[int, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.session: str | None = None

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self._from_chrome, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                with self._arrived:
                    self._arrived.notify_all()
                return
            self._buffer += chunk
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                message = json.loads(raw)
                with self._arrived:
                    if "id" in message:
                        self._replies[message["id"]] = message
                    else:
                        self.events.append(message)
                    self._arrived.notify_all()

    def send(self, method: str, params: dict[str, Any] | None = None, *, session: bool = True) -> dict[str, Any]:
        ident = next(self._ids)
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self._to_chrome, json.dumps(message).encode("utf-8") + b"\0")
        deadline = time.monotonic() + WAIT_S
        with self._arrived:
            while ident not in self._replies:
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    raise CheckFailed(f"no answer from the browser to {method}")
                self._arrived.wait(left)
            reply = self._replies.pop(ident)
        if "error" in reply:
            raise CheckFailed(f"{method} failed: {reply['error']}")
        return reply.get("result", {})

    def wait_event(self, method: str, since: int) -> dict[str, Any]:
        deadline = time.monotonic() + WAIT_S
        with self._arrived:
            while True:
                for event in self.events[since:]:
                    if event.get("method") == method:
                        return event
                left = deadline - time.monotonic()
                if left <= 0:
                    raise CheckFailed(f"the page never sent {method}")
                self._arrived.wait(left)

    def open_page(self) -> None:
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True}, session=False)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")

    def navigate(self, url: str) -> None:
        mark = len(self.events)
        result = self.send("Page.navigate", {"url": url})
        if result.get("errorText"):
            raise CheckFailed(f"navigation to {url} failed: {result['errorText']}")
        self.wait_event("Page.loadEventFired", mark)

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise CheckFailed(f"evaluating {expression!r} threw: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def submit_login(self, token: str) -> None:
        mark = len(self.events)
        self.evaluate(f"document.getElementById('token').value = {json.dumps(token)}; "
                      "document.querySelector('form.login').submit(); true")
        self.wait_event("Page.loadEventFired", mark)

    def screenshot(self, path: Path) -> None:
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        path.write_bytes(base64.b64decode(data))

    def problems(self) -> list[str]:
        """Console errors, uncaught exceptions and browser log errors seen so far."""
        found = []
        with self._lock:
            events = list(self.events)
        for event in events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append("console." + params["type"] + ": " + " ".join(str(a.get("value", a.get("description")))
                                                                          for a in params.get("args", [])))
            elif method == "Runtime.exceptionThrown":
                found.append("exception: " + str(params.get("exceptionDetails", {}).get("text")))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                entry = params["entry"]
                found.append(f"log error ({entry.get('source')}): {entry.get('text')} {entry.get('url', '')}".rstrip())
        return found

    def close(self) -> None:
        try:
            self.send("Browser.close", session=False)
        except CheckFailed:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_chrome, self._from_chrome):
            try:
                os.close(fd)
            except OSError:
                pass


def _until(predicate, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise CheckFailed(f"timed out waiting for {what}")


def _tables(browser: Browser) -> list[dict[str, Any]]:
    return browser.evaluate("Array.from(document.querySelectorAll('table')).map(t => ({"
                            "head: Array.from(t.querySelectorAll('th')).map(h => h.textContent.trim()), "
                            "rows: t.querySelectorAll('tbody tr').length}))")


def _png(size: int = 48) -> bytes:
    """A small real PNG (a diagonal gradient), so the browser has an image to decode."""
    import struct
    import zlib

    rows = b"".join(b"\0" + bytes(v for x in range(size) for v in ((x * 5) % 256, (y * 5) % 256, 160))
                    for y in range(size))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def _store_preview(dev: Any) -> str:
    """Keep a small preview beside the first delivered work of ``SLOT``, as a route that sends
    previews does (the demo's webhook route keeps none, and the offline catalogue's bytes are not
    images a browser decodes): the page's thumbnail is then this object, presigned on the local S3."""
    from pixivflow import aws
    from pixivflow.domain.assets import artifact_prefix

    state = dev.rt.wiring.ledger.load(SLOT)
    cell = next(c for c in state.snapshot_cells() if c.status == "submitted" and c.work_id)
    key = f"{artifact_prefix(SLOT, cell.target_id, cell.work_id)}/{cell.work_id}_p0.png.preview.png"
    aws.client("s3", endpoint_url=dev.aws_endpoint).put_object(
        Bucket=dev.rt.env["ARTIFACT_BUCKET"], Key=key, Body=_png(), ContentType="image/png", Metadata={"role": "preview"})
    return key


JOBS_TOKEN = "ui-check-jobs-token-77aa"
FAILED_REQUEST = "6d0c1c52-3f0b-4a55-9c3e-5b7a2f9e1d40"


def _failure_center(dev, browser, shots: list[Path], where: Path, out) -> None:
    """A refetch of cats whose delivery the review refuses (HTTP 400) fails; the Failure Center lists
    it with its reason, delivery row and retry buttons; its Retry form runs cats again, and the row
    then shows the retry's occurrence."""
    failed = f"morning-tokyo@manual-{FAILED_REQUEST}"
    dev.downstream.queue((400, {"error": "bad payload"}))
    body = json.dumps({"requestId": FAILED_REQUEST}).encode()
    request = urllib.request.Request(f"{dev.url}/internal/targets/cats/refetch", data=body, method="POST",
                                     headers={"Authorization": f"Bearer {JOBS_TOKEN}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as resp:
        if resp.status != 202:
            raise CheckFailed(f"the refetch request answered {resp.status}")
    _until(lambda: getattr(dev.rt.wiring.ledger.get_slot(failed), "status", None) == "failed", f"{failed} to fail")
    browser.navigate(f"{dev.url}/ui/failures")
    tables = _tables(browser)
    if not tables or tables[0]["head"][:3] != ["Failed at (UTC)", "Occurrence", "Target"] or tables[0]["rows"] < 1:
        raise CheckFailed(f"the Failure Center lacks its table: {tables}")
    row = " ".join(browser.evaluate("document.querySelector('table tbody tr').textContent").split())
    if failed not in row or "delivery_abandoned" not in row or "Retry relaxed" not in row:
        raise CheckFailed(f"the Failure Center's row lacks the failure, its reason or its retry: {row[:300]}")
    shots.append(where / "pixivflow-ui-check-failures.png")
    browser.screenshot(shots[-1])
    mark = len(browser.events)
    browser.evaluate("document.querySelector('form.act[action=\"/ui/act/retry\"] input[name=mode][value=normal]')"
                     ".form.submit(); true")
    browser.wait_event("Page.loadEventFired", mark)
    done = " ".join(browser.evaluate("document.querySelector('main').textContent").split())
    if browser.evaluate("document.querySelector('h1').textContent") != "Retry" or "accepted" not in done:
        raise CheckFailed(f"the retry from the Failure Center failed: {done[:300]}")
    retried = browser.evaluate("Array.from(document.querySelectorAll('main a')).map(a => a.textContent)"
                               ".find(t => t.includes('@manual-') && !t.includes('" + FAILED_REQUEST + "')) || ''")
    _until(lambda: getattr(dev.rt.wiring.ledger.get_slot(retried), "status", None) == "success", f"{retried} to succeed")
    browser.navigate(f"{dev.url}/ui/failures")
    row = " ".join(browser.evaluate("document.querySelector('table tbody tr').textContent").split())
    if f"normal retry: {retried} submitted" not in row:
        raise CheckFailed(f"after the retry the row shows {row[:300]}")
    shots.append(where / "pixivflow-ui-check-failure-retried.png")
    browser.screenshot(shots[-1])
    print(f"ui-check: Failure Center: {failed} failed (delivery_abandoned); retried as {retried}: submitted", file=out)


def check(out=sys.stdout) -> int:
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    from pixivflow.clock import VirtualClock
    from pixivflow.local.devserver import DevServer

    if not os.access(CHROMIUM, os.X_OK):
        print(f"ui-check: {CHROMIUM} is not installed (apt-get install -y chromium chromium-driver)", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="pixivflow-ui-check-") as tmp:
        dev = DevServer(port=0, demo=True, source="catalog", clock=VirtualClock(T0),
                        tokens={"trigger": TOKEN, "jobs": JOBS_TOKEN})
        dev.start()
        browser = None
        try:
            request = urllib.request.Request(f"{dev.url}/internal/schedules/morning-tokyo/run", data=b"{}", method="POST",
                                             headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=10) as resp:
                if resp.status != 202:
                    raise CheckFailed(f"the run request answered {resp.status}")
            _until(lambda: getattr(dev.rt.wiring.ledger.get_slot(SLOT), "status", None) == "success", f"{SLOT} to succeed")
            thumb_key = _store_preview(dev)
            browser = Browser(Path(tmp) / "profile")
            browser.open_page()

            browser.navigate(f"{dev.url}/ui")  # no session: the login form
            if browser.evaluate("location.pathname") != "/ui/login":
                raise CheckFailed("without a session /ui did not lead to the login form")
            browser.submit_login(TOKEN)
            if browser.evaluate("location.pathname") != "/ui":
                raise CheckFailed("the login did not stick (the session cookie was not kept)")
            if browser.evaluate("document.cookie") != "":
                raise CheckFailed("the session cookie is readable by scripts (it must be HttpOnly)")
            overview = _tables(browser)
            if len(overview) < 2 or overview[1]["rows"] < 1:
                raise CheckFailed(f"the overview lacks its tables: {overview}")
            shots = [Path(tmp).parent / "pixivflow-ui-check-overview.png"]
            browser.screenshot(shots[-1])
            print(f"ui-check: logged in; overview tables {[t['head'][0] for t in overview]}", file=out)

            browser.navigate(f"{dev.url}/ui/slots")
            listing = _tables(browser)
            if not listing or listing[0]["head"][:2] != ["Occurrence", "Status"] or listing[0]["rows"] < 1:
                raise CheckFailed(f"the occurrence list lacks its table: {listing}")
            link = browser.evaluate("document.querySelector('table tbody tr td a').getAttribute('href')")
            shots.append(Path(tmp).parent / "pixivflow-ui-check-occurrences.png")
            browser.screenshot(shots[-1])
            print(f"ui-check: occurrence list: {listing[0]['rows']} row(s); opening {link}", file=out)

            browser.navigate(f"{dev.url}{link}")
            page = _tables(browser)
            heads = [t["head"][:2] for t in page]
            for wanted in (["Field", "Value"], ["Target", "Status"], ["Target", "Route"], ["At", "Kind"]):
                if wanted not in heads:
                    raise CheckFailed(f"the occurrence page lacks the {wanted[0]}/{wanted[1]} table: {heads}")
            status = browser.evaluate("document.querySelector('table td .st').textContent")
            steps = browser.evaluate("document.querySelectorAll('ol.timeline li').length")
            if status != "success" or steps < 5:
                raise CheckFailed(f"the occurrence page shows status {status!r} and {steps} timeline entries")
            # The thumbnail (issue 26): presigned on the dev server's local S3, allowed by the page's
            # CSP, fetched and decoded by the browser (a CSP refusal would also be a console error).
            _until(lambda: browser.evaluate("(() => { const i = document.querySelector('figure.thumb img');"
                                            " return !!i && i.complete && i.naturalWidth > 0; })()"), "the thumbnail to load")
            src = browser.evaluate("document.querySelector('figure.thumb img').src")
            if not src.startswith(f"{dev.aws_endpoint}/") or thumb_key.split("/")[-1] not in src:
                raise CheckFailed(f"the thumbnail is not the stored preview on the local S3: {src[:200]}")
            shots.append(Path(tmp).parent / "pixivflow-ui-check-occurrence.png")
            browser.screenshot(shots[-1])
            print(f"ui-check: occurrence {SLOT}: {status}, {steps} timeline entries, thumbnail loaded from "
                  f"{dev.aws_endpoint}", file=out)

            # The Chinese reason texts must render as glyphs, not tofu (issue 26): with no CJK font a
            # CJK character and an unassigned code point both draw the same .notdef box.
            same = browser.evaluate(
                "(() => { const c = document.createElement('canvas'); c.width = 40; c.height = 40;"
                " const g = c.getContext('2d'); const draw = t => { g.clearRect(0, 0, 40, 40);"
                " g.font = '28px sans-serif'; g.fillText(t, 4, 32); return Array.from(g.getImageData(0, 0, 40, 40).data)"
                ".join(','); }; return ['没', '找', '品'].map(ch => draw(ch) === draw('\\u0378')); })()")
            if any(same):
                raise CheckFailed(f"Chinese text renders as tofu (no CJK font; install fonts-noto-cjk): {same}")
            print("ui-check: Chinese glyphs render (not tofu)", file=out)

            for path, name, wanted in (("/ui/jobs", "jobs", "Jobs"), ("/ui/dead", "dead", "Dead letters")):
                browser.navigate(f"{dev.url}{path}")
                if browser.evaluate("document.querySelector('h1').textContent") != wanted:
                    raise CheckFailed(f"{path} did not render its page")
                shots.append(Path(tmp).parent / f"pixivflow-ui-check-{name}.png")
                browser.screenshot(shots[-1])

            _failure_center(dev, browser, shots, Path(tmp).parent, out)

            browser.navigate(f"{dev.url}/ui")  # one action: run now, from its form (with the CSRF token)
            mark = len(browser.events)
            browser.evaluate("document.querySelector('form.act[action=\"/ui/act/run\"]').submit(); true")
            browser.wait_event("Page.loadEventFired", mark)
            ran = browser.evaluate("document.querySelector('main').textContent")
            if browser.evaluate("document.querySelector('h1').textContent") != "Run now" or "csrf" in ran:
                raise CheckFailed(f"run now from the page failed: {ran[:300]}")
            shots.append(Path(tmp).parent / "pixivflow-ui-check-run-now.png")
            browser.screenshot(shots[-1])
            print(f"ui-check: run now: {' '.join(ran.split())[:200]}", file=out)

            # pause and resume a schedule from the overview's forms (issue 26): the schedule list
            # says paused, the Resume button replaces Pause, and resume puts it back
            for action, state in (("pause", "paused since"), ("resume", "enabled")):
                browser.navigate(f"{dev.url}/ui")
                mark = len(browser.events)
                browser.evaluate(f"document.querySelector('form.act[action=\"/ui/act/{action}\"] "
                                 f"input[name=schedule][value=\"morning-tokyo\"]').form.submit(); true")
                browser.wait_event("Page.loadEventFired", mark)
                done = " ".join(browser.evaluate("document.querySelector('main').textContent").split())
                if browser.evaluate("document.querySelector('h1').textContent") != action.capitalize() or "csrf" in done:
                    raise CheckFailed(f"{action} from the page failed: {done[:300]}")
                browser.navigate(f"{dev.url}/ui")
                row = browser.evaluate("Array.from(document.querySelectorAll('table tbody tr')).map(r => r.textContent)"
                                       ".find(t => t.startsWith('morning-tokyo')) || ''")
                if state not in row:
                    raise CheckFailed(f"after {action} the schedule list shows {row!r}")
                shots.append(Path(tmp).parent / f"pixivflow-ui-check-{action}.png")
                browser.screenshot(shots[-1])
                print(f"ui-check: {action}: {done[:120]}", file=out)

            seen = browser.problems()  # the refused POST below is a 403 the browser logs on purpose
            mark = len(browser.events)  # a forged POST: the session cookie, no CSRF token
            browser.evaluate("(() => { const f = document.createElement('form'); f.method = 'post';"
                             " f.action = '/ui/act/run'; const i = document.createElement('input'); i.type = 'hidden';"
                             " i.name = 'schedule'; i.value = 'morning-tokyo'; f.appendChild(i);"
                             " document.body.appendChild(f); f.submit(); return true; })()")
            browser.wait_event("Page.loadEventFired", mark)
            forged = browser.evaluate("document.querySelector('main').textContent")
            if "csrf" not in forged:
                raise CheckFailed(f"a POST without the CSRF token was not refused: {forged[:300]}")
            shots.append(Path(tmp).parent / "pixivflow-ui-check-forged.png")
            browser.screenshot(shots[-1])
            print("ui-check: a POST without the CSRF token is refused", file=out)

            problems = seen
            if problems:
                raise CheckFailed("the browser reported: " + "; ".join(problems))
            print("ui-check: screenshots " + " ".join(map(str, shots)), file=out)
            print("ui-check: OK (no console error, every table present)", file=out)
            return 0
        except CheckFailed as exc:
            print(f"ui-check: FAILED: {exc}", file=sys.stderr)
            return 1
        finally:
            if browser is not None:
                browser.close()
            dev.stop()


if __name__ == "__main__":
    raise SystemExit(check())
