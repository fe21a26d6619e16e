"""One Logger and one Metrics for the whole package (Powertools; no AWS client at import)."""

from __future__ import annotations

import os

from aws_lambda_powertools import Logger, Metrics

SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME", "pixivflow")
NAMESPACE = os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "PixivFlow")

logger = Logger(service=SERVICE)
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)
