"""Configuration: PixivFlow's `schedules`, `targets`, `delivery`, `source`, `pixiv`, `network`,
`download` and `schedulerRuntime` blocks.

Field names keep PixivFlow's camelCase so an existing config loads unchanged. Unknown keys
are warnings with a did-you-mean hint, and PixivFlow's keys that mean nothing on Lambda are one
grouped warning (``warnings``); neither refuses the config. A bad value fails fast with a
``ConfigError`` naming the field path, e.g. ``schedules[1].cron: ...``.

Location: env ``PIXIVFLOW_CONFIG`` = a file path or ``ssm:<parameter name>``; a ``.json`` file is
parsed as JSON, ``.yaml``/``.yml`` as YAML, anything else as JSON when it is JSON, else YAML.
Secrets never live here: bearer tokens come from env or SSM (see ``pixivflow.http.auth``); the
Pixiv refresh token is a ``${VAR}`` reference resolved at first use (``adapters/secret_refs.py``).
A `pixiv` block without a `source` block selects the Pixiv source.

The package is split by PixivFlow's areas, so the next key has an obvious home:
``plans`` (schedules), ``targets``, ``routes`` (delivery), ``pixiv`` (source, account, network,
download), ``runtime`` (schedulerRuntime, jobs), ``warnings`` (what is repaired or ignored, and
why), ``model`` (the whole document) and ``loader`` (path / SSM → a validated config).
"""

from __future__ import annotations

from .base import (
    DEFAULT_QUEUED_TIMEOUT_MS,
    DEFAULT_SCHEDULE_TIMEOUT_MS,
    DEFAULT_STALL_TIMEOUT_MS,
    ID_PATTERN,
    MAX_ROUTES_PER_TARGET,
    MAX_TARGETS_PER_SCHEDULE,
    STALL_MIN_TIMEOUT_MS,
)
from .loader import load_config, parse_config, parse_text, strip_comments
from .model import PixivFlowConfig
from .pixiv import DownloadConfig, NetworkConfig, PixivConfig, ProxyConfig, SourceBaseUrls, SourceConfig
from .plans import ScheduleConfig
from .routes import DEPRECATED_ROUTE_KEYS, DeliveryConfig, FieldValue, RichNovelPreview, RouteModel
from .runtime import JobsConfig, SchedulerRuntimeConfig, TriggerConfig
from .targets import TargetConfig, TargetDelivery
from .warnings import IGNORED_TARGET_KEYS, LIMIT_WARN_ABOVE

__all__ = [
    "DEFAULT_QUEUED_TIMEOUT_MS", "DEFAULT_SCHEDULE_TIMEOUT_MS", "DEFAULT_STALL_TIMEOUT_MS", "DEPRECATED_ROUTE_KEYS",
    "ID_PATTERN", "IGNORED_TARGET_KEYS", "LIMIT_WARN_ABOVE", "MAX_ROUTES_PER_TARGET", "MAX_TARGETS_PER_SCHEDULE",
    "STALL_MIN_TIMEOUT_MS", "DeliveryConfig", "DownloadConfig", "FieldValue", "JobsConfig", "NetworkConfig",
    "PixivConfig", "PixivFlowConfig", "ProxyConfig", "RichNovelPreview", "RouteModel", "ScheduleConfig",
    "SchedulerRuntimeConfig", "SourceBaseUrls", "SourceConfig", "TargetConfig", "TargetDelivery", "TriggerConfig", "load_config", "parse_config", "parse_text", "strip_comments",
]
