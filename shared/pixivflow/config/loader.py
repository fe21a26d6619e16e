"""Loading: a document from a path or SSM, parsed, softened, validated, with errors naming fields."""

from __future__ import annotations

from ..domain.text import ascii_digits
import json
import os
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..domain.errors import ConfigError
from .model import PixivFlowConfig, ReferenceErrors
from .warnings import _key_warnings, _semantic_warnings, _soften

def _format_error(exc: ValidationError) -> str:
    return "invalid configuration: " + "; ".join(_error_lines(exc))


def _error_lines(exc: ValidationError) -> list[str]:
    lines = []
    for err in exc.errors():
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, ReferenceErrors):  # the model's cross-reference rules: one line per finding
            lines += cause.findings
            continue
        path = ""
        loc = tuple(err.get("loc", ()))
        for part in loc:
            if isinstance(part, int):
                path += f"[{part}]"
            else:
                path += ("." if path else "") + str(part)
        msg = err.get("msg", "invalid")
        msg = msg.removeprefix("Value error, ")
        # A model-level rule names its field first ("cron: required ..."): fold it into the path.
        match = re.match(r"^([A-Za-z_][\w\[\]-]*(?:\.[A-Za-z_][\w\[\]-]*)*): (.*)$", msg, re.S)
        if match and path:
            path, msg = f"{path}.{match.group(1)}", match.group(2)
        lines.append(f"{path}: {msg}" if path else msg)
    return lines



def strip_comments(data: Any) -> Any:
    """Drop every ``_``-prefixed key at any depth: PixivFlow configs use them as comments."""
    if isinstance(data, dict):
        return {k: strip_comments(v) for k, v in data.items() if not (isinstance(k, str) and k.startswith("_"))}
    if isinstance(data, list):
        return [strip_comments(v) for v in data]
    return data


SCAN_LIMIT_ENV = "PIXIV_CANDIDATE_SCAN_LIMIT"
SCHEDULER_ENABLED_ENV = "PIXIV_SCHEDULER_ENABLED"


def _environment_overrides(data: dict, env: Any) -> dict:
    """PixivFlow's environment overrides of config keys (its ``src/config/environment.ts``):

    * ``PIXIV_CANDIDATE_SCAN_LIMIT``: a positive integer replaces
      ``download.candidateScanLimit`` and is then clamped like the key itself (``_soften``); a
      non-positive or non-numeric value is ignored, as PixivFlow ignores it.
    * ``PIXIV_SCHEDULER_ENABLED``: ``scheduler.enabled`` is true exactly when the value is
      ``true`` (any case), and a config without a ``scheduler`` block gets PixivFlow's default one
      (``0 3 * * *``). It is how PixivFlow's own Docker deployment turns a run-once config such as
      ``standalone.example.json`` into a daily one without editing it. The legacy block only
      becomes a plan when there is no ``schedules`` key (``plans.legacy_plan``), so beside one this
      changes nothing. Unlike PixivFlow, an empty value counts as unset: a stack parameter left
      blank must not switch a config's scheduler off."""
    out = data
    raw = (env.get(SCAN_LIMIT_ENV) or "").strip()
    if ascii_digits(raw) and int(raw) > 0:
        download = out.get("download")
        download = dict(download) if isinstance(download, dict) else {}
        download["candidateScanLimit"] = int(raw)
        out = {**out, "download": download}
    switch = (env.get(SCHEDULER_ENABLED_ENV) or "").strip()
    if switch:
        legacy = out.get("scheduler")
        legacy = dict(legacy) if isinstance(legacy, dict) else {}
        legacy["enabled"] = switch.lower() == "true"
        out = {**out, "scheduler": legacy}
    return out


def parse_config(data: Any, *, base_dir: Path | None = None) -> PixivFlowConfig:
    """Validate a config document. Relative catalogue paths resolve against ``base_dir``.

    The warn-and-default findings are on ``config.warnings`` (and on a raised ConfigError's
    ``warnings``, so ``pixivflow config check`` shows both)."""
    if not isinstance(data, dict):
        raise ConfigError("invalid configuration: the document must be a mapping")
    data, warnings = _soften(_environment_overrides(data, os.environ))
    try:
        config = PixivFlowConfig.model_validate(strip_comments(data))
    except ValidationError as exc:
        raise ConfigError(_format_error(exc), warnings=tuple(warnings), errors=tuple(_error_lines(exc))) from None
    if base_dir is not None and config.source.path and not os.path.isabs(config.source.path):
        source = config.source.model_copy(update={"path": str((base_dir / config.source.path).resolve())})
        config = config.model_copy(update={"source": source})
    config._warnings = tuple(warnings + _semantic_warnings(config) + config._ignored_keys() + _key_warnings(config))
    return config


def parse_text(text: str, *, base_dir: Path | None = None, syntax: str | None = None) -> PixivFlowConfig:
    """Parse ``text`` as ``syntax`` (``"json"`` or ``"yaml"``); without one, a document that
    parses as JSON is JSON, anything else YAML.

    JSON goes through the JSON parser, never YAML's: PyYAML reads the escaped surrogate pair that
    ``json.dumps`` writes for an emoji (``"\\ud83d\\udcc5"``) as two lone surrogates, a string no
    UTF-8 encoder accepts, so every multipart send of that field would fail."""
    if syntax not in (None, "json", "yaml"):
        raise ValueError(f"unknown config syntax {syntax!r}")
    if syntax != "yaml":
        try:
            data = json.loads(text)
        except ValueError as exc:
            if syntax == "json":
                raise ConfigError(f"invalid configuration: not JSON ({exc})") from None
        else:
            return parse_config(data, base_dir=base_dir)
    # PyYAML only for a YAML document: the deployed functions read JSON from SSM (PixivFlow's own
    # configs are JSON), and importing it cost every cold start about 10 ms. libyaml's safe loader
    # (PyYAML's wheels carry it, Lambda's included) builds the same objects as the pure-Python one
    # at about a tenth of its CPU.
    import yaml

    try:
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - a SafeLoader, in C where PyYAML has it
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid configuration: not YAML/JSON ({exc})") from None
    return parse_config(data, base_dir=base_dir)


def _syntax(path: Path) -> str | None:
    suffix = path.suffix.lower()
    return "json" if suffix == ".json" else "yaml" if suffix in (".yaml", ".yml") else None


def load_config(location: str | None = None, *, ssm_reader=None) -> PixivFlowConfig:
    """Load from a path or ``ssm:<name>`` (``ssm_reader(name) -> str`` is injected by the runtime)."""
    location = location or os.environ.get("PIXIVFLOW_CONFIG")
    if not location:
        raise ConfigError("PIXIVFLOW_CONFIG is not set (a file path or ssm:<parameter name>)")
    if location.startswith("ssm:"):
        if ssm_reader is None:
            raise ConfigError("PIXIVFLOW_CONFIG names an SSM parameter but no SSM reader is available")
        return parse_text(ssm_reader(location[4:]))
    path = Path(location)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read PIXIVFLOW_CONFIG {location!r}: {exc.strerror}") from None
    return parse_text(text, base_dir=path.resolve().parent, syntax=_syntax(path))
