"""The runtime's SQS queues as a test handles them: ``take`` drains one (a message taken off the queue
and thrown away is a lost message; its bodies are returned, for a test that then plays the consumer)."""

from __future__ import annotations


def take(rt, queue: str = "EXECUTION_QUEUE_URL", *, visibility_s: int | None = None) -> list[str]:
    """Receive every visible message of the queue named by ``rt.env[queue]``, ten at a time, deleting
    each; returns their bodies, in order. ``visibility_s``: the receives' VisibilityTimeout (else the
    queue's own)."""
    from pixivflow import aws

    sqs, url = aws.client("sqs"), rt.env[queue]
    options = {} if visibility_s is None else {"VisibilityTimeout": visibility_s}
    bodies: list[str] = []
    while messages := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, **options).get("Messages", []):
        for m in messages:
            bodies.append(m["Body"])
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    return bodies


def drop_executions(rt) -> int:
    """Lose every execution message (the executor never hears of its cells); returns how many."""
    return len(take(rt, "EXECUTION_QUEUE_URL"))
