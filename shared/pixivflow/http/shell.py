"""The one HTTP shell both functions share.

``trigger_api`` and ``jobs_api`` each build one ``HttpShell`` and register their routes with
``@shell.route``. Everything a route must not get wrong by itself lives here, once:

1. **Route match** (Powertools). An unknown path answers 404 and a known path with another
   method 405 with ``Allow``, both in the function's own error shape.
2. **``schedule.trigger_received``** for routes declared ``received=...`` (the run route), before
   auth, so a refused clock still leaves a trace.
3. **Auth**: fail closed (503 when no token is configured), else 401; on every
   surface with the legacy ``{"status":"error","error":…}`` body.
4. **Parameters**: path parameters (percent-decoded once, here: handlers get the decoded value)
   and the query parameters the route declares (``req.query``; no others are handed on) pass the
   one text rule (``text.py``): no lone surrogate, no C0/C1 control, a byte cap (ids
   1,024 bytes, inside DynamoDB's key limits). A failure is 400 naming the parameter.
5. **Precheck**: a route's own resource check that answers before body rules (the run route's
   unknown schedule is a 404 whatever the body says).
6. **Body** (``BodySpec``): Content-Type, size, depth, integer size, JSON shape, the text rule on
   every string at any depth (``text=`` declares per-field rules beside the route), then the
   route's model or hand check (``bodies.py``). Nothing of the body is read before step 3 passed, so an
   unauthenticated caller learns nothing about body rules and costs no parsing.
7. **Handler**: ``handler(req, **path_params)`` returns ``req.finish(...)``.

Whatever a step raises is mapped in ONE place (the resolver's ``exception_handler``):
``Rejection``, ``BodyProblem`` and the domain's ``StatusError`` answer their status in the
route's surface shape; anything else is the route's documented 500 (legacy routes: their own
message; protocol routes: ``internal_error`` "internal error", never internal text).
Every request writes exactly one outcome line (``Request.finish``), so its ``http_status`` is
the status the caller saw, with the correlation fields (``common.py``) and a real ``elapsed_ms``.

Adding a route (the job API builds on this)::

    @shell.route("POST", "/jobs/<jobId>/cancel", token=JOBS, stage="cancel",
                 ok={200: ("the job, cancelled", "Job")}, errors={404: "unknown job"},
                 summary="Cancel a job")
    def cancel_job(req: Request, jobId: str) -> Response:
        job = ...                         # raise Rejection(404, "unknown job", detail={...}) to refuse
        return req.finish(200, job, "schedule.job_cancelled", job_id=jobId)

``token`` is ``auth.TRIGGER``, ``auth.JOBS`` or None (open); ``surface`` defaults to the shell's
(``LEGACY`` for the trigger function, ``PROTOCOL`` for job_events); ``body=BodySpec(model=M)``
validates with a pydantic model (first error answered as ``<field>: <message>``) or
``BodySpec(check=fn)`` with a hand check that raises ``Rejection``; the parsed value is
``req.body``. ``ok`` names the 2xx schemas (components of the OpenAPI document, the protocol
``$defs`` among them) and ``errors`` the route's own refusals; 401/503 (auth), 400/415 (body),
405 and 500 are documented by the shell itself.
"""

from __future__ import annotations

import inspect
import logging
import re
from dataclasses import dataclass, field
from typing import Annotated, Any, Callable, Mapping
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from pydantic import BaseModel, ValidationError

from .. import runtime
from ..domain.errors import StatusError
from ..domain.reasons import PROTOCOL_ERROR_CODES
from ..observability import logger
from .auth import check_bearer
from .bodies import NOT_AN_OBJECT, BodyProblem, decode_text, is_json_media_type, parse_json, unsupported_media_type
from .common import RequestClock, attempt_id, header, json_response, provider
from .text import ID, TextRule, TextRules

_SPEC_ATTR = "__pixivflow_route__"
_REQUEST_KEY = "pixivflow_request"
_RESERVED = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}
_PARAM = re.compile(r"<(\w+)>")
_MAX_LOGGED_PARAM = 256
SECURITY: dict[str, list[dict[str, list[str]]]] = {"trigger": [{"triggerToken": []}], "jobs": [{"manualWorkToken": []}]}


# -- surfaces: the two error shapes ------------------------------------------------------------


@dataclass(frozen=True)
class Surface:
    """An error shape: ``legacy`` (``{"status": "error", "error": ...}``) or ``protocol`` (``{"error": Error}``)."""

    name: str
    error_schema: str  # the OpenAPI component its error bodies follow

    @property
    def protocol(self) -> bool:
        return self.name == "protocol"

    def error(self, status: int, message: str, *, code: str | None = None, detail: Mapping[str, Any] | None = None,
              retryable: bool | None = None) -> dict[str, Any]:
        if not self.protocol:
            return {"status": "error", "error": message}
        code = code or ("internal_error" if status >= 500 else "invalid_params")
        if code not in PROTOCOL_ERROR_CODES:  # the enum is closed
            code = "internal_error"
        return {"error": {"code": code, "message": message,
                          "retryable": PROTOCOL_ERROR_CODES[code] if retryable is None else retryable,
                          "detail": dict(detail or {})}}


LEGACY = Surface("legacy", "ErrorBody")
PROTOCOL = Surface("protocol", "ProtocolErrorBody")


# -- what a route declares ---------------------------------------------------------------------


@dataclass(frozen=True)
class BodySpec:
    """A JSON body. ``model``: pydantic validation; ``check``: a hand check ``fn(data) -> value``.

    ``optional``: an absent, empty or ``null`` body is ``req.body = None``. ``lenient``: an
    unparsable or non-object body is handed to ``check`` as ``{}`` (the refetch route, whose
    messages are fixed); limits (size, depth, integers) and Content-Type still apply.
    """

    model: type[BaseModel] | None = None
    check: Callable[[Any], Any] | None = None
    optional: bool = True
    lenient: bool = False
    schema: str | None = None  # OpenAPI component for a hand-checked body


@dataclass(frozen=True)
class Failure:
    """The documented 500 of a route: body message, outcome event, stack-trace event."""

    message: str = "internal error"
    event: str = "http.error"
    detail_event: str = "http.error_detail"


# The protocol's own words for these two; the legacy run route keeps the
# texts it has always answered (bodies.NOT_JSON, bodies.NOT_AN_OBJECT).
_PROTOCOL_BODY_MESSAGES = {"invalid_json": "body is not valid JSON", "not_an_object": "body must be a JSON object"}

PROTOCOL_FAILURE = Failure("internal error", "schedule.job_rejected", "schedule.job_error_detail")


class Rejection(Exception):
    """A refusal a handler (or body check) raises: answered ``status`` in the route's surface shape.

    ``code``/``detail``/``retryable`` shape the protocol Error (ignored by legacy routes);
    ``stage`` names the protocol step for ``schedule.job_rejected``; ``event`` overrides the
    route's rejection event; ``fields`` go on the outcome line.
    """

    def __init__(self, status: int, message: str, *, code: str | None = None, detail: Mapping[str, Any] | None = None,
                 retryable: bool | None = None, stage: str | None = None, event: str | None = None,
                 level: str | None = None, **fields: Any) -> None:
        super().__init__(message)
        self.status, self.message, self.code, self.detail = status, message, code, detail
        self.retryable, self.stage, self.event, self.level, self.fields = retryable, stage, event, level, fields


@dataclass
class RouteSpec:
    method: str
    rule: str
    handler: Callable[..., Response]
    surface: Surface
    token: str | None = None
    body: BodySpec | None = None
    received: str | None = None
    source: str | None = None
    precheck: Callable[..., Response | None] | None = None
    rejected_event: str = "http.request_invalid"
    refusal_fields: Mapping[str, Any] = field(default_factory=dict)
    failure: Failure = field(default_factory=Failure)
    stage: str = "handler"
    params: Mapping[str, str] = field(default_factory=dict)  # path parameter -> documented pattern
    regex: re.Pattern[str] | None = None
    in_schema: bool = True  # False: a page, not an API operation (the /ui routes): left out of OpenAPI
    # The text rule (http/text.py), declared beside the route: body fields by dotted path, the
    # query parameters the route reads (the only ones it is handed), its path parameters.
    text: TextRules = field(default_factory=lambda: TextRules({}))
    query: Mapping[str, TextRule] = field(default_factory=dict)
    path_rules: Mapping[str, TextRule] = field(default_factory=dict)
    query_docs: Mapping[str, str] = field(default_factory=dict)
    # What the route's own check adds to a parameter's text rule, for the OpenAPI document (``required``
    # goes on the parameter, the rest on its schema).
    param_schemas: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


# -- one request ---------------------------------------------------------------------------------


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


# Characters a JSON log line may carry raw but line-splitting log tools break on (C1 controls,
# U+2028/U+2029), and lone surrogates the log writer cannot encode at all (the line would be
# dropped). They only come from the path, so they are written as \\uXXXX escapes.
_UNLOGGABLE = re.compile("[\x80-\x9f\u2028\u2029\ud800-\udfff]")


def _loggable(value: Any) -> Any:
    if isinstance(value, str) and _UNLOGGABLE.search(value):
        return _UNLOGGABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", value)
    return value


class Request:
    """One request: correlation fields, timing, the parsed body, and its one outcome line."""

    def __init__(self, event: Any, spec: RouteSpec | None, surface: Surface) -> None:
        self.clock = RequestClock()
        self.spec = spec
        self.surface = surface
        self.headers: dict[str, str] = dict(event.headers or {})
        self.path: str = event.path
        self.method: str = event.http_method
        self.fields: dict[str, Any] = {"path": self.path, "method": self.method}
        if spec is not None and spec.source:
            self.fields["trigger_source"] = spec.source
        for key, value in (("attempt_id", attempt_id(self.headers)), ("provider", provider(self.headers))):
            if value:  # omitted when absent, never synthesised
                self.fields[key] = value
        self.body: Any = None
        self.query: dict[str, str] = {}  # the route's declared query parameters, text-checked
        self.done = False

    def annotate(self, **fields: Any) -> None:
        """Fields every later line of this request carries (e.g. ``schedule_id``)."""
        self.fields.update({k: v for k, v in fields.items() if v is not None})

    def log(self, level: str, event: str, **fields: Any) -> None:
        merged = {**self.fields, **{k: v for k, v in fields.items() if v is not None}, "event": event}
        extra = {(f"{k}_" if k in _RESERVED else k): _loggable(v) for k, v in merged.items()}
        try:
            getattr(logger, level)(event, extra=extra)
        except Exception:  # logging never changes a response
            pass

    def finish(self, status: int, body: Any, event: str, level: str | None = None,
               headers: Mapping[str, str] | None = None, **fields: Any) -> Response:
        """The response, and the request's one outcome line with ``http_status`` = ``status``."""
        if not self.done:
            self.done = True
            if level is None:
                level = "error" if status >= 500 else "warning" if status >= 400 else "info"
            self.log(level, event, http_status=status, elapsed_ms=self.clock.elapsed_ms(), **fields)
        return json_response(status, body, headers)

    def respond(self, response: Response, event: str, level: str | None = None, **fields: Any) -> Response:
        """A response the route built itself (an HTML page, a redirect), with the request's one
        outcome line carrying its status."""
        if not self.done:
            self.done = True
            status = response.status_code
            if level is None:
                level = "error" if status >= 500 else "warning" if status >= 400 else "info"
            self.log(level, event, http_status=status, elapsed_ms=self.clock.elapsed_ms(), **fields)
        return response

    def refuse(self, status: int, message: str, *, code: str | None = None, detail: Mapping[str, Any] | None = None,
               retryable: bool | None = None, stage: str | None = None, event: str | None = None,
               level: str | None = None, headers: Mapping[str, str] | None = None, **fields: Any) -> Response:
        """A refusal in this request's surface shape, logged as the route's rejection."""
        body = self.surface.error(status, message, code=code, detail=detail, retryable=retryable)
        level = level or ("error" if status >= 500 else "warning")
        if self.surface.protocol:
            # Protocol failures log schedule.job_rejected with code and stage.
            return self.finish(status, body, "schedule.job_rejected", level=level, headers=headers,
                               code=body["error"]["code"], stage=stage or (self.spec.stage if self.spec else "route"),
                               reason=message, **fields)
        spec_event = self.spec.rejected_event if self.spec else "http.request_invalid"
        extra = dict(self.spec.refusal_fields) if self.spec else {}
        extra.update(fields)
        return self.finish(status, body, event or spec_event, level=level, headers=headers, reason=message, **extra)

    def authorise(self, kind: str) -> Response | None:
        """None when the bearer token of ``kind`` is presented; else the 503/401 answer."""
        failure = check_bearer(self.headers, runtime.get().secrets.token(kind))
        if failure is None:
            return None
        # Auth failures keep the legacy body on every surface.
        return self.finish(failure.status, LEGACY.error(failure.status, failure.error), "schedule.trigger_unauthorized",
                           level="warning", reason=failure.reason)


def _enforce(rule: TextRule, value: str, name: str) -> None:
    problem = rule.problem(value, name)
    if problem is not None:
        raise problem


def log_detail(message: str, event: str, **fields: Any) -> None:
    """The stack trace of a 500 on its own line (no http_status: it is not an outcome line)."""
    try:
        extra = {(f"{k}_" if k in _RESERVED else k): _loggable(v) for k, v in fields.items()}
        logger.exception(message, extra={**extra, "event": event})
    except Exception:
        pass


def describe_validation_error(exc: ValidationError) -> str:
    """``<field>: <message>`` for the first error, e.g. ``label: Input should be a valid string``."""
    first: Mapping[str, Any] = next(iter(exc.errors()), {})
    loc = [str(p) for p in first.get("loc", ()) if p != "body"]
    return f"{'.'.join(loc) or 'body'}: {first.get('msg') or 'invalid value'}"


# -- the shell ---------------------------------------------------------------------------------------



# A path parameter (``<jobId>``) matches what the router matches it with: RFC 3986's unreserved and
# sub-delimiter characters, the ones a client may send unencoded all the same, and word characters,
# never "/". The rule's literal text is used as written, as the router uses it, so both always
# agree on which route a path names (tests/unit/test_http_shell_routes.py).
_PARAM_TEXT = r"[-._~()'!*:@,;=+&$%<> \[\]{}|^\w]+"


def route_regex(rule: str) -> re.Pattern[str]:
    """The pattern of a route rule such as ``/jobs/<jobId>/events``, naming each parameter."""
    return re.compile("^" + _PARAM.sub(lambda name: f"(?P<{name.group(1)}>{_PARAM_TEXT})", rule) + "$")


class HttpShell:
    """One Powertools resolver with the pipeline and the exception mapping above."""

    def __init__(self, function: str, surface: Surface, *, title: str, version: str, description: str,
                 bearer_schemes: Mapping[str, str]) -> None:
        """``bearer_schemes``: the OpenAPI security schemes, each an HTTP bearer token: name -> description."""
        self.function = function
        self.surface = surface
        self.routes: list[RouteSpec] = []
        # Validation stays OFF in Powertools: its request validation runs before any middleware,
        # i.e. before auth. The shell validates bodies itself, after auth.
        self.app = APIGatewayHttpResolver(enable_validation=False)
        # The OpenAPI side (the document's metadata, its security schemes, each endpoint's annotated
        # signature) is built when a document is first asked for (openapi_json): Powertools' OpenAPI
        # models and parameter classes are pydantic models, and importing them cost every HTTP
        # function's first invocation about 50 ms it never used.
        self._title, self._version, self._description = title, version, description
        self._bearer_schemes = dict(bearer_schemes)
        self._endpoints: list[Callable[..., Response]] = []
        self._documented = False
        # A plain function, not the bound method: Powertools inspects a middleware's signature
        # (typing.get_type_hints, twice) and caches the result as an attribute of the callable, which a
        # bound method cannot carry, so the bound method was inspected again on every request.
        def pipeline(app: APIGatewayHttpResolver, next_middleware: Callable[..., Response]) -> Response:
            return self._pipeline(app, next_middleware)

        self.app.use([pipeline])
        self.app.exception_handler(Exception)(self._on_exception)

    # -- registration ---------------------------------------------------------------------------
    def route(self, method: str, rule: str, *, token: str | None = None, surface: Surface | None = None,
              body: BodySpec | None = None, received: str | None = None, source: str | None = None,
              precheck: Callable[..., Response | None] | None = None, rejected_event: str = "http.request_invalid",
              refusal_fields: Mapping[str, Any] | None = None, failure: Failure | None = None, stage: str = "handler",
              params: Mapping[str, str] | None = None, summary: str | None = None,
              ok: Mapping[int, tuple[str, str | Mapping[str, Any]]] | None = None, errors: Mapping[int, str] | None = None,
              in_schema: bool = True, text: Mapping[str, TextRule] | None = None,
              query: Mapping[str, tuple[TextRule, str]] | None = None,
              path_rules: Mapping[str, TextRule] | None = None,
              param_schemas: Mapping[str, Mapping[str, Any]] | None = None,
              ) -> Callable[[Callable[..., Response]], Callable[..., Response]]:
        """Register a route. ``text``: body fields' rules by dotted path (default ``TEXT``);
        ``query``: the query parameters the route reads, ``name -> (rule, description)``;
        ``path_rules``: path parameters' rules (default ``ID``: they name ledger keys)."""
        surface = surface or self.surface

        def register(handler: Callable[..., Response]) -> Callable[..., Response]:
            spec = RouteSpec(method=method.upper(), rule=rule, handler=handler, surface=surface, token=token, body=body,
                             received=received, source=source, precheck=precheck, rejected_event=rejected_event,
                             refusal_fields=dict(refusal_fields or {}),
                             failure=failure or (PROTOCOL_FAILURE if surface.protocol else Failure()),
                             stage=stage, params=dict(params or {}),
                             regex=route_regex(rule), in_schema=in_schema,
                             text=TextRules(dict(text or {})), query={k: r for k, (r, _) in (query or {}).items()},
                             path_rules=dict(path_rules or {}), query_docs={k: d for k, (_, d) in (query or {}).items()},
                             param_schemas=dict(param_schemas or {}))
            self.routes.append(spec)
            self.app.route(rule, spec.method, summary=summary, security=SECURITY.get(token) if token else None,
                           responses=self._responses(spec, ok or {}, errors or {}),
                           include_in_schema=in_schema)(self._endpoint(spec))
            return handler

        return register

    def _endpoint(self, spec: RouteSpec) -> Callable[..., Response]:
        """What Powertools calls: it hands the handler the shell's Request and the path parameters.

        Its annotated signature (path parameters with their patterns, the body model) exists only for
        the generated OpenAPI document, so ``openapi_json`` gives it one when a document is first
        built; Powertools validates nothing (see ``__init__``).
        """
        names = _PARAM.findall(spec.rule)

        def endpoint(**kwargs: Any) -> Response:
            req: Request = self.app.context[_REQUEST_KEY]
            return spec.handler(req, **{name: kwargs[name] for name in names})

        endpoint.__name__ = spec.handler.__name__
        endpoint.__doc__ = spec.handler.__doc__
        setattr(endpoint, _SPEC_ATTR, spec)
        self._endpoints.append(endpoint)
        return endpoint

    @staticmethod
    def _signature(spec: RouteSpec) -> inspect.Signature:
        """The endpoint's signature as the OpenAPI document shows it: path parameters with their
        patterns, the query parameters the route reads, the body model."""
        from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query

        names = _PARAM.findall(spec.rule)
        parameters = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                                        annotation=Annotated[str, Path(pattern=spec.params[name])] if name in spec.params
                                        else Annotated[str, Path()]) for name in names]
        parameters += [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None,
                                         annotation=Annotated[str | None, Query(description=text)])
                       for name, text in spec.query_docs.items()]
        if spec.body is not None and spec.body.model is not None:
            parameters.append(inspect.Parameter("body", inspect.Parameter.KEYWORD_ONLY, default=None,
                                                annotation=Annotated[spec.body.model | None if spec.body.optional
                                                                     else spec.body.model, Body()]))
        return inspect.Signature(parameters)

    def openapi_json(self) -> str:
        """This shell's routes as Powertools' OpenAPI document (JSON text). The first call gives every
        endpoint its annotated signature and configures the document; nothing before it reads either
        (validation is off: Powertools inspects a route's signature only to build a document)."""
        if not self._documented:
            from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer

            for endpoint in self._endpoints:
                endpoint.__signature__ = self._signature(getattr(endpoint, _SPEC_ATTR))  # type: ignore[attr-defined]  # read by inspect.signature(); not in the stubs
            self.app.configure_openapi(title=self._title, version=self._version, description=self._description, security_schemes={
                name: HTTPBearer(description=text) for name, text in self._bearer_schemes.items()})
            self._documented = True
        return self.app.get_openapi_json_schema()

    def _responses(self, spec: RouteSpec, ok: Mapping[int, tuple[str, str | Mapping[str, Any]]], errors: Mapping[int, str]) -> dict[int, Any]:
        def content(schema: str | Mapping[str, Any]) -> dict[str, Any]:
            ref = {"$ref": f"#/components/schemas/{schema}"} if isinstance(schema, str) else schema
            return {"application/json": {"schema": ref}}

        error = content(spec.surface.error_schema)
        responses: dict[int, Any] = {code: {"description": text, "content": content(schema)} for code, (text, schema) in ok.items()}
        for code, text in errors.items():
            responses[code] = {"description": text, "content": error}
        if spec.token:
            responses.setdefault(401, {"description": "missing or wrong bearer token", "content": content(LEGACY.error_schema)})
            responses.setdefault(503, {"description": "endpoint disabled: token not configured",
                                       "content": content(LEGACY.error_schema)})
        if spec.body is not None:
            responses.setdefault(400, {"description": "invalid body: unparsable, not an object, over 64 KB, nested over 64 "
                                                      "levels, an integer over 4300 digits, or a field that fails its rule",
                                       "content": error})
            responses.setdefault(415, {"description": "Content-Type is not application/json", "content": error})
        responses.setdefault(405, {"description": "another method of this path (the Allow header lists the served ones)",
                                   "headers": {"Allow": {"schema": {"type": "string"}}}, "content": error})
        responses.setdefault(500, {"description": spec.failure.message, "content": error})
        return responses

    # -- dispatch ------------------------------------------------------------------------------------
    def resolve(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        return self.app.resolve(event, context)

    def allowed(self, path: str) -> list[str]:
        return sorted({spec.method for spec in self.routes if spec.regex is not None and spec.regex.match(path)})

    def _pipeline(self, app: APIGatewayHttpResolver, next_middleware: Callable[..., Response]) -> Response:
        route = app.context.get("_route")
        spec: RouteSpec | None = getattr(getattr(route, "func", None), _SPEC_ATTR, None)
        req = Request(app.current_event, spec, spec.surface if spec else self.surface)
        app.append_context(**{_REQUEST_KEY: req})
        if spec is None:
            return self._unrouted(req)
        params: dict[str, Any] = {name: unquote(value) if isinstance(value, str) else value
                                  for name, value in (app.context.get("_route_args") or {}).items()}
        req.annotate(**{_snake(k): v[:_MAX_LOGGED_PARAM] if isinstance(v, str) else v for k, v in params.items()})
        if spec.received:
            req.log("info", "schedule.trigger_received")
        if spec.token:
            denied = req.authorise(spec.token)
            if denied is not None:
                return denied
        self._check_parameters(app, spec, req, params)
        if spec.precheck is not None:
            refused = spec.precheck(req, **params)
            if refused is not None:
                return refused
        if spec.body is not None:
            req.body = self._read_body(app, spec)
        app.append_context(_route_args=params)  # the handler gets the decoded, checked values
        response = next_middleware(app)
        if not req.done:  # a handler answered without finish(): still exactly one outcome line
            req.finish(response.status_code, None, "http.response")
        return response

    def _unrouted(self, req: Request) -> Response:
        allowed = self.allowed(req.path)
        if not allowed:
            return req.refuse(404, "not found", detail={"reason": "unknown_route"}, stage="route", event="http.not_found")
        req.surface = next(spec.surface for spec in self.routes if spec.regex is not None and spec.regex.match(req.path))
        return req.refuse(405, "method not allowed", detail={"reason": "method_not_allowed", "allow": allowed},
                          stage="route", event="http.method_not_allowed", headers={"Allow": ", ".join(allowed)})

    @staticmethod
    def _check_parameters(app: APIGatewayHttpResolver, spec: RouteSpec, req: Request, params: dict[str, Any]) -> None:
        """The text rule on the path parameters (percent-decoded: the value the ledger sees) and on
        the query parameters the route reads; undeclared query parameters are never handed on."""
        for name, value in params.items():
            if isinstance(value, str):
                _enforce(spec.path_rules.get(name, ID), value, name)
        raw = app.current_event.query_string_parameters or {}
        for name, rule in spec.query.items():
            value = raw.get(name)
            if isinstance(value, str):
                _enforce(rule, value, name)
                req.query[name] = value

    def _read_body(self, app: APIGatewayHttpResolver, route: RouteSpec) -> Any:
        spec = route.body
        assert spec is not None
        event = app.current_event
        raw = event.get("body")
        data: Any = None
        if raw not in (None, ""):
            if not is_json_media_type(header(event.headers or {}, "content-type", first_value=False)):
                raise unsupported_media_type()
            text = decode_text(raw, bool(event.get("isBase64Encoded")))
            try:
                data = parse_json(text) if text is not None else None
            except BodyProblem as problem:
                if not (spec.lenient and problem.reason == "invalid_json"):
                    raise
                data = None  # lenient: the route's check answers a body it cannot read
        if spec.lenient:
            data = data if isinstance(data, dict) else {}
        elif data is None:
            if not spec.optional:
                raise BodyProblem(400, "not_an_object", f"body: {NOT_AN_OBJECT}")
            return None
        elif not isinstance(data, dict):
            raise BodyProblem(400, "not_an_object", f"body: {NOT_AN_OBJECT}")
        route.text.check_document(data)  # the one text rule, before any model or check reads a field
        if spec.model is not None:
            try:
                data = spec.model.model_validate(data)
            except ValidationError as exc:
                first: Mapping[str, Any] = next(iter(exc.errors()), {})
                name = ".".join(str(p) for p in first.get("loc", ())) or "body"
                raise BodyProblem(400, "invalid_field", describe_validation_error(exc), field=name) from None
        if spec.check is not None:
            data = spec.check(data)
        return data

    def _on_exception(self, exc: Exception) -> Response:
        """The one exception -> HTTP mapping of both functions."""
        req: Request | None = self.app.context.get(_REQUEST_KEY)
        if req is None:  # raised before the pipeline ran
            req = Request(self.app.current_event, None, self.surface)
        if isinstance(exc, Rejection):
            return req.refuse(exc.status, exc.message, code=exc.code, detail=exc.detail, retryable=exc.retryable,
                              stage=exc.stage, event=exc.event, level=exc.level, **exc.fields)
        if isinstance(exc, BodyProblem):
            message = _PROTOCOL_BODY_MESSAGES.get(exc.reason, exc.message) if req.surface.protocol else exc.message
            return req.refuse(exc.status, message, detail={"reason": exc.reason, "field": exc.field}, stage="body")
        if isinstance(exc, StatusError):  # a domain refusal: its status and message
            return req.refuse(exc.status, exc.message, code=getattr(exc, "code", None), detail=getattr(exc, "detail", None),
                              retryable=getattr(exc, "retryable", None))
        failure = req.spec.failure if req.spec else (PROTOCOL_FAILURE if self.surface.protocol else Failure())
        log_detail(failure.message, failure.detail_event, **req.fields)
        if req.surface.protocol:
            # Never internal text on the protocol surface.
            return req.finish(500, req.surface.error(500, "internal error", code="internal_error"), "schedule.job_rejected",
                              code="internal_error", stage=req.spec.stage if req.spec else "route",
                              reason=type(exc).__name__)
        return req.finish(500, LEGACY.error(500, failure.message), failure.event, reason=type(exc).__name__)


__all__ = [
    "BodySpec",
    "Failure",
    "HttpShell",
    "LEGACY",
    "PROTOCOL",
    "PROTOCOL_FAILURE",
    "Rejection",
    "Request",
    "RouteSpec",
    "Surface",
    "describe_validation_error",
    "log_detail",
]
