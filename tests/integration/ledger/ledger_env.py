"""What every file of the ledger's contract suite shares: the ``env`` fixture (``DynamoLedger`` on a table
built from template.yaml, once on moto's ``mock_aws()`` and once on the in-memory DynamoDB twin
``pixivflow.local.twins.TwinCloud``), the raw read of an item, and the builders of slots and intents.

The folder is the ledger's contract suite, one file per role of ``pixivflow.ports.LEDGER_ROLES``: every
test runs twice, on moto and on the twin, which keeps the twin (the simulation runs on it) from drifting
from DynamoDB as moto models it; ``test_every_role_is_covered.py`` holds every method of every role to a
test in its role's file.

A test module of this folder imports it by its basename (the folder is on ``sys.path``, as for every test
folder) and binds the fixture with ``env = ledger_env.env``. It is not a ``conftest.py``: the folders have
no ``__init__.py``, so a second ``conftest`` module would replace ``tests/conftest.py`` in
``sys.modules`` and break every later ``from conftest import ...`` (tests/README.md, Layout)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from moto import mock_aws

from pixivflow import aws
from pixivflow.adapters.dynamo_ledger import DynamoLedger, slot_pk
from pixivflow.domain.model import Intent, Slot
from pixivflow.local.provision import provision
from pixivflow.local.twins import TwinCloud

T0 = 1_796_079_600_000  # 2026-11-30T23:00:00Z
LEASE_MS = 180_000
OUTBOX_LEASE_MS = 120_000
TYPES = {"cats": "illustration", "landscape": "illustration", "novels": "novel"}


@dataclass
class Env:
    ledger: DynamoLedger
    client: object
    table: str

    def raw(self, slot_id: str, sk: str) -> dict | None:
        resp = self.client.get_item(TableName=self.table, Key={"pk": {"S": slot_pk(slot_id)}, "sk": {"S": sk}},
                                    ConsistentRead=True)
        return resp.get("Item")


@pytest.fixture(params=["moto", "twin"])
def env(request) -> Iterator[Env]:
    with (mock_aws() if request.param == "moto" else TwinCloud()):
        names = provision()
        client = aws.client("dynamodb")
        yield Env(DynamoLedger(client, names["LEDGER_TABLE"]), client, names["LEDGER_TABLE"])


def make_slot(slot_id: str = "morning-tokyo@2026-12-01T0800", targets=("cats", "landscape", "novels"),
              created_at: int = T0, slot_name: str = "08:00") -> Slot:
    return Slot(slot_id=slot_id, schedule_id=slot_id.split("@")[0], status="pending", target_ids=list(targets),
                created_at=created_at, occurrence_at=T0, occurrence_date="2026-12-01", occurrence_label="08:00",
                timezone="Asia/Tokyo", trigger_source="cron", slot_name=slot_name, timeout_ms=1_800_000)


def admitted(env: Env, slot: Slot | None = None) -> Slot:
    slot = slot or make_slot()
    stored, created = env.ledger.create_slot(slot)
    assert created
    assert env.ledger.ensure_cells(stored, TYPES, T0) == list(slot.target_ids)
    return stored


def make_intent(slot_id: str = "morning-tokyo@2026-12-01T0800", target_id: str = "cats", work_id: str = "1001",
                next_attempt_at: int = T0, route: str = "review") -> Intent:
    key = f"pixivflow:{route}:illustration:{work_id}:{slot_id}:{target_id}"
    return Intent(slot_id=slot_id, target_id=target_id, route=route, work_type="illustration", work_id=work_id,
                  idempotency_key=key, max_attempts=12, next_attempt_at=next_attempt_at, created_at=T0,
                  updated_at=T0, payload={"work": {"id": work_id, "title": "cat"}})


# -- cells written by their first claim (admission writes the slot alone; issue 14) -----------------


def slot_only(env: Env, targets=("cats", "landscape", "novels")) -> Slot:
    stored, created = env.ledger.create_slot(make_slot(targets=targets))
    assert created
    return stored


def unwritten(env: Env, slot: Slot, target_id: str):
    cell = env.ledger.load(slot.slot_id).cell(target_id)
    assert cell is not None and cell.virtual
    cell.work_type = TYPES[target_id]
    return cell


def dead_row(env: Env, intent: Intent, at: int) -> Intent:
    """``intent`` put, claimed and settled dead (a 404 from its route) at ``at``."""
    from pixivflow.domain.model import LedgerStatus, OutboxStatus

    stored, _ = env.ledger.put_intent(intent)
    claimed = env.ledger.claim_intent(stored, "dlv-a", at, OUTBOX_LEASE_MS)
    dead = env.ledger.settle_intent(claimed, "dlv-a", at + 1, ledger_status=LedgerStatus.FAILED,
                                    outbox_status=OutboxStatus.DEAD, error="delivery endpoint HTTP 404: gone")
    assert dead is not None and dead.outbox_status == OutboxStatus.DEAD
    return dead
