"""A ``$defs/Task`` for ``candidate_search``: parsing and its retrieval view.

Parsing is strict about the documented fields, in the documented order, and tolerant about
unknown keys at every level: a newer consumer can talk to this producer. Every refusal
is a :class:`ProtocolError` naming the field in ``detail.field`` (or the reason), and nothing
has been written when it is raised.

The stored ``params`` are the normalised document (trimmed strings, ``expand`` only when
true, ``scan_limit`` capped at 100, no ``target_id``): the same request always stores the same
JSON, which is what the idempotency conflict check compares.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping, TypeGuard

from .protocol import JOB_TYPE, SUPPORTED_VERSIONS, ProtocolError, invalid

MAX_KEY = 200
MAX_CORRELATION = 200
MAX_CALLBACK_URL = 2000
MIN_DEADLINE_MS = 1000
MAX_ACCOUNT = 100
MAX_TAGS = 20
MAX_TAG = 100
MAX_EXCLUDE = 100
MAX_EXCLUDE_ID = 100
MAX_SCAN_LIMIT = 100
MAX_LIMIT = 100
EXCLUDE_KINDS = ("work", "candidate", "tag")


@dataclass(frozen=True)
class Task:
    idempotency_key: str
    params: dict[str, Any]  # the normalised params that are stored and drive the run
    target_id: str | None = None  # the v1.1 selector; never stored in params
    correlation_id: str | None = None
    callback_url: str | None = None
    deadline_ms: int | None = None  # validated, accepted, not enforced

    @property
    def account(self) -> str | None:
        return (self.params.get("source") or {}).get("account")

    @property
    def work_types(self) -> list[str]:
        return list((self.params.get("constraints") or {}).get("work_types") or [])

    @property
    def params_json(self) -> str:
        return canonical_json(self.params)


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _string(value: Any, max_len: int) -> str | None:
    """The trimmed value when it is a non-empty string of at most ``max_len`` chars, else None."""
    if not isinstance(value, str):
        return None
    trimmed = value.strip()
    return trimmed if trimmed and len(trimmed) <= max_len else None


def parse_task(body: Any) -> Task:
    # 1. an object
    if not isinstance(body, dict):
        raise invalid("body must be a JSON object", reason="not_an_object", field="body")  # as the HTTP shell words it
    # 2. protocol_version: absent is malformed, different is a version mismatch
    version = body.get("protocol_version")
    if version is None:
        raise invalid("protocol_version is required", field="protocol_version")
    if version not in SUPPORTED_VERSIONS:
        raise ProtocolError("unsupported_protocol_version", 400, "protocol_version is not supported",
                            {"received": version, "supported": list(SUPPORTED_VERSIONS)}, stage="validation")
    # 3. job_type (no new enum member for it: invalid_params with a reason)
    job_type = body.get("job_type")
    if job_type != JOB_TYPE:
        raise invalid("job_type is not supported", reason="unsupported_job_type", job_type=job_type,
                      supported=[JOB_TYPE])
    # 4. idempotency_key
    key = _string(body.get("idempotency_key"), MAX_KEY)
    if key is None:
        raise invalid(f"idempotency_key must be a non-empty string of at most {MAX_KEY} chars", field="idempotency_key")
    # 5. optional scalars
    correlation = body.get("correlation_id")
    if correlation is not None and (not isinstance(correlation, str) or len(correlation) > MAX_CORRELATION):
        raise invalid(f"correlation_id must be a string of at most {MAX_CORRELATION} chars", field="correlation_id")
    callback = body.get("callback_url")
    if callback is not None and (not isinstance(callback, str) or len(callback) > MAX_CALLBACK_URL):
        raise invalid(f"callback_url must be a string of at most {MAX_CALLBACK_URL} chars", field="callback_url")
    deadline = body.get("deadline_ms")
    if deadline is not None and (not _is_int(deadline) or deadline < MIN_DEADLINE_MS):
        raise invalid(f"deadline_ms must be an integer of at least {MIN_DEADLINE_MS}", field="deadline_ms")
    labels = body.get("labels")
    if labels is not None and (not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values())):
        raise invalid("labels must be an object whose values are strings", field="labels")
    # 6. params
    params = body.get("params")
    if not isinstance(params, dict):
        raise invalid("params must be an object", field="params")
    target_id = _target_selector(params)
    stored = _params(params, selector=target_id is not None)
    return Task(idempotency_key=key, params=stored, target_id=target_id, correlation_id=correlation or None,
                callback_url=callback or None, deadline_ms=deadline)


def _target_selector(params: Mapping[str, Any]) -> str | None:
    if "target_id" not in params or params["target_id"] is None:
        return None
    value = params["target_id"]
    if not isinstance(value, str) or not value.strip():
        raise invalid("params.target_id must be a non-empty string", field="params.target_id")
    return value.strip()


def _params(params: Mapping[str, Any], *, selector: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    source = params.get("source")
    if source is not None:
        if not isinstance(source, dict):
            raise invalid("params.source must be an object", field="params.source")
        stored_source: dict[str, Any] = {}
        if source.get("platform") is not None:
            if source["platform"] != "pixiv":
                raise invalid('params.source.platform must be "pixiv"', field="params.source.platform")
            stored_source["platform"] = "pixiv"
        if source.get("account") is not None:
            account = _string(source["account"], MAX_ACCOUNT)
            if account is None:
                raise invalid(f"params.source.account must be a non-empty string of at most {MAX_ACCOUNT} chars",
                              field="params.source.account")
            stored_source["account"] = account
        if stored_source:
            out["source"] = stored_source
    query = params.get("query")
    if query is None and not selector:
        raise invalid("params.query must be an object", field="params.query")
    if query is not None:
        out["query"] = _query(query)
    constraints = params.get("constraints")
    if constraints is not None:
        stored_constraints = _constraints(constraints)
        if stored_constraints:
            out["constraints"] = stored_constraints
    return out


def _query(query: Any) -> dict[str, Any]:
    if not isinstance(query, dict):
        raise invalid("params.query must be an object", field="params.query")
    tags = query.get("tags")
    message = f"params.query.tags must be 1 to {MAX_TAGS} non-empty strings of at most {MAX_TAG} chars"
    if not isinstance(tags, list) or not tags or len(tags) > MAX_TAGS:
        raise invalid(message, field="params.query.tags")
    stored_tags = []
    for i, tag in enumerate(tags):
        value = _string(tag, MAX_TAG)
        if value is None:
            raise invalid(message, field=f"params.query.tags[{i}]")
        stored_tags.append(value)
    out: dict[str, Any] = {"tags": stored_tags}
    expand = query.get("expand")
    if expand is not None:
        if not isinstance(expand, bool):
            raise invalid("params.query.expand must be a boolean", field="params.query.expand")
        if expand:
            out["expand"] = True
    return out


def _constraints(constraints: Any) -> dict[str, Any]:
    if not isinstance(constraints, dict):
        raise invalid("params.constraints must be an object", field="params.constraints")
    out: dict[str, Any] = {}
    exclude = constraints.get("exclude")
    if exclude is not None:
        if not isinstance(exclude, list) or len(exclude) > MAX_EXCLUDE:
            raise invalid(f"params.constraints.exclude must be a list of at most {MAX_EXCLUDE} entries",
                          field="params.constraints.exclude")
        entries = []
        for i, entry in enumerate(exclude):
            if not isinstance(entry, dict) or entry.get("kind") not in EXCLUDE_KINDS:
                raise invalid("params.constraints.exclude entries need kind work, candidate or tag",
                              field=f"params.constraints.exclude[{i}].kind")
            ident = _string(entry.get("id"), MAX_EXCLUDE_ID)
            if ident is None:
                raise invalid(f"params.constraints.exclude entries need a non-empty id of at most {MAX_EXCLUDE_ID} chars",
                              field=f"params.constraints.exclude[{i}].id")
            entries.append({"kind": entry["kind"], "id": ident})
        out["exclude"] = entries
    for name in ("limit", "scan_limit"):
        value = constraints.get(name)
        if value is None:
            continue
        if not _is_int(value) or value < 1:
            raise invalid(f"params.constraints.{name} must be an integer of at least 1", field=f"params.constraints.{name}")
        out[name] = min(value, MAX_SCAN_LIMIT) if name == "scan_limit" else value
    work_types = constraints.get("work_types")
    if work_types is not None:
        if not isinstance(work_types, list) or not all(isinstance(w, str) and w.strip() for w in work_types):
            raise invalid("params.constraints.work_types must be a list of non-empty strings",
                          field="params.constraints.work_types")
        out["work_types"] = [w.strip() for w in work_types]
    return out


# -- the retrieval view (applyCandidateSearchParams) -------------------------------------------


@dataclass(frozen=True)
class RetrievalView:
    """What a job's stored params change about its target's selection. Delivery wiring, the
    target id and the plan are never part of it."""

    tag: str | None = None
    tag_relation: str | None = None
    limit: int | None = None
    scan_limit: int | None = None
    excluded_work_ids: frozenset[str] = field(default_factory=frozenset)

    def target_updates(self) -> dict[str, Any]:
        """The target config fields this view overrides (``TargetConfig`` field names)."""
        updates: dict[str, Any] = {}
        if self.tag is not None:
            updates["tag"] = self.tag
        if self.tag_relation is not None:
            updates["tagRelation"] = self.tag_relation
        if self.limit is not None:
            updates["limit"] = self.limit
        if self.scan_limit is not None:
            updates["candidateScanLimit"] = self.scan_limit
        return updates


def retrieval_view(params: Any) -> RetrievalView | None:
    """The view of stored params; None runs the target as configured (absent, empty or unusable
    params: a resumed job whose params cannot be read must still run)."""
    if isinstance(params, str):
        try:
            params = json.loads(params)
        except ValueError:
            return None
    if not isinstance(params, dict) or not params:
        return None
    query = asked if isinstance(asked := params.get("query"), dict) else {}
    constraints = bounds if isinstance(bounds := params.get("constraints"), dict) else {}
    tags = [t for t in query.get("tags") or [] if isinstance(t, str) and t]
    tag = " ".join(tags) if tags else None
    relation = "or" if len(tags) > 1 and query.get("expand") is True else None
    limit = constraints.get("limit")
    limit = max(1, min(MAX_LIMIT, limit)) if _is_int(limit) else None
    scan = constraints.get("scan_limit")
    scan = max(limit or 1, min(MAX_SCAN_LIMIT, scan)) if _is_int(scan) else None
    # Only `work` exclusions are applied (to both work types); candidate/tag kinds are accepted
    # and stored but select nothing, as in PixivFlow, whose code applies none of them.
    excluded = frozenset(str(e["id"]) for e in constraints.get("exclude") or []
                         if isinstance(e, dict) and e.get("kind") == "work" and e.get("id"))
    view = RetrievalView(tag=tag, tag_relation=relation, limit=limit, scan_limit=scan, excluded_work_ids=excluded)
    return view if (view.target_updates() or view.excluded_work_ids) else None


def job_target(target: Any, params: Any) -> tuple[Any, frozenset[str]]:
    """The target a job runs (the configured one with its view applied) and the work ids it must
    not select. The one place a job's params meet a target's selection fields."""
    view = retrieval_view(params)
    if view is None:
        return target, frozenset()
    updates = view.target_updates()
    return (target.model_copy(update=updates) if updates else target), view.excluded_work_ids


__all__ = ["RetrievalView", "Task", "canonical_json", "job_target", "parse_task", "retrieval_view"]
