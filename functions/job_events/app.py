"""Job events: the Workflow Protocol v1 HTTP surface."""

from pixivflow.handlers import job_events as entry
from pixivflow.observability import logger


@logger.inject_lambda_context(clear_state=True)
def handler(event, context):
    return entry.handle(event, context)
