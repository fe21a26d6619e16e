"""RequestKeys (``pixivflow.ports.RequestKeys``): manual identity: one idempotency key, one slot, forever.

The role's part of the ledger's contract suite (``ledger_env.py``: both backends, every test)."""

from __future__ import annotations

import ledger_env
from ledger_env import T0, Env

env = ledger_env.env


def test_a_request_key_names_the_record_of_its_first_claim_forever_whatever_its_spelling(env: Env) -> None:
    key = "3F2504E0-4F89-11D3-9A0C-0305E82C3301"
    assert env.ledger.get_request_key(key) is None
    first = {"kind": "refetch", "requestKey": key, "slotRef": "manual-cats@3f2504e0", "targetId": "cats", "createdAt": T0,
             "planId": None}  # a None is left out
    created, stored = env.ledger.claim_request_key(key, first)
    assert created is True
    assert {k: stored[k] for k in ("kind", "slotRef", "targetId", "createdAt")} == {
        "kind": "refetch", "slotRef": "manual-cats@3f2504e0", "targetId": "cats", "createdAt": T0}
    assert "planId" not in stored and stored["expiresAt"] > T0 // 1000  # kept as long as the slot it names can be
    # a replay with another body, and another spelling of the same key, get the first record back
    replay = {**first, "slotRef": "manual-landscape@3f2504e0", "targetId": "landscape", "createdAt": T0 + 5}
    assert env.ledger.claim_request_key(key.lower(), replay) == (False, stored)
    assert env.ledger.get_request_key(key) == stored == env.ledger.get_request_key(key.lower())
    assert env.ledger.get_request_key("another-key") is None
