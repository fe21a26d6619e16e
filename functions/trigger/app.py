"""Trigger: EventBridge Scheduler fires and the operator HTTP routes (admit slots, dispatch cells)."""

from pixivflow.handlers import trigger as entry
from pixivflow.observability import logger


@logger.inject_lambda_context(clear_state=True)
def handler(event, context):
    return entry.handle(event, context)
