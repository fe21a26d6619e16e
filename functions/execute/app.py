"""Execute: one SQS message per cell; claim, select, bind, download, record the delivery intent."""

from pixivflow.handlers import execute as entry
from pixivflow.observability import logger


@logger.inject_lambda_context(clear_state=True)
def handler(event, context):
    return entry.handle(event, context)
