"""Test doubles that break one guard on purpose, so the simulation can prove it notices (issue 20:
"proof that the proof works"). ``sim.py --double NAME`` installs one in every worker process."""

from __future__ import annotations

from typing import Callable

RESERVATION_CONDITION = "attribute_not_exists(pk) OR ownerKey = :me"  # reserve_work's (spec §5: one owner per work and route)


def no_reservation_condition() -> None:
    """``reserve_work`` without its condition: any cell may take a work another cell holds on the
    same route. Nothing in a serial run can notice; two executors racing for one work can."""
    from pixivflow.adapters.dynamo_ledger.ledger import DynamoLedger

    real = DynamoLedger._call

    def _call(self, operation, **params):  # type: ignore[no-untyped-def]
        if params.get("ConditionExpression") == RESERVATION_CONDITION:
            for key in ("ConditionExpression", "ExpressionAttributeValues", "ReturnValuesOnConditionCheckFailure"):
                params.pop(key, None)
        return real(self, operation, **params)

    DynamoLedger._call = _call  # type: ignore[method-assign]


DOUBLES: dict[str, Callable[[], None]] = {"no-reservation-condition": no_reservation_condition}
