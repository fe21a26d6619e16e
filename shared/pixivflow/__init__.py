"""PixivFlow Serverless: the scheduler core as a Lambda layer."""

__version__ = "0.1.0"
