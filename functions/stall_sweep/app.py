"""Stall sweep (every minute): recovery, timeouts, stall rules, outbox re-drive."""

from pixivflow import entry
from pixivflow.observability import logger


@logger.inject_lambda_context(clear_state=True)
def handler(event, context):
    return entry.stall_sweep(event, context)
