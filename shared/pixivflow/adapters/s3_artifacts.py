"""Artifact store on S3 (used when ARTIFACT_BUCKET is set)."""

from __future__ import annotations

from typing import Any, Sequence

from ..ports import ArtifactFile


class S3Artifacts:
    def __init__(self, client: Any, bucket: str) -> None:
        self._client = client
        self._bucket = bucket

    def put(self, key: str, files: Sequence[ArtifactFile]) -> list[str]:
        locations = []
        for f in files:
            object_key = f"{key}/{f.name}"
            self._client.put_object(Bucket=self._bucket, Key=object_key, Body=f.content, ContentType=f.content_type)
            locations.append(f"s3://{self._bucket}/{object_key}")
        return locations


class NoArtifacts:
    """No bucket configured: artifacts live only for the duration of the invocation."""

    def put(self, key: str, files: Sequence[ArtifactFile]) -> list[str]:
        return [f"memory://{key}/{f.name}" for f in files]
