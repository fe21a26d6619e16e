"""Read template.yaml (SAM / CloudFormation YAML) into plain Python data.

CloudFormation's short-form intrinsic tags (``!Ref``, ``!GetAtt``, ``!Sub`` …) are turned into their
long-form dicts (``{"Ref": x}``, ``{"Fn::GetAtt": [res, attr]}``, ``{"Fn::Sub": …}``), so callers see the
same structure CloudFormation itself sees. Duplicate mapping keys are an error, as in CloudFormation.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import yaml

__all__ = ["CloudFormationLoader", "SweepInterval", "default_template_path", "load_template", "read_template", "sweep_interval"]

TEMPLATE_ENV = "PIXIVFLOW_TEMPLATE"

# short tag -> long-form key (``!Ref`` and ``!Condition`` keep their bare names)
_FUNCTION_TAGS: dict[str, str] = {
    "Ref": "Ref",
    "Condition": "Condition",
    "GetAtt": "Fn::GetAtt",
    "Sub": "Fn::Sub",
    "If": "Fn::If",
    "Equals": "Fn::Equals",
    "Join": "Fn::Join",
    "Select": "Fn::Select",
    "Split": "Fn::Split",
    "FindInMap": "Fn::FindInMap",
    "ImportValue": "Fn::ImportValue",
    "Not": "Fn::Not",
    "And": "Fn::And",
    "Or": "Fn::Or",
    "Base64": "Fn::Base64",
    "Cidr": "Fn::Cidr",
    "GetAZs": "Fn::GetAZs",
    "Transform": "Fn::Transform",
    "Length": "Fn::Length",
    "ToJsonString": "Fn::ToJsonString",
}


class CloudFormationLoader(yaml.SafeLoader):
    """SafeLoader that understands CloudFormation short-form tags and rejects duplicate keys."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r}",
                    key_node.start_mark,
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _construct_value(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_mapping(cast(yaml.MappingNode, node), deep=True)  # the only kind left


def _make_constructor(long_name: str):
    def construct(loader: yaml.SafeLoader, node: yaml.Node) -> dict[str, Any]:
        value = _construct_value(loader, node)
        if long_name == "Fn::GetAtt" and isinstance(value, str):
            # "Resource.Attr" (the attribute itself may contain dots, e.g. Endpoint.Address)
            resource, sep, attribute = value.partition(".")
            if not sep or not resource or not attribute:
                raise yaml.constructor.ConstructorError(
                    None, None, f"!GetAtt expects 'Resource.Attribute', got {value!r}", node.start_mark
                )
            value = [resource, attribute]
        return {long_name: value}

    return construct


for _tag, _long in _FUNCTION_TAGS.items():
    CloudFormationLoader.add_constructor(f"!{_tag}", _make_constructor(_long))


_REPOSITORY_TEMPLATE = Path(__file__).resolve().parents[3] / "template.yaml"


def default_template_path() -> Path:
    """``$PIXIVFLOW_TEMPLATE`` if set, else the repository's ``template.yaml``."""
    override = os.environ.get(TEMPLATE_ENV)
    if override:
        return Path(override)
    return _REPOSITORY_TEMPLATE


_parsed: dict[tuple[str, int, int], dict[str, Any]] = {}


def load_template(path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Parse a CloudFormation/SAM YAML template into long-form Python data.

    The parse is kept per (path, size, mtime): the simulation provisions a fresh runtime per seed,
    and parsing the template was a quarter of a seed's time. Callers get their own copy."""
    return _copied(read_template(path))


def read_template(path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The cached parse itself, shared: only for readers that change nothing in it (local
    provisioning, the sweep interval; copying it for each seed's runtime was 4% of a seed)."""
    template_path = Path(path) if path is not None else default_template_path()
    stat = template_path.stat()
    # abspath, not resolve(): the stat in the key already tells a changed file, and resolve's
    # walk of every path component was 2% of a seed
    key = (os.path.abspath(template_path), stat.st_size, stat.st_mtime_ns)
    if key not in _parsed:
        with open(template_path, encoding="utf-8") as fh:
            data = yaml.load(fh, Loader=CloudFormationLoader)  # noqa: S506 - SafeLoader subclass
        if not isinstance(data, dict):
            raise ValueError(f"{template_path}: a template must be a mapping, got {type(data).__name__}")
        _parsed[key] = data
    return _parsed[key]


def _copied(value: Any) -> Any:
    """A copy of parsed YAML: its dicts and lists are new, its scalars (immutable) shared. Same
    result as copy.deepcopy, at a fraction of its cost (the simulation copies it once per seed)."""
    if type(value) is dict:
        return {k: _copied(v) for k, v in value.items()}
    if type(value) is list:
        return [_copied(v) for v in value]
    if isinstance(value, (str, int, float, bool, type(None))):
        return value
    return copy.deepcopy(value)  # anything else YAML can build (dates, sets): the general copy


@dataclass(frozen=True)
class SweepInterval:
    """How often the stall sweep runs, as the template deploys it (``SweepIntervalMinutes``)."""

    minutes: int
    schedule: str  # the ScheduleV2 expression: rate(1 minute), rate(5 minutes)
    seconds: int  # the HealthAlarm's period and the schedule's event age

    @property
    def ms(self) -> int:
        return self.seconds * 1000


def sweep_interval(minutes: int | str | None = None, template: str | os.PathLike[str] | dict[str, Any] | None = None) -> SweepInterval:
    """The stall sweep's interval: ``SweepIntervalMinutes``' default, or ``minutes`` (one of its
    AllowedValues, as a deploy would insist), spelled by the template's own ``SweepIntervals``
    mapping, so the local runtime, the bench and the deployed stack read one table. It only reads,
    so it reads the cached parse, uncopied (every embedded runtime asks: the simulation, once a seed)."""
    tpl = template if isinstance(template, dict) else read_template(template)
    parameter = tpl["Parameters"]["SweepIntervalMinutes"]
    value = parameter["Default"] if minutes is None else minutes
    allowed = [str(v) for v in parameter["AllowedValues"]]
    chosen = str(value).strip()
    if chosen not in allowed:
        raise ValueError(f"SweepIntervalMinutes: {value!r} is not one of the allowed intervals ({', '.join(allowed)} minutes)")
    row = tpl["Mappings"]["SweepIntervals"][chosen]
    return SweepInterval(int(chosen), str(row["Schedule"]), int(row["Seconds"]))
