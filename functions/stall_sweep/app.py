"""Stall sweep (every SweepIntervalMinutes): recovery, timeouts, stall rules, outbox re-drive."""

from pixivflow.handlers import stall_sweep as entry
from pixivflow.observability import logger


@logger.inject_lambda_context(clear_state=True)
def handler(event, context):
    return entry.handle(event, context)
