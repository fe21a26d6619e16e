"""The operator page ``/ui`` as a browser reaches it, through the real trigger handler: ``get`` and
``post`` a page (API Gateway v2 events, the session cookie in ``cookies``), ``login`` with a token,
``act`` (a form POST of one of its actions, with ``csrf_of`` a page), ``audit`` lines; a ``Page``
reads its tables as a person would."""

from __future__ import annotations

import base64
import re
from html.parser import HTMLParser
from urllib.parse import quote, urlencode

from conftest import TRIGGER_TOKEN
from pixivflow.local.harness import http_event
from pixivflow.local.lambda_context import context_for

FORM = "application/x-www-form-urlencoded"


class Page:
    def __init__(self, resp: dict) -> None:
        self.status = resp["statusCode"]
        self.headers = {k.lower(): v for k, v in (resp.get("headers") or {}).items()}
        self.cookies = list(resp.get("cookies") or [])
        self.body = resp.get("body") or ""

    @property
    def tables(self) -> list[list[list[str]]]:
        return _Tables.of(self.body)

    def text(self) -> str:
        return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", self.body))


class _Tables(HTMLParser):
    """Every <table> as rows of cell texts (a person's reading of the page)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None
        self._depth = 0

    @classmethod
    def of(cls, body: str) -> list[list[list[str]]]:
        parser = cls()
        parser.feed(body)
        return parser.tables

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "li" and self._cell is not None and self._cell:
            self._cell.append("; ")

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def get(rt, path: str, *, cookie: str | None = None, query: dict | None = None) -> Page:
    event = http_event("GET", path, query=query)
    if cookie is not None:
        event["cookies"] = [cookie]  # API Gateway v2 moves the Cookie header here
    return Page(rt.handlers["trigger"](event, context_for("trigger")))


def post(rt, path: str, body: str | None, *, content_type: str = FORM, b64: bool = False,
         cookie: str | None = None) -> Page:
    event = http_event("POST", path)
    if cookie is not None:
        event["cookies"] = [cookie]
    event["headers"]["content-type"] = content_type
    event["body"] = base64.b64encode(body.encode()).decode() if (b64 and body is not None) else body
    event["isBase64Encoded"] = b64
    return Page(rt.handlers["trigger"](event, context_for("trigger")))


def login(rt, token: str = TRIGGER_TOKEN) -> str:
    page = post(rt, "/ui/login", f"token={quote(token)}")
    assert page.status == 303 and page.headers["location"] == "/ui", page.body
    [cookie] = page.cookies
    return cookie.split(";", 1)[0]


def act(rt, action: str, fields: dict, cookie: str | None) -> Page:
    event = http_event("POST", f"/ui/act/{action}")
    event["headers"]["content-type"] = FORM
    event["body"] = urlencode(fields)
    event["isBase64Encoded"] = False
    if cookie is not None:
        event["cookies"] = [cookie]
    return Page(rt.handlers["trigger"](event, context_for("trigger")))


def csrf_of(page: Page) -> str:
    tokens = set(re.findall(r'<input type="hidden" name="csrf" value="([A-Za-z0-9_-]+)">', page.body))
    assert len(tokens) == 1, tokens
    return tokens.pop()


def audit(logs, event: str) -> list[dict]:
    lines, _ = logs()
    return [line for line in lines if line.get("event") == event]


def reads_of_one_page(rt, monkeypatch, path: str, query: dict | None = None) -> list[tuple[str, object, int]]:
    """The DynamoDB calls one page makes (operation, index, Limit or batch size), on a moto runtime."""
    from botocore.client import BaseClient

    cookie = login(rt)
    calls: list[tuple[str, object, int]] = []
    real = BaseClient._make_api_call

    def make_api_call(client, operation, params):
        if client.meta.service_model.endpoint_prefix == "dynamodb":
            size = params.get("Limit") or sum(len(v.get("Keys", [])) for v in (params.get("RequestItems") or {}).values())
            calls.append((operation, params.get("IndexName"), size))
        return real(client, operation, params)

    with monkeypatch.context() as patched:
        patched.setattr(BaseClient, "_make_api_call", make_api_call)
        page = get(rt, path, cookie=cookie, query=query)
    assert page.status == 200, page.body
    return calls
