"""The route kinds: every kind of delivery route a config can declare, declared once.

A kind is its config model (the block under ``delivery.targets.<name>``), the sender that speaks
its wire format, the parser of its answers, and what it can do: whether it carries the stored
files (so they may be deleted once delivered), takes preview images, renders PixivFlow's
templates, or posts in several calls that must never be repeated silently (a review chat). The
config validates a route with its kind's model; the route channel sends through its kind's
sender; the services ask the route what it can do (``ports.RouteSettings``) and never which kind
it is. Adding a kind: ``docs/how-to/add-a-route-kind.md``.
"""

from __future__ import annotations

from . import gateway_webhook, http_multipart, json_webhook, telegram
from .registry import (DEFAULT, RouteKind, RouteSender, SenderTools, kind_for, kind_of, kinds, register, unregister,
                       validate, values_of)

# The built-in kinds, one module each (model, answers, sender): a new kind is one more entry here.
BUILT_IN = (json_webhook.KIND, http_multipart.KIND, gateway_webhook.KIND, telegram.KIND)
for _kind in BUILT_IN:
    register(_kind)

__all__ = ["BUILT_IN", "DEFAULT", "RouteKind", "RouteSender", "SenderTools", "kind_for", "kind_of", "kinds", "register",
           "unregister", "validate", "values_of"]
