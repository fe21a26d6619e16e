"""One scheduled occurrence end to end through the real handlers (issue: engine foundation)."""



def test_scheduled_fire_ends_success_with_one_delivery_per_cell(make_runtime, downstream):
    rt = make_runtime("2026-11-30T22:59:00Z")
    result = rt.fire("morning-tokyo", iso="2026-11-30T23:00:00Z")
    assert result == {"status": "admitted", "slot_id": "morning-tokyo@2026-12-01T0800", "disposition": "accepted", "sent": 3}
    rt.settle()
    state = rt.wiring.ledger.load("morning-tokyo@2026-12-01T0800")
    assert state.slot.status == "success"
    assert sorted(c.status for c in state.snapshot_cells()) == ["submitted"] * 3
    assert len(downstream.requests) == 3
    # one delivery per cell, each carrying the same idempotency key in the header and the body
    keys = [(r.headers["idempotency-key"], r.body["idempotency_key"]) for r in downstream.requests]
    assert all(h == b for h, b in keys)
    assert sorted(r.body["target_id"] for r in downstream.requests) == ["cats", "landscape", "ranking-daily"]
    assert {c.work_id for c in state.snapshot_cells()} == {r.body["work_id"] for r in downstream.requests}
