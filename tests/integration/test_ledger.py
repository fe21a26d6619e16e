"""DynamoLedger on moto AND on the in-memory twin, with the table built from template.yaml (DESIGN §4,
§10; spec §2.2, §3.2, §4.2, §5.4, §5.5, §10.4).

Every test runs twice, once per backend: this is the ledger half of the contract suite that keeps
the twin (which the simulation runs on) from drifting from DynamoDB as moto models it. The raw
service semantics the ledger relies on are pinned the same way in tests/contract."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from moto import mock_aws

from pixivflow import aws
from pixivflow.adapters.dynamo_ledger import DynamoLedger, cell_sk, slot_pk
from pixivflow.domain.cells import ALLOWED_FROM, TERMINAL_CELL_STATES, CellStatus
from pixivflow.domain.model import Intent, LedgerStatus, OutboxStatus, Slot
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


# -- slots ----------------------------------------------------------------------------------------


def test_duplicate_slot_creation_converges_on_the_stored_slot(env: Env) -> None:
    first = make_slot(slot_name="first label")
    stored, created = env.ledger.create_slot(first)
    assert created is True and stored.slot_name == "first label"

    # a retried trigger with a different label and a later clock converges on the first row
    second = make_slot(slot_name="second label", created_at=T0 + 5_000, targets=("cats",))
    stored2, created2 = env.ledger.create_slot(second)
    assert created2 is False
    assert stored2.slot_name == "first label"
    assert stored2.created_at == T0
    assert stored2.target_ids == ["cats", "landscape", "novels"]  # the snapshot frozen at creation
    assert env.ledger.get_slot(first.slot_id).slot_name == "first label"


@pytest.fixture
def atomic_moto(monkeypatch: pytest.MonkeyPatch) -> None:
    """DynamoDB applies a conditional write atomically per item; moto's in-process backend checks
    the condition and stores the item without a lock, so under threads two conditional puts can both
    "succeed" (measured: about 1 run in 9). Serialising the backend's write restores DynamoDB's
    guarantee; the 8 adapters, their clients and their error handling still run concurrently."""
    from moto.dynamodb.models import DynamoDBBackend

    lock = threading.Lock()
    original = DynamoDBBackend.put_item

    def put_item(self, *args, **kwargs):
        with lock:
            return original(self, *args, **kwargs)

    monkeypatch.setattr(DynamoDBBackend, "put_item", put_item)


def test_eight_concurrent_creates_of_one_slot_yield_exactly_one_creation(env: Env, atomic_moto: None) -> None:
    clients = [aws.client("dynamodb") for _ in range(8)]
    barrier = threading.Barrier(8)
    results: list[tuple[str, bool]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def create(i: int) -> None:
        try:
            ledger = DynamoLedger(clients[i], env.table)
            barrier.wait(timeout=10)
            stored, created = ledger.create_slot(make_slot(slot_name=f"writer-{i}", created_at=T0 + i))
            with lock:
                results.append((stored.slot_name, created))
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert errors == []
    assert len(results) == 8
    assert sum(1 for _, created in results if created) == 1
    winner = next(name for name, created in results if created)
    # every loser got the winner's row back, and the table holds exactly that row
    assert {name for name, _ in results} == {winner}
    assert env.ledger.get_slot("morning-tokyo@2026-12-01T0800").slot_name == winner


def test_ensure_cells_is_idempotent_and_only_creates_missing_cells(env: Env) -> None:
    slot, _ = env.ledger.create_slot(make_slot())
    assert env.ledger.ensure_cells(slot, TYPES, T0, existing=["landscape"]) == ["cats", "novels"]
    # the third cell is missing: only it is created
    assert env.ledger.ensure_cells(slot, TYPES, T0 + 1) == ["landscape"]
    # a full repeat creates nothing and does not reset a cell that moved on
    assert env.ledger.transition_cell(slot.slot_id, "cats", CellStatus.SELECTED, T0 + 2, work_id="1001")
    assert env.ledger.ensure_cells(slot, TYPES, T0 + 3) == []
    state = env.ledger.load(slot.slot_id)
    assert sorted(state.cells) == ["cats", "landscape", "novels"]
    assert state.cells["cats"].status == "selected" and state.cells["cats"].work_id == "1001"
    assert state.cells["novels"].work_type == "novel"
    assert state.cells["landscape"].created_at == T0 + 1


# -- cell lease ------------------------------------------------------------------------------------


def test_two_owners_contend_for_one_cell_lease(env: Env) -> None:
    slot = admitted(env)
    a = env.ledger.claim_cell(slot.slot_id, "cats", "exec-a", T0, LEASE_MS)
    assert a is not None and a.lease_owner == "exec-a" and a.lease_until == T0 + LEASE_MS
    assert a.attempt_count == 1 and a.started_at == T0
    assert env.ledger.claim_cell(slot.slot_id, "cats", "exec-b", T0 + 1_000, LEASE_MS) is None
    # one millisecond before expiry the lease is still live
    assert env.ledger.claim_cell(slot.slot_id, "cats", "exec-b", T0 + LEASE_MS - 1, LEASE_MS) is None
    assert env.ledger.get_cell(slot.slot_id, "cats").lease_owner == "exec-a"


def test_expired_cell_lease_goes_to_the_other_owner(env: Env) -> None:
    slot = admitted(env)
    assert env.ledger.claim_cell(slot.slot_id, "cats", "exec-a", T0, LEASE_MS) is not None
    b = env.ledger.claim_cell(slot.slot_id, "cats", "exec-b", T0 + LEASE_MS, LEASE_MS)
    assert b is not None
    assert b.lease_owner == "exec-b" and b.lease_until == T0 + 2 * LEASE_MS
    assert b.started_at == T0  # the first claim's startedAt is kept
    assert b.attempt_count == 2
    # the previous owner can no longer release it
    assert env.ledger.release_cell(slot.slot_id, "cats", "exec-a", T0 + LEASE_MS + 1) is False
    assert env.ledger.get_cell(slot.slot_id, "cats").lease_owner == "exec-b"


def test_same_owner_reclaims_its_cell_lease(env: Env) -> None:
    slot = admitted(env)
    assert env.ledger.claim_cell(slot.slot_id, "cats", "exec-a", T0, LEASE_MS) is not None
    renewed = env.ledger.claim_cell(slot.slot_id, "cats", "exec-a", T0 + 60_000, LEASE_MS)
    assert renewed is not None
    assert renewed.lease_until == T0 + 60_000 + LEASE_MS and renewed.heartbeat_at == T0 + 60_000


def test_claim_refused_on_terminal_or_missing_cell(env: Env) -> None:
    slot = admitted(env)
    assert env.ledger.transition_cell(slot.slot_id, "cats", CellStatus.NO_CANDIDATE, T0)
    assert env.ledger.claim_cell(slot.slot_id, "cats", "exec-a", T0, LEASE_MS) is None
    assert env.ledger.claim_cell(slot.slot_id, "nope", "exec-a", T0, LEASE_MS) is None
    assert env.raw(slot.slot_id, cell_sk("nope")) is None  # the conditional update did not upsert a row


def test_heartbeat_only_by_the_owner(env: Env) -> None:
    """Spec §4.2: heartbeat renews leaseUntil and heartbeatAt only where the owner matches.

    heartbeat_cell's condition names #leaseOwner without registering it in
    ExpressionAttributeNames, so every heartbeat (owner or not) is rejected by DynamoDB."""
    slot = admitted(env)
    env.ledger.claim_cell(slot.slot_id, "cats", "exec-a", T0, LEASE_MS)
    assert env.ledger.heartbeat_cell(slot.slot_id, "cats", "exec-b", T0 + 30_000, LEASE_MS) is False
    cell = env.ledger.get_cell(slot.slot_id, "cats")
    assert cell.heartbeat_at == T0 and cell.lease_until == T0 + LEASE_MS
    assert env.ledger.heartbeat_cell(slot.slot_id, "cats", "exec-a", T0 + 30_000, LEASE_MS) is True
    cell = env.ledger.get_cell(slot.slot_id, "cats")
    assert cell.heartbeat_at == T0 + 30_000 and cell.lease_until == T0 + 30_000 + LEASE_MS


def test_release_clears_the_lease_and_keeps_heartbeat(env: Env) -> None:
    slot = admitted(env)
    env.ledger.claim_cell(slot.slot_id, "cats", "exec-a", T0, LEASE_MS)
    env.ledger.claim_cell(slot.slot_id, "cats", "exec-a", T0 + 30_000, LEASE_MS)  # renewal stamps heartbeatAt
    assert env.ledger.release_cell(slot.slot_id, "cats", "exec-b", T0 + 40_000) is False
    assert env.ledger.release_cell(slot.slot_id, "cats", "exec-a", T0 + 40_000) is True
    cell = env.ledger.get_cell(slot.slot_id, "cats")
    assert cell.lease_owner is None and cell.lease_until is None
    assert cell.heartbeat_at == T0 + 30_000
    assert cell.lease_live(T0 + 40_000) is False
    # released: anyone may claim at once
    assert env.ledger.claim_cell(slot.slot_id, "cats", "exec-b", T0 + 40_001, LEASE_MS) is not None


# -- work binding ----------------------------------------------------------------------------------


def test_bind_first_work_wins_and_rebinding_is_idempotent(env: Env) -> None:
    slot = admitted(env)
    assert env.ledger.bind_work(slot.slot_id, "cats", "1001", "illustration", T0) == (True, "1001")
    cell = env.ledger.get_cell(slot.slot_id, "cats")
    assert cell.status == "selected" and cell.work_id == "1001"
    assert env.ledger.bind_work(slot.slot_id, "cats", "1001", "illustration", T0 + 1) == (True, "1001")
    assert env.ledger.bind_work(slot.slot_id, "cats", "2002", "illustration", T0 + 2) == (False, "1001")
    assert env.ledger.get_cell(slot.slot_id, "cats").work_id == "1001"


def test_bind_keeps_the_cell_work_type(env: Env) -> None:
    slot = admitted(env)
    assert env.ledger.bind_work(slot.slot_id, "novels", "77", "illustration", T0) == (True, "77")
    assert env.ledger.get_cell(slot.slot_id, "novels").work_type == "novel"


def test_release_work_only_while_selected_with_exactly_that_work(env: Env) -> None:
    slot = admitted(env)
    sid = slot.slot_id
    assert env.ledger.release_work(sid, "cats", "1001", T0) is False  # nothing bound
    env.ledger.bind_work(sid, "cats", "1001", "illustration", T0)
    assert env.ledger.release_work(sid, "cats", "2002", T0 + 1) is False  # a different work
    assert env.ledger.get_cell(sid, "cats").work_id == "1001"
    assert env.ledger.release_work(sid, "cats", "1001", T0 + 2) is True
    cell = env.ledger.get_cell(sid, "cats")
    assert cell.status == "pending" and cell.work_id is None
    # once the cell has moved on (delivery_pending) the binding is never released
    env.ledger.bind_work(sid, "cats", "3003", "illustration", T0 + 3)
    assert env.ledger.transition_cell(sid, "cats", CellStatus.DELIVERY_PENDING, T0 + 4)
    assert env.ledger.release_work(sid, "cats", "3003", T0 + 5) is False
    cell = env.ledger.get_cell(sid, "cats")
    assert cell.status == "delivery_pending" and cell.work_id == "3003"


# -- transitions -----------------------------------------------------------------------------------


@pytest.mark.parametrize("terminal", sorted(TERMINAL_CELL_STATES))
def test_terminal_cells_refuse_every_move(env: Env, terminal: str) -> None:
    slot = admitted(env, make_slot(targets=("cats",)))
    assert env.ledger.transition_cell(slot.slot_id, "cats", terminal, T0, work_id="1001", reason_code="x")
    for to in CellStatus:
        assert env.ledger.transition_cell(slot.slot_id, "cats", to, T0 + 1) is False, f"{terminal} -> {to}"
    cell = env.ledger.get_cell(slot.slot_id, "cats")
    assert cell.status == terminal and cell.completed_at == T0 and cell.terminal_reason_code == "x"


def test_delivery_pending_cannot_go_back_to_selected_or_pending(env: Env) -> None:
    slot = admitted(env)
    sid = slot.slot_id
    assert env.ledger.transition_cell(sid, "cats", CellStatus.DELIVERY_PENDING, T0, work_id="1001")
    assert env.ledger.transition_cell(sid, "cats", CellStatus.SELECTED, T0 + 1) is False
    assert env.ledger.transition_cell(sid, "cats", CellStatus.PENDING, T0 + 1) is False
    assert env.ledger.transition_cell(sid, "cats", CellStatus.ARTIFACT_READY, T0 + 1) is False
    assert env.ledger.get_cell(sid, "cats").status == "delivery_pending"
    # the legal move still works and stamps completion
    assert env.ledger.transition_cell(sid, "cats", CellStatus.SUBMITTED, T0 + 2)
    cell = env.ledger.get_cell(sid, "cats")
    assert cell.status == "submitted" and cell.completed_at == T0 + 2 and cell.work_id == "1001"


def test_every_legal_move_from_pending_is_accepted(env: Env) -> None:
    targets = sorted(s for s in CellStatus if CellStatus.PENDING in ALLOWED_FROM[s])
    slot = admitted(env, make_slot(targets=tuple(f"t{i}" for i in range(len(targets)))))
    for i, to in enumerate(targets):
        assert env.ledger.transition_cell(slot.slot_id, f"t{i}", to, T0), to
    state = env.ledger.load(slot.slot_id)
    assert [state.cells[f"t{i}"].status for i in range(len(targets))] == targets


def test_move_requiring_the_lease_owner_is_refused_for_another_owner(env: Env) -> None:
    slot = admitted(env)
    sid = slot.slot_id
    env.ledger.claim_cell(sid, "cats", "exec-a", T0, LEASE_MS)
    assert env.ledger.transition_cell(sid, "cats", CellStatus.FAILED, T0 + 1, owner="exec-b") is False
    cell = env.ledger.get_cell(sid, "cats")
    assert cell.status == "pending" and cell.lease_owner == "exec-a"
    assert env.ledger.transition_cell(sid, "cats", CellStatus.FAILED, T0 + 2, owner="exec-a",
                                      last_error="boom", reason_code="internal_error", reason_message="m")
    cell = env.ledger.get_cell(sid, "cats")
    assert cell.status == "failed" and cell.lease_owner is None and cell.last_error == "boom"
    assert cell.terminal_reason_code == "internal_error"


def test_require_no_live_lease_refuses_while_someone_holds_the_cell(env: Env) -> None:
    slot = admitted(env)
    sid = slot.slot_id
    env.ledger.transition_cell(sid, "cats", CellStatus.DELIVERY_PENDING, T0, work_id="1001")
    env.ledger.claim_cell(sid, "cats", "exec-a", T0, LEASE_MS)
    assert env.ledger.transition_cell(sid, "cats", CellStatus.SUBMITTED, T0 + 1, require_no_live_lease=True) is False
    assert env.ledger.transition_cell(sid, "cats", CellStatus.SUBMITTED, T0 + LEASE_MS, require_no_live_lease=True)
    assert env.ledger.get_cell(sid, "cats").status == "submitted"


# -- intents and the outbox -------------------------------------------------------------------------


def test_put_intent_is_insert_if_absent_and_returns_the_existing_row(env: Env) -> None:
    slot = admitted(env)
    first, created = env.ledger.put_intent(make_intent(slot.slot_id))
    assert created is True
    again = make_intent(slot.slot_id, next_attempt_at=T0 + 99_000)
    again.payload = {"work": {"id": "1001", "title": "changed"}}
    stored, created2 = env.ledger.put_intent(again)
    assert created2 is False
    assert stored.next_attempt_at == T0 and stored.payload == {"work": {"id": "1001", "title": "cat"}}
    assert len(env.ledger.load(slot.slot_id).intents) == 1


def test_claim_intent_once_and_reclaim_only_after_the_lease_expires(env: Env) -> None:
    slot = admitted(env)
    intent, _ = env.ledger.put_intent(make_intent(slot.slot_id))
    a = env.ledger.claim_intent(intent, "dlv-a", T0, OUTBOX_LEASE_MS)
    assert a is not None and a.outbox_status == "processing" and a.lease_owner == "dlv-a"
    assert a.lease_until == T0 + OUTBOX_LEASE_MS
    assert env.ledger.claim_intent(intent, "dlv-b", T0 + 1, OUTBOX_LEASE_MS) is None
    assert env.ledger.claim_intent(intent, "dlv-b", T0 + OUTBOX_LEASE_MS - 1, OUTBOX_LEASE_MS) is None
    b = env.ledger.claim_intent(intent, "dlv-b", T0 + OUTBOX_LEASE_MS, OUTBOX_LEASE_MS)
    assert b is not None and b.lease_owner == "dlv-b"
    # the stale owner can no longer settle
    assert env.ledger.settle_intent(intent, "dlv-a", T0 + OUTBOX_LEASE_MS + 1, ledger_status=LedgerStatus.DELIVERED,
                                    outbox_status=OutboxStatus.DONE) is None


def test_the_sending_marker_is_set_once_by_the_lease_holder_and_kept_until_an_attempt_saves_its_posts(env: Env) -> None:
    """Issue 23: the Telegram review route marks its row before the first Bot API call. Only the
    lease holder may, only once; a retry that saved what it posted drops it; a redrive clears it."""
    slot = admitted(env)
    intent, _ = env.ledger.put_intent(make_intent(slot.slot_id))
    a = env.ledger.claim_intent(intent, "dlv-a", T0, OUTBOX_LEASE_MS)
    assert env.ledger.mark_intent_sending(a, "dlv-b", T0 + 1) is None  # not the lease holder
    marked = env.ledger.mark_intent_sending(a, "dlv-a", T0 + 1)
    assert marked is not None and marked.sending_at == T0 + 1
    assert env.ledger.mark_intent_sending(a, "dlv-a", T0 + 2) is None  # once: a second worker never posts too
    # a claim taken over after the lease expired finds the marker
    b = env.ledger.claim_intent(intent, "dlv-b", T0 + OUTBOX_LEASE_MS, OUTBOX_LEASE_MS)
    assert b is not None and b.sending_at == T0 + 1
    assert env.ledger.mark_intent_sending(b, "dlv-b", T0 + OUTBOX_LEASE_MS) is None
    # an attempt that saved its posts drops the marker; the progress rides on the row
    saved = env.ledger.settle_intent(b, "dlv-b", T0 + OUTBOX_LEASE_MS + 1, ledger_status=None,
                                     outbox_status=OutboxStatus.RETRY_WAIT, next_attempt_at=T0 + 10**6,
                                     send_progress={"blocks": [{"message_ids": [7]}]}, clear_sending=True)
    assert saved.sending_at is None and saved.send_progress == {"blocks": [{"message_ids": [7]}]}
    # a retry that did not post keeps whatever marker there is (none here) and the saved progress
    c = env.ledger.claim_intent(saved, "dlv-c", T0 + 10**6, OUTBOX_LEASE_MS)
    assert env.ledger.mark_intent_sending(c, "dlv-c", T0 + 10**6) is not None
    dead = env.ledger.settle_intent(c, "dlv-c", T0 + 10**6 + 1, ledger_status=LedgerStatus.FAILED,
                                    outbox_status=OutboxStatus.DEAD, remote_status="uncertain")
    assert dead.sending_at == T0 + 10**6 and dead.remote_status == "uncertain"
    again = env.ledger.redrive_intent(dead, T0 + 10**6 + 2)
    assert again.sending_at is None and again.send_progress is None and again.redrive_count == 1


def test_claim_intent_refuses_a_row_not_yet_due(env: Env) -> None:
    slot = admitted(env)
    intent, _ = env.ledger.put_intent(make_intent(slot.slot_id, next_attempt_at=T0 + 60_000))
    assert env.ledger.claim_intent(intent, "dlv-a", T0, OUTBOX_LEASE_MS) is None
    assert env.ledger.get_intent(slot.slot_id, "cats", "review", "illustration", "1001").outbox_status == "pending"
    assert env.ledger.claim_intent(intent, "dlv-a", T0 + 60_000, OUTBOX_LEASE_MS) is not None


def test_claim_intent_ignoring_the_due_time_claims_a_future_row(env: Env) -> None:
    """``ignore_due=True`` builds ``((#outboxStatus IN (...))) OR (...)``: DynamoDB rejects the
    redundant parentheses with a ValidationException, so the claim raises LedgerUnavailable."""
    slot = admitted(env)
    intent, _ = env.ledger.put_intent(make_intent(slot.slot_id, next_attempt_at=T0 + 60_000))
    claimed = env.ledger.claim_intent(intent, "dlv-a", T0, OUTBOX_LEASE_MS, ignore_due=True)
    assert claimed is not None and claimed.outbox_status == "processing" and claimed.lease_owner == "dlv-a"


def test_settle_intent_requires_the_lease_owner(env: Env) -> None:
    slot = admitted(env)
    intent, _ = env.ledger.put_intent(make_intent(slot.slot_id))
    env.ledger.claim_intent(intent, "dlv-a", T0, OUTBOX_LEASE_MS)
    assert env.ledger.settle_intent(intent, "dlv-b", T0 + 1, ledger_status=LedgerStatus.DELIVERED,
                                    outbox_status=OutboxStatus.DONE, remote_id="r-1") is None
    row = env.ledger.get_intent(slot.slot_id, "cats", "review", "illustration", "1001")
    assert row.outbox_status == "processing" and row.status == "pending" and row.attempts == 0
    done = env.ledger.settle_intent(intent, "dlv-a", T0 + 2, ledger_status=LedgerStatus.DELIVERED,
                                    outbox_status=OutboxStatus.DONE, remote_id="r-1", remote_status="pending_review")
    assert done is not None
    assert (done.status, done.outbox_status, done.attempts, done.remote_id, done.delivered_at) == (
        "delivered", "done", 1, "r-1", T0 + 2)
    assert done.lease_owner is None
    # done rows leave the due index and can never be claimed again
    assert env.ledger.due_intents(T0 + 10 ** 9) == []
    assert env.ledger.claim_intent(intent, "dlv-c", T0 + 10 ** 9, OUTBOX_LEASE_MS) is None


def test_settle_retry_wait_moves_the_due_time(env: Env) -> None:
    slot = admitted(env)
    intent, _ = env.ledger.put_intent(make_intent(slot.slot_id))
    assert env.ledger.index_due(intent)  # as its slot closes (rollup.rows_outlive_slot)
    env.ledger.claim_intent(intent, "dlv-a", T0, OUTBOX_LEASE_MS)
    row = env.ledger.settle_intent(intent, "dlv-a", T0 + 1, ledger_status=None, outbox_status=OutboxStatus.RETRY_WAIT,
                                   error="503", next_attempt_at=T0 + 60_000)
    assert row.outbox_status == "retry_wait" and row.next_attempt_at == T0 + 60_000 and row.last_error == "503"
    assert env.ledger.due_intents(T0 + 59_999) == []
    assert len(env.ledger.due_intents(T0 + 60_000)) == 1
    assert env.ledger.claim_intent(intent, "dlv-b", T0 + 59_999, OUTBOX_LEASE_MS) is None
    assert env.ledger.claim_intent(intent, "dlv-b", T0 + 60_000, OUTBOX_LEASE_MS) is not None


def test_a_new_row_is_not_indexed_its_open_slot_covers_it(env: Env) -> None:
    """Two index writes less per delivery (issue 14): the sweep finds an open slot's rows through
    the slot; a row enters DueOutbox only when its slot closes with the row still actionable."""
    slot = admitted(env)
    intent, created = env.ledger.put_intent(make_intent(slot.slot_id))
    assert created and "duePk" not in env.raw(slot.slot_id, "DLV#cats#review#illustration#1001")
    assert env.ledger.due_intents(T0 + 10 ** 9) == []
    assert env.ledger.index_due(intent)
    assert env.ledger.due_intents(T0 + 10 ** 9) == [(slot_pk(slot.slot_id), "DLV#cats#review#illustration#1001")]


def test_indexing_a_row_that_moved_since_it_was_read_is_refused(env: Env) -> None:
    slot = admitted(env)
    intent, _ = env.ledger.put_intent(make_intent(slot.slot_id))
    assert env.ledger.claim_intent(intent, "dlv-a", T0 + 5, OUTBOX_LEASE_MS) is not None
    assert not env.ledger.index_due(intent)  # the stale read: pending, but it is processing now
    assert env.ledger.due_intents(T0 + 10 ** 9) == []
    fresh = env.ledger.get_intent(slot.slot_id, "cats", "review", "illustration", "1001")
    assert env.ledger.index_due(fresh)
    done = env.ledger.settle_intent(fresh, "dlv-a", T0 + 6, ledger_status=LedgerStatus.DELIVERED,
                                    outbox_status=OutboxStatus.DONE)
    assert done is not None and env.ledger.due_intents(T0 + 10 ** 9) == []  # a settled row leaves the index


def test_due_intents_only_returns_rows_due_at_or_before_the_instant(env: Env) -> None:
    slot = admitted(env)
    sid = slot.slot_id
    for target, work, due in (("cats", "1", T0), ("landscape", "2", T0 + 60_000), ("cats", "3", T0 + 3_600_000)):
        row, _ = env.ledger.put_intent(make_intent(sid, target, work, next_attempt_at=due))
        assert env.ledger.index_due(row)
    sks = lambda at: sorted(sk for _, sk in env.ledger.due_intents(at))  # noqa: E731
    assert sks(T0 - 1) == []
    assert sks(T0) == ["DLV#cats#review#illustration#1"]
    assert sks(T0 + 59_999) == ["DLV#cats#review#illustration#1"]
    assert sks(T0 + 60_000) == ["DLV#cats#review#illustration#1", "DLV#landscape#review#illustration#2"]
    assert len(sks(T0 + 3_600_000)) == 3
    assert all(pk == slot_pk(sid) for pk, _ in env.ledger.due_intents(T0 + 3_600_000))


# -- multi-item steps and indexes ------------------------------------------------------------------


def test_terminalise_slot_applies_every_change_when_no_lease_is_live(env: Env) -> None:
    slot = admitted(env)
    sid = slot.slot_id
    env.ledger.transition_cell(sid, "novels", CellStatus.DELIVERY_PENDING, T0, work_id="9")
    state = env.ledger.load(sid)
    ok = env.ledger.terminalise_slot(state, fail_cells=["cats", "landscape"], guard_cells=["novels"], slot_status="failed",
                                     reason_code="queued_too_long", reason_message="queued too long", now_ms=T0 + 1)
    assert ok is True
    after = env.ledger.load(sid)
    assert after.slot.status == "failed"
    assert {t: c.status for t, c in after.cells.items()} == {"cats": "failed", "landscape": "failed", "novels": "delivery_pending"}
    assert after.cells["cats"].terminal_reason_code == "queued_too_long"
    # It stays indexed until its outcome record is logged; then it leaves the index.
    assert [s for s, _ in env.ledger.active_slots()] == [sid]
    assert env.ledger.leave_active_index(sid) is True
    assert env.ledger.active_slots() == []


def test_terminalise_slot_is_all_or_nothing_when_a_guarded_cell_has_a_live_lease(env: Env) -> None:
    slot = admitted(env)
    sid = slot.slot_id
    env.ledger.transition_cell(sid, "novels", CellStatus.DELIVERY_PENDING, T0, work_id="9")
    env.ledger.claim_cell(sid, "novels", "exec-live", T0, LEASE_MS)
    state = env.ledger.load(sid)
    before = {t: (c.status, c.lease_owner) for t, c in state.cells.items()}

    ok = env.ledger.terminalise_slot(state, fail_cells=["cats", "landscape"], guard_cells=["novels"], slot_status="failed",
                                     reason_code="stalled_no_heartbeat", reason_message="stalled", now_ms=T0 + 1)

    assert ok is False  # a cancelled transaction is a refusal, not an infrastructure error
    after = env.ledger.load(sid)
    assert after.slot.status == "pending" and after.slot.completed_at is None
    assert {t: (c.status, c.lease_owner) for t, c in after.cells.items()} == before
    assert all(c.terminal_reason_code is None for c in after.cells.values())
    assert [s for s, _ in env.ledger.active_slots()] == [sid]


def test_terminalise_slot_refuses_to_fail_a_cell_whose_lease_is_live(env: Env) -> None:
    # DESIGN §4: the stall may fail only cells no executor holds. Here the live lease is on a cell
    # being FAILED (not a guard_cell), so only the fail update's own lease condition can refuse it.
    slot = admitted(env)
    sid = slot.slot_id
    assert env.ledger.claim_cell(sid, "cats", "exec-live", T0, LEASE_MS)
    state = env.ledger.load(sid)
    before = {t: (c.status, c.lease_owner) for t, c in state.cells.items()}

    ok = env.ledger.terminalise_slot(state, fail_cells=["cats", "landscape"], guard_cells=[], slot_status="failed",
                                     reason_code="stalled_no_heartbeat", reason_message="stalled", now_ms=T0 + 1)

    assert ok is False
    after = env.ledger.load(sid)
    assert after.slot.status == "pending" and after.slot.completed_at is None
    assert {t: (c.status, c.lease_owner) for t, c in after.cells.items()} == before
    assert after.cells["cats"].lease_owner == "exec-live"
    assert all(c.terminal_reason_code is None for c in after.cells.values())
    # Once that lease has lapsed, the same stall goes through.
    later = env.ledger.load(sid)
    assert env.ledger.terminalise_slot(later, fail_cells=["cats", "landscape"], guard_cells=[], slot_status="failed",
                                       reason_code="stalled_no_heartbeat", reason_message="stalled",
                                       now_ms=T0 + LEASE_MS + 1) is True
    assert env.ledger.load(sid).cells["cats"].status == "failed"


def test_active_page_walks_one_shard_oldest_first_from_a_position(env: Env) -> None:
    """The sweep's incremental walk (issue 25): a page past a position, and whether more follow."""
    from pixivflow.adapters.dynamo_ledger import shard_of

    from collections import Counter

    made = [admitted(env, make_slot(f"walk-{n:03d}@2026-12-01T0800", created_at=T0 + n)) for n in range(40)]
    [(shard, _)] = Counter(shard_of(s.slot_id) for s in made).most_common(1)
    mine = [s.slot_id for s in made if shard_of(s.slot_id) == shard]
    assert len(mine) >= 3 and env.ledger.active_shards() == 16
    rows, more = env.ledger.active_page(shard, "", 2)
    assert [r.slot_id for r in rows] == mine[:2] and more is True
    assert [r.created_at for r in rows] == [T0 + int(s[5:8]) for s in mine[:2]]
    rest, more = env.ledger.active_page(shard, rows[-1].position, 100)
    assert [r.slot_id for r in rest] == mine[2:] and more is False
    # a slot that leaves the index leaves the walk; the positions of the others still hold
    assert env.ledger.finish_slot(mine[2], "success", T0 + 100) is True
    rest, _ = env.ledger.active_page(shard, rows[-1].position, 100)
    assert [r.slot_id for r in rest] == mine[3:]


def test_active_slots_drops_a_slot_once_finished(env: Env) -> None:
    a = admitted(env, make_slot("morning-tokyo@2026-12-01T0800", created_at=T0))
    b = admitted(env, make_slot("evening-berlin@2026-11-30T1930", created_at=T0 - 1_000))
    assert env.ledger.active_slots() == [(b.slot_id, T0 - 1_000), (a.slot_id, T0)]  # oldest first
    assert env.ledger.mark_slot_running(a.slot_id, T0 + 1) is True
    assert [s for s, _ in env.ledger.active_slots()] == [b.slot_id, a.slot_id]  # running stays active
    assert env.ledger.leave_active_index(b.slot_id) is False  # an active slot never leaves the index
    assert env.ledger.finish_slot(a.slot_id, "success", T0 + 2) is True
    assert env.ledger.active_slots() == [(b.slot_id, T0 - 1_000)]
    assert env.ledger.get_slot(a.slot_id).status == "success"
    # a terminal slot is never finished again
    assert env.ledger.finish_slot(a.slot_id, "failed", T0 + 3) is False
    assert env.ledger.get_slot(a.slot_id).status == "success"


def test_mark_slot_running_only_from_pending_and_keeps_started_at(env: Env) -> None:
    slot = admitted(env)
    assert env.ledger.mark_slot_running(slot.slot_id, T0 + 1) is True
    assert env.ledger.mark_slot_running(slot.slot_id, T0 + 2) is False
    assert env.ledger.get_slot(slot.slot_id).started_at == T0 + 1


def test_put_event_once_creates_each_lifecycle_event_once(env: Env) -> None:
    slot = admitted(env)
    assert env.ledger.put_event_once(slot.slot_id, "execution.summary", {"n": 1}, T0) is True
    assert env.ledger.put_event_once(slot.slot_id, "execution.summary", {"n": 2}, T0 + 1) is False
    assert env.ledger.get_event(slot.slot_id, "execution.summary") == {"kind": "execution.summary", "ts": T0, "detail": {"n": 1}}
    assert env.ledger.load(slot.slot_id).events == {"execution.summary": {"ts": T0}}


# -- operator tooling (issue 12): slot listing, dead rows, the conditional redrive -----------------


def test_find_slots_filters_by_schedule_status_and_since_newest_first(env: Env) -> None:
    a = admitted(env, make_slot("morning-tokyo@2026-12-01T0800", created_at=T0))
    b = admitted(env, make_slot("morning-tokyo@2026-12-02T0800", created_at=T0 + 86_400_000))
    c = admitted(env, make_slot("evening-berlin@2026-11-30T1930", created_at=T0 - 1_000))
    env.ledger.put_intent(make_intent(a.slot_id))  # other items of the partition are not slots
    env.ledger.claim_request_key("k-1", {"slotRef": a.slot_id})
    assert env.ledger.finish_slot(a.slot_id, "failed", T0 + 5, last_error="boom") is True
    assert [s.slot_id for s in env.ledger.find_slots()] == [b.slot_id, a.slot_id, c.slot_id]
    assert [s.slot_id for s in env.ledger.find_slots(schedule_id="morning-tokyo")] == [b.slot_id, a.slot_id]
    failed = env.ledger.find_slots(status="failed")
    assert [(s.slot_id, s.status, s.last_error) for s in failed] == [(a.slot_id, "failed", "boom")]
    assert [s.slot_id for s in env.ledger.find_slots(since_ms=T0)] == [b.slot_id, a.slot_id]
    assert env.ledger.find_slots(schedule_id="morning-tokyo", status="pending", since_ms=T0 + 1) == [
        env.ledger.get_slot(b.slot_id)]
    assert env.ledger.find_slots(schedule_id="nope") == []


def _dead(env: Env, intent: Intent, at: int) -> Intent:
    stored, _ = env.ledger.put_intent(intent)
    claimed = env.ledger.claim_intent(stored, "dlv-a", at, OUTBOX_LEASE_MS)
    dead = env.ledger.settle_intent(claimed, "dlv-a", at + 1, ledger_status=LedgerStatus.FAILED,
                                    outbox_status=OutboxStatus.DEAD, error="delivery endpoint HTTP 404: gone")
    assert dead is not None and dead.outbox_status == OutboxStatus.DEAD
    return dead


def test_dead_intents_lists_only_dead_rows_newest_first(env: Env) -> None:
    slot = admitted(env)
    old = _dead(env, make_intent(slot.slot_id, "cats", "1001"), T0)
    new = _dead(env, make_intent(slot.slot_id, "landscape", "2002"), T0 + 10)
    env.ledger.put_intent(make_intent(slot.slot_id, "novels", "3003"))  # pending: not dead
    found = env.ledger.dead_intents()
    assert [i.idempotency_key for i in found] == [new.idempotency_key, old.idempotency_key]
    assert (found[0].status, found[0].last_error, found[0].attempts) == ("failed", "delivery endpoint HTTP 404: gone", 1)


def test_redrive_intent_rearms_a_dead_row_once_and_refuses_any_other(env: Env) -> None:
    slot = admitted(env)
    dead = _dead(env, make_intent(slot.slot_id), T0)
    assert env.ledger.due_intents(T0 + 10**9) == []  # dead rows are out of the due index
    again = env.ledger.redrive_intent(dead, T0 + 500)
    assert again is not None
    assert (again.outbox_status, again.status, again.attempts, again.next_attempt_at, again.last_error) == (
        OutboxStatus.RETRY_WAIT, LedgerStatus.PENDING, 0, T0 + 500, "delivery endpoint HTTP 404: gone")
    raw = env.raw(slot.slot_id, "DLV#cats#review#illustration#1001")
    assert (raw["redrivenAt"], raw["redriveCount"]) == ({"N": str(T0 + 500)}, {"N": "1"})
    assert "completedAt" not in raw
    assert env.ledger.due_intents(T0 + 500) == [(slot_pk(slot.slot_id), "DLV#cats#review#illustration#1001")]
    assert env.ledger.redrive_intent(dead, T0 + 600) is None  # no longer dead: refused, unchanged
    assert env.ledger.get_intent(slot.slot_id, "cats", "review", "illustration", "1001").updated_at == T0 + 500
    claimed = env.ledger.claim_intent(again, "dlv-b", T0 + 500, OUTBOX_LEASE_MS)  # the worker takes it as usual
    assert claimed is not None and claimed.outbox_status == OutboxStatus.PROCESSING
    pending = env.ledger.put_intent(make_intent(slot.slot_id, "landscape", "2002"))[0]
    assert env.ledger.redrive_intent(pending, T0 + 700) is None  # a pending row is never re-armed
    assert env.ledger.redrive_intent(make_intent(slot.slot_id, "novels", "9"), T0) is None  # nor a missing one
    assert env.raw(slot.slot_id, "DLV#novels#review#illustration#9") is None


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


def test_an_unwritten_cell_is_a_pending_cell_dispatched_at_admission(env: Env) -> None:
    slot = slot_only(env)
    state = env.ledger.load(slot.slot_id)
    assert state.cells == {} and state.missing_targets() == ["cats", "landscape", "novels"]
    cats = state.cell("cats")
    assert (cats.status, cats.virtual, cats.lease_owner, cats.attempt_count) == ("pending", True, None, 0)
    assert (cats.created_at, cats.dispatched_at, cats.started_at) == (T0, T0, None)
    assert [c.target_id for c in state.snapshot_cells()] == ["cats", "landscape", "novels"]
    assert state.cell("nope") is None  # outside the frozen snapshot


def test_the_first_claim_writes_the_cell_in_one_conditional_write(env: Env) -> None:
    slot = slot_only(env)
    claimed = env.ledger.claim_cell(slot.slot_id, "cats", "exec-a", T0 + 5, LEASE_MS, unwritten=unwritten(env, slot, "cats"))
    assert claimed is not None and (claimed.status, claimed.lease_owner, claimed.attempt_count) == ("pending", "exec-a", 1)
    item = env.raw(slot.slot_id, cell_sk("cats"))
    assert {k: list(v.values())[0] for k, v in item.items() if k in ("entity", "slotId", "targetId", "status", "workType",
                                                                   "createdAt", "dispatchedAt", "startedAt")} == {
        "entity": "cell", "slotId": slot.slot_id, "targetId": "cats", "status": "pending", "workType": "illustration",
        "createdAt": str(T0), "dispatchedAt": str(T0), "startedAt": str(T0 + 5)}
    # a second executor with the same stand-in is refused by the live lease, not by a second create
    assert env.ledger.claim_cell(slot.slot_id, "cats", "exec-b", T0 + 6, LEASE_MS, unwritten=unwritten_again(slot, "cats")) is None
    assert env.ledger.get_cell(slot.slot_id, "cats").lease_owner == "exec-a"
    # without a stand-in a missing cell is never created
    assert env.ledger.claim_cell(slot.slot_id, "landscape", "exec-a", T0, LEASE_MS) is None
    assert env.raw(slot.slot_id, cell_sk("landscape")) is None


def unwritten_again(slot: Slot, target_id: str):
    from pixivflow.domain.model import unwritten_cell

    return unwritten_cell(slot, target_id)


def test_a_claim_never_resurrects_a_terminal_cell_written_meanwhile(env: Env) -> None:
    slot = slot_only(env, targets=("cats",))
    stand_in = unwritten(env, slot, "cats")
    state = env.ledger.load(slot.slot_id)
    assert env.ledger.terminalise_slot(state, fail_cells=["cats"], guard_cells=[], slot_status="failed",
                                       reason_code="queued_too_long", reason_message="queued", now_ms=T0 + 1)
    assert env.ledger.claim_cell(slot.slot_id, "cats", "exec-late", T0 + 2, LEASE_MS, unwritten=stand_in) is None
    cell = env.ledger.get_cell(slot.slot_id, "cats")
    assert (cell.status, cell.terminal_reason_code, cell.lease_owner) == ("failed", "queued_too_long", None)


def test_terminalise_writes_never_claimed_cells_failed_and_refuses_if_one_was_claimed(env: Env) -> None:
    slot = slot_only(env, targets=("cats", "landscape"))
    stale = env.ledger.load(slot.slot_id)
    # landscape is claimed (its item written) after the sweep read the slot: the whole step refuses
    assert env.ledger.claim_cell(slot.slot_id, "landscape", "exec-a", T0, LEASE_MS, unwritten=unwritten(env, slot, "landscape"))
    assert not env.ledger.terminalise_slot(stale, fail_cells=["cats", "landscape"], guard_cells=[], slot_status="failed",
                                           reason_code="queued_too_long", reason_message="queued", now_ms=T0 + 1)
    assert env.raw(slot.slot_id, cell_sk("cats")) is None and env.ledger.get_slot(slot.slot_id).status == "pending"
    # read again (lease now dead): cats is born failed, landscape's item is failed in place
    fresh = env.ledger.load(slot.slot_id)
    assert env.ledger.terminalise_slot(fresh, fail_cells=["cats", "landscape"], guard_cells=[], slot_status="failed",
                                       reason_code="queued_too_long", reason_message="queued", now_ms=T0 + LEASE_MS + 1)
    after = env.ledger.load(slot.slot_id)
    assert {t: (c.status, c.terminal_reason_code, c.virtual) for t, c in after.cells.items()} == {
        "cats": ("failed", "queued_too_long", False), "landscape": ("failed", "queued_too_long", False)}
    assert after.slot.status == "failed"


def test_cancel_writes_never_claimed_cells_failed(env: Env) -> None:
    slot = slot_only(env, targets=("cats", "landscape"))
    state = env.ledger.load(slot.slot_id)
    assert env.ledger.cancel_cells(state, cells=["cats", "landscape"], intents=[], slot_status="failed",
                                   reason_code="cancelled_by_consumer", reason_message="cancelled", now_ms=T0 + 1)
    after = env.ledger.load(slot.slot_id)
    assert {t: (c.status, c.terminal_reason_code) for t, c in after.cells.items()} == {
        "cats": ("failed", "cancelled_by_consumer"), "landscape": ("failed", "cancelled_by_consumer")}
    # a second cancel from the same stale read finds the cells written and refuses
    assert not env.ledger.cancel_cells(state, cells=["cats"], intents=[], slot_status=None,
                                       reason_code="cancelled_by_consumer", reason_message="cancelled", now_ms=T0 + 2)


def _cancel(env: Env, state, now_ms: int) -> bool:
    """The consumer cancel of the whole job (services/jobs.py), from the state read in ``state``."""
    return env.ledger.cancel_cells(state, cells=["cats"], intents=state.intents_for("cats"), slot_status="failed",
                                   reason_code="cancelled_by_consumer", reason_message="cancelled", now_ms=now_ms)


def _refused_untouched(env: Env, slot: Slot, owner: str, lease_until: int) -> None:
    """The whole cancel refused: the row stays the worker's claim, the cell and the slot open."""
    after = env.ledger.load(slot.slot_id)
    (row,) = after.intents
    assert (row.outbox_status, row.lease_owner, row.lease_until) == ("processing", owner, lease_until)
    assert after.cells["cats"].status == "pending" and after.slot.status == "pending"


def test_cancel_refuses_a_row_a_worker_claimed_after_the_read(env: Env) -> None:
    """Spec §12.7: the cancel read the row pending; a worker claimed it before the transaction (it
    may be posting now, before its sending marker). The stale cancel must not mark it cancelled."""
    slot = admitted(env, make_slot(targets=("cats",)))
    env.ledger.put_intent(make_intent(slot.slot_id))
    state = env.ledger.load(slot.slot_id)
    assert state.intents_for("cats")[0].outbox_status == "pending"
    assert env.ledger.claim_intent(state.intents[0], "dlv-a", T0 + 10, OUTBOX_LEASE_MS) is not None
    assert not _cancel(env, state, T0 + 11)
    _refused_untouched(env, slot, "dlv-a", T0 + 10 + OUTBOX_LEASE_MS)
    # re-read, the row is a live claim: a cancel that leaves it out goes through
    fresh = env.ledger.load(slot.slot_id)
    assert env.ledger.cancel_cells(fresh, cells=["cats"], intents=[], slot_status="failed",
                                   reason_code="cancelled_by_consumer", reason_message="cancelled", now_ms=T0 + 12)
    assert env.ledger.load(slot.slot_id).intents[0].outbox_status == "processing"


def test_cancel_takes_an_expired_claim_only_if_nobody_reclaimed_it(env: Env) -> None:
    """A row read processing with an expired lease is cancelled (its worker died) -- but only that
    claim: another worker that took the row over between the read and the transaction owns it now."""
    slot = admitted(env, make_slot(targets=("cats",)))
    intent, _ = env.ledger.put_intent(make_intent(slot.slot_id))
    assert env.ledger.claim_intent(intent, "dlv-a", T0, OUTBOX_LEASE_MS) is not None
    expired = T0 + OUTBOX_LEASE_MS
    state = env.ledger.load(slot.slot_id)  # processing, dlv-a's lease just expired
    assert (state.intents[0].outbox_status, state.intents[0].lease_until) == ("processing", expired)
    assert env.ledger.claim_intent(state.intents[0], "dlv-b", expired, OUTBOX_LEASE_MS) is not None
    assert not _cancel(env, state, expired + 1)
    _refused_untouched(env, slot, "dlv-b", expired + OUTBOX_LEASE_MS)
    # the same cancel from a read of the expired claim nobody took over goes through
    again = env.ledger.load(slot.slot_id)
    later = expired + OUTBOX_LEASE_MS
    assert _cancel(env, again, later + 1)
    after = env.ledger.load(slot.slot_id)
    assert after.intents[0].outbox_status == "cancelled" and after.intents[0].lease_owner is None
    assert after.cells["cats"].status == "failed" and after.slot.status == "failed"


def test_recovery_of_a_never_claimed_cell_writes_it_once(env: Env) -> None:
    slot = slot_only(env, targets=("cats",))
    stand_in = unwritten(env, slot, "cats")
    now = T0 + 300_000
    assert env.ledger.mark_dispatched(slot.slot_id, "cats", stand_in.dispatched_at, now, unwritten=stand_in)
    # a concurrent sweep that read the same unwritten cell is refused: the cell exists now, re-dispatched
    assert not env.ledger.mark_dispatched(slot.slot_id, "cats", stand_in.dispatched_at, now, unwritten=stand_in)
    cell = env.ledger.get_cell(slot.slot_id, "cats")
    assert (cell.status, cell.dispatched_at, cell.created_at, cell.work_type) == ("pending", now, T0, "illustration")


def test_a_zombie_executor_cannot_release_the_reservation_its_cells_newer_executor_holds(env):
    """reserve_work/release_work_reservation (spec §5): a cell's re-run re-claims its work and records
    the executor now holding it; the old executor, still running after its lease lapsed, then fails
    and releases "its" reservation. That release must be refused, or a rival cell could take the work
    the new executor is about to deliver (issue 20: make mutants found no test of this guard)."""
    ledger, route, kind = env.ledger, "review", "illustration"
    cell_a, cell_b = "pixivflow:review:a@2026-12-01T0800:cats", "pixivflow:review:b@2026-12-01T0800:cats"
    assert ledger.reserve_work(route, kind, "501", cell_a, 1_000, executor="exe-old") == (True, cell_a)
    assert ledger.reserve_work(route, kind, "501", cell_a, 2_000, executor="exe-new") == (True, cell_a)  # the re-run
    assert ledger.release_work_reservation(route, kind, "501", cell_a, executor="exe-old") is False  # the zombie
    assert ledger.reserve_work(route, kind, "501", cell_b, 3_000, executor="exe-b") == (False, cell_a)  # still A's
    assert ledger.release_work_reservation(route, kind, "501", cell_a, executor="exe-new") is True  # its holder may
    assert ledger.reserve_work(route, kind, "501", cell_b, 4_000, executor="exe-b") == (True, cell_b)


def test_a_zombie_executors_error_neither_lands_on_the_cell_nor_drops_the_new_owners_lease(env: Env) -> None:
    """record_cell_error with an owner (spec §4.2): executor A's lease lapsed and B claimed the cell;
    A's late retryable error must be refused, or it would strip B's lease and let a third executor
    run the cell beside B (issue 20: make mutants found no test of this guard)."""
    slot = admitted(env)
    assert env.ledger.claim_cell(slot.slot_id, "cats", "exec-a", T0, LEASE_MS) is not None
    assert env.ledger.claim_cell(slot.slot_id, "cats", "exec-b", T0 + LEASE_MS, LEASE_MS) is not None
    assert env.ledger.record_cell_error(slot.slot_id, "cats", "late error from a", T0 + LEASE_MS + 5, owner="exec-a") is False
    cell = env.ledger.get_cell(slot.slot_id, "cats")
    assert (cell.lease_owner, cell.lease_until, cell.last_error) == ("exec-b", T0 + 2 * LEASE_MS, None)
    assert env.ledger.claim_cell(slot.slot_id, "cats", "exec-c", T0 + LEASE_MS + 10, LEASE_MS) is None
    assert env.ledger.record_cell_error(slot.slot_id, "cats", "b's error", T0 + LEASE_MS + 20, owner="exec-b") is True
    assert env.ledger.get_cell(slot.slot_id, "cats").last_error == "b's error"


def test_a_cell_whose_lease_is_live_is_not_re_dispatched(env: Env) -> None:
    """mark_dispatched (DESIGN §4 "Recovery"): the sweep re-sends a cell's message only while nobody
    holds its lease; a cell being run right now must not get a second executor beside its own
    (issue 20: make mutants found no test of this guard)."""
    slot = admitted(env)
    assert env.ledger.claim_cell(slot.slot_id, "cats", "exec-a", T0, LEASE_MS) is not None
    seen = env.ledger.get_cell(slot.slot_id, "cats").dispatched_at
    assert env.ledger.mark_dispatched(slot.slot_id, "cats", seen, T0 + LEASE_MS - 1) is False  # lease still live
    assert env.ledger.get_cell(slot.slot_id, "cats").dispatched_at == seen
    assert env.ledger.mark_dispatched(slot.slot_id, "cats", seen, T0 + LEASE_MS) is True  # lapsed: the sweep may


def test_a_zombie_deliverers_readiness_release_neither_rearms_the_row_nor_drops_the_new_owners_lease(env: Env) -> None:
    """release_intent (spec §10.4 ``release``): deliverer A's outbox lease lapsed and B claimed the
    row; A's late readiness deferral must be refused, or it would put B's row back to pending,
    strip B's lease and let a third deliverer post it beside B (make mutants found no test of
    this guard)."""
    slot = admitted(env)
    intent, _ = env.ledger.put_intent(make_intent(slot.slot_id))
    assert env.ledger.claim_intent(intent, "dlv-a", T0, OUTBOX_LEASE_MS) is not None
    b = env.ledger.claim_intent(intent, "dlv-b", T0 + OUTBOX_LEASE_MS, OUTBOX_LEASE_MS)
    assert b is not None and b.lease_owner == "dlv-b"
    assert env.ledger.release_intent(intent, "dlv-a", T0 + OUTBOX_LEASE_MS + 5, T0 + 10**6) is None  # the zombie
    row = env.ledger.get_intent(slot.slot_id, "cats", "review", "illustration", "1001")
    assert (row.outbox_status, row.lease_owner, row.lease_until, row.next_attempt_at) == (
        "processing", "dlv-b", T0 + 2 * OUTBOX_LEASE_MS, T0)
    assert env.ledger.claim_intent(intent, "dlv-c", T0 + OUTBOX_LEASE_MS + 10, OUTBOX_LEASE_MS) is None
    # its holder may defer it: pending again, due later, no attempt consumed
    released = env.ledger.release_intent(b, "dlv-b", T0 + OUTBOX_LEASE_MS + 20, T0 + 10**6)
    assert released is not None
    assert (released.outbox_status, released.lease_owner, released.next_attempt_at, released.attempts) == (
        "pending", None, T0 + 10**6, 0)
    # a row no longer processing (settled done) refuses any release, even by its last holder
    c = env.ledger.claim_intent(released, "dlv-c", T0 + 10**6, OUTBOX_LEASE_MS)
    assert env.ledger.settle_intent(c, "dlv-c", T0 + 10**6 + 1, ledger_status=LedgerStatus.DELIVERED,
                                    outbox_status=OutboxStatus.DONE) is not None
    assert env.ledger.release_intent(c, "dlv-c", T0 + 10**6 + 2, T0 + 2 * 10**6) is None
    row = env.ledger.get_intent(slot.slot_id, "cats", "review", "illustration", "1001")
    assert (row.outbox_status, row.status, row.next_attempt_at) == ("done", "delivered", T0 + 10**6)


def test_a_cancel_from_a_stale_read_never_fails_a_cell_that_was_delivered_meanwhile(env: Env) -> None:
    """cancel_cells (spec §12.7): each cell's failure is conditioned on the status the cancel read.
    The consumer's cancel read cats delivery_pending; its delivery then submitted it. The whole step
    must refuse, or a delivered cell would be reported failed (and the slot failed) although the
    consumer received its work (make mutants found no test of this guard)."""
    slot = admitted(env, make_slot(targets=("cats",)))
    sid = slot.slot_id
    assert env.ledger.transition_cell(sid, "cats", CellStatus.DELIVERY_PENDING, T0, work_id="1001")
    stale = env.ledger.load(sid)
    assert env.ledger.transition_cell(sid, "cats", CellStatus.SUBMITTED, T0 + 1)  # the delivery lands
    assert not env.ledger.cancel_cells(stale, cells=["cats"], intents=[], slot_status="failed",
                                       reason_code="cancelled_by_consumer", reason_message="cancelled", now_ms=T0 + 2)
    after = env.ledger.load(sid)
    cats = after.cells["cats"]
    assert (cats.status, cats.terminal_reason_code, cats.completed_at) == ("submitted", None, T0 + 1)
    assert after.slot.status == "pending" and after.slot.completed_at is None
