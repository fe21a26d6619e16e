"""Deliver: one SQS message per outbox row; POST with its idempotency key, parse the ACK, settle."""

from pixivflow.handlers import deliver as entry
from pixivflow.observability import logger


@logger.inject_lambda_context(clear_state=True)
def handler(event, context):
    return entry.handle(event, context)
