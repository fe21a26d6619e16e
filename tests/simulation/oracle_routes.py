"""The routes world's oracle (issues 20, 23), beside spec §13's (``oracle.check_invariants``).

``delivered_records`` gives the common oracle one view of what every route's receiver holds, keyed
by the delivery intent's idempotency key, so §13/2-3 (one record per work and route; submitted
exactly when the receiver holds the work) hold for PixivFlow's routes too. ``check_routes`` adds
what those routes promise:

* [R1] Telegram: each page of a work is in the review chat at most once, and one control card per
  review id: a re-claimed ``sending`` row is recorded ``uncertain`` and dead-lettered, never posted
  again (nothing in the simulation redrives);
* [R2] Telegram: nothing is in the chat without a review record at the control plane (``pending``
  for a complete review, ``uncertain`` when an attempt ended not knowing) — no silent post; a row
  that ended ``delivered`` has a ``pending`` record naming its slot;
* [R3] notifications: each planned notification row ends (done, or dead after its budget), a done
  row's notice is at the receiver, and every notice sent under one key is the same notice (sent at
  least once: repeats after a lost answer or an expired claim are counted, not refused);
* [R4] the receivers never refused what the routes sent (TelePost's multipart rules, the gateway's
  signature and document): a refusal would be a route bug, not a fault.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from types import SimpleNamespace
from typing import Any

from pixivflow.domain.ack import idempotency_key
from pixivflow.domain.cells import TERMINAL_SLOT_STATES
from pixivflow.domain.review import review_id

TELEGRAM_ROUTE = "bot1-review"
CARD_PREFIX = "🧾 审核 "
DONE_OR_DEAD = ("done", "dead")


def _work_type(config: Any, target_id: str) -> str:
    target = config.target(target_id)
    return "novel" if target is not None and str(target.type) == "novel" else "illustration"


def delivered_records(world: Any) -> Any:
    """The receivers' records as ``check_invariants`` reads a downstream (``.records``)."""
    fakes, config = world.fakes, world.rt.wiring.config
    records: dict[str, dict[str, Any]] = dict(world.downstream.records)
    for key, sub in fakes.telepost.submissions.items():
        records[key] = {"work_id": (sub["fields"].get("pixiv_id") or [""])[0]}
    for key, rec in fakes.gateway.records.items():
        records[key] = {"work_id": rec["work_id"]}
    for review in fakes.control.reviews.values():
        if review.get("status") != "pending":
            continue  # an uncertain review is no delivery ([R2] reads it)
        target = str(review.get("target_id"))
        key = idempotency_key(TELEGRAM_ROUTE, _work_type(config, target), str(review["work_id"]),
                              str(review["slot_id"]), target)
        records[key] = {"work_id": str(review["work_id"])}
    return SimpleNamespace(records=records)


def _telegram(world: Any, intents: list[tuple[str, Any]]) -> list[str]:
    problems: list[str] = []
    telegram, control = world.fakes.telegram, world.fakes.control
    pages: Counter[str] = Counter()
    for call in telegram.sent():
        for part in call.files.values():
            pages[str(part.filename)] += 1
    for name, n in pages.items():
        if n > 1:
            problems.append(f"[R1] telegram: page {name} is in the review chat {n} times")
    cards = Counter(c.fields.get("text", "").split("\n", 1)[0][len(CARD_PREFIX):] for c in telegram.sent("sendMessage"))
    for rid, n in cards.items():
        if n > 1:
            problems.append(f"[R1] telegram: review {rid} has {n} control cards")
    posted_works = {name.split("_", 1)[0] for name in pages}
    reviewed = {str(r.get("work_id")) for r in control.reviews.values()}
    for work in sorted(posted_works - reviewed):
        problems.append(f"[R2] telegram: work {work} is in the review chat with no review record at the control plane")
    for rid in cards:
        if rid not in control.reviews:
            problems.append(f"[R2] telegram: control card of {rid} with no review record")
    for slot_id, i in intents:
        if i.route != TELEGRAM_ROUTE or i.status != "delivered":
            continue
        rid = review_id(i.target_id, i.work_type, str(i.work_id))
        review = control.reviews.get(rid)
        if review is None or review.get("status") != "pending" or review.get("slot_id") != slot_id:
            problems.append(f"[R2] telegram: {i.idempotency_key} ended delivered but review {rid} is "
                            f"{review and (review.get('status'), review.get('slot_id'))}")
    return problems


def _notifications(world: Any) -> list[str]:
    from pixivflow.services.notifications import planned_notifications

    from world_routes import notice_key

    problems: list[str] = []
    wiring, fakes = world.rt.wiring, world.fakes
    now = world.clock.now_ms()
    received: Counter[str] = Counter()
    bodies: dict[str, set[str]] = defaultdict(set)
    for path, body in fakes.telepost.notices:
        key = notice_key(path, body)
        received[key] += 1
        bodies[key].add(json.dumps(body, sort_keys=True, ensure_ascii=False))
    # At least once per key (a lost answer, a death after the send, a claim that outlived its lease
    # send it again): a repeat is the same notice, which the receiver dedupes by its key; two
    # different notices under one key it cannot.
    for key, seen in bodies.items():
        if len(seen) > 1:
            problems.append(f"[R3] notice {key} was sent with {len(seen)} different bodies")
    world.counts["notice.repeats"] += sum(n - 1 for n in received.values())
    world.counts["notice.repeats_after_lost_answer"] += sum(min(n - 1, fakes.ambiguous[k]) for k, n in received.items())
    for slot_id in wiring.ledger.slot_ids():
        state = wiring.ledger.load(slot_id)
        if state.slot.status not in TERMINAL_SLOT_STATES:
            continue  # §13/1 says so
        for planned in planned_notifications(wiring.config, state.slot, state.snapshot_cells(), now):
            row = wiring.outbox_rows.get(planned.kind, planned.key)
            if row is None:
                problems.append(f"[R3] slot {slot_id}: notification {planned.key} was never enqueued")
                continue
            if row.status not in DONE_OR_DEAD and not (row.status == "retry_wait" and row.next_attempt_at > now):
                problems.append(f"[R3] notification {row.key} is still {row.status} (attempts {row.attempts}/{row.max_attempts})")
            payload = row.payload or {}
            if payload.get("refetchOutcome"):  # a manual refetch's verdict (the jobs' refetches)
                want = notice_key("/v1/refetch/outcomes", payload["refetchOutcome"])
            elif payload.get("scheduleOutcome"):
                want = notice_key("/v1/schedule/outcomes", payload["scheduleOutcome"])
            else:
                want = row.key
            if row.status == "done" and not received[want]:
                problems.append(f"[R3] notification {row.key} is done but the receiver never accepted it")
    return problems


def check_routes(world: Any) -> list[str]:
    """[R1]-[R4] (module docstring) on the converged ledger and the fakes."""
    ledger = world.rt.wiring.ledger
    intents: list[tuple[str, Any]] = []
    per_route: dict[str, Counter[str]] = defaultdict(Counter)
    for slot_id in ledger.slot_ids():
        state = ledger.load(slot_id)
        for cell in state.snapshot_cells():
            for i in state.intents_for(cell.target_id):
                intents.append((slot_id, i))
                per_route[i.route][f"{i.status}/{i.outbox_status}"] += 1
    world.counts.update({f"intent.{route}.{k}": v for route, c in per_route.items() for k, v in c.items()})
    problems = _telegram(world, intents) + _notifications(world)
    fakes = world.fakes
    for path, why in fakes.telepost.rejections:
        problems.append(f"[R4] TelePost refused a submission to {path}: {why}")
    for why in fakes.gateway.rejections:
        problems.append(f"[R4] the gateway refused a message: {why}")
    return problems


def check_pixiv(world: Any) -> list[str]:
    """Issue 24 on the Pixiv world (world_pixiv): [P1] never more Pixiv requests of the account in
    flight than its permits; [P2] after convergence SSM holds the last refresh token the fake issued
    (a rotation is never lost, nor overwritten by an older one); [P3] a deferred cell is never
    re-dispatched by the sweep before the due time its deferral recorded."""
    from world_pixiv import TOKEN_PARAMETER

    problems = list(world.door.over[:5])
    if len(world.door.over) > 5:
        problems.append(f"[P1] ... and {len(world.door.over) - 5} more times over the account's bound")
    world.counts["pixiv.peak_in_flight"] = world.door.peak
    world.counts.update({f"pixiv.requests.{k}": v for k, v in world.door.requests.items()})
    issued = list(world.fake.issued_refresh_tokens)
    stored = world.ssm.values.get(TOKEN_PARAMETER, ("", 0))[0]
    world.counts["pixiv.rotations"] = len(issued)
    world.counts["pixiv.ssm_holds_last"] = int(not issued or stored == issued[-1])
    # One more refresh, by the harness's container: the one the invocations run outside the baton
    # used, a warm container taken from the idle ones when there was one (Lambda reuses warm
    # containers; such a one may hold a rotated token of its own that neither SSM nor the guard
    # names, seed 4064), else a new one (a cold start). After it the rotation guard and SSM agree --
    # a rotation recorded in the guard is the token SSM holds, so the chain of rotations goes on from
    # SSM and none is lost to a dead container or a failed PutParameter.
    from pixivflow.adapters.pixiv.auth import fingerprint

    world.fake.expire_access_tokens()
    auth = world.containers.fresh()._client._auth  # noqa: SLF001
    # A warm container still trusts its cached access token until its expiry: drop it, as the
    # client does when Pixiv refuses it, so that this is a refresh and not a cache hit.
    auth.invalidate(auth._access)  # noqa: SLF001
    auth.bearer()  # the source's own refresh
    stored = world.ssm.values.get(TOKEN_PARAMETER, ("", 0))[0]
    guard, _ = world.containers.fresh()._client._auth._store.token_guard("main")  # noqa: SLF001
    if guard is not None and guard != fingerprint(stored):
        chain = [world.initial_token, *world.fake.issued_refresh_tokens]
        where = chain.index(stored) if stored in chain else "none"
        held = next((n for n, t in enumerate(chain) if fingerprint(t) == guard), "none")
        problems.append(f"[P2] after a fresh refresh SSM holds token #{where} but the rotation guard names #{held} "
                        f"of {len(chain) - 1} issued ({len(world.ssm.writes)} PutParameter writes)")
    problems += world.early
    return problems
