"""template.yaml for the Pixiv source (issue 10): what execute may do with the bucket and the
refresh token, the secrets path it reads it below, and the bucket's retention and encryption."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pixivflow.local.template import load_template

REPO = Path(__file__).resolve().parents[2]
PARAMETER = "arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter"


@pytest.fixture(scope="module")
def tpl() -> dict[str, Any]:
    return load_template(REPO / "template.yaml")


def statements(tpl: dict[str, Any], logical_id: str) -> list[dict[str, Any]]:
    out = []
    for policy in tpl["Resources"][logical_id]["Properties"].get("Policies", []):
        if isinstance(policy, dict):
            out.extend(policy.get("Statement", []))
    return out


def granted(tpl: dict[str, Any], logical_id: str, action: str) -> list[Any]:
    found = []
    for statement in statements(tpl, logical_id):
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        if action in actions and statement["Effect"] == "Allow":
            found.extend(statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]])
    return found


def test_only_execute_knows_the_pixiv_secrets_path(tpl):
    """Least privilege (issue 21): the Pixiv account tokens have their own path, named to execute alone."""
    assert "PIXIV_SECRETS_PATH" not in tpl["Globals"]["Function"]["Environment"]["Variables"]
    for lid, resource in tpl["Resources"].items():
        if resource["Type"] != "AWS::Serverless::Function":
            continue
        env = (resource["Properties"].get("Environment") or {}).get("Variables") or {}
        assert ("PIXIV_SECRETS_PATH" in env) == (lid == "ExecuteFunction"), lid
    env = tpl["Resources"]["ExecuteFunction"]["Properties"]["Environment"]["Variables"]
    assert env["PIXIV_SECRETS_PATH"] == {"Ref": "PixivSecretsPath"}


def test_execute_reads_and_finds_stored_artifacts(tpl):
    assert granted(tpl, "ExecuteFunction", "s3:GetObject") == [{"Fn::Sub": "${ArtifactBucket.Arn}/*"}]
    # ListBucket on the bucket itself, so a missing manifest is a 404 (nothing stored), not a 403
    assert granted(tpl, "ExecuteFunction", "s3:ListBucket") == [{"Fn::GetAtt": ["ArtifactBucket", "Arn"]}]
    assert granted(tpl, "ExecuteFunction", "s3:DeleteObject") == []


def test_deliver_reads_artifacts_to_sign_asset_urls_and_never_writes_them(tpl):
    assert granted(tpl, "DeliverFunction", "s3:GetObject") == [{"Fn::Sub": "${ArtifactBucket.Arn}/*"}]
    assert granted(tpl, "DeliverFunction", "s3:ListBucket") == [{"Fn::GetAtt": ["ArtifactBucket", "Arn"]}]
    assert granted(tpl, "DeliverFunction", "s3:PutObject") == []


def test_execute_reads_secrets_below_the_path_and_writes_only_pixiv_tokens(tpl):
    reads = granted(tpl, "ExecuteFunction", "ssm:GetParameter")
    assert {"Fn::Sub": f"{PARAMETER}${{PixivSecretsPath}}/*"} in reads
    assert {"Fn::Sub": f"{PARAMETER}${{RouteSecretsPath}}/*"} not in reads  # the routes' tokens are deliver's
    assert granted(tpl, "ExecuteFunction", "ssm:PutParameter") == [{"Fn::Sub": f"{PARAMETER}${{PixivSecretsPath}}/PIXIV_*"}]
    for lid, resource in tpl["Resources"].items():
        if resource["Type"] == "AWS::Serverless::Function" and lid != "ExecuteFunction":
            assert "ssm:PutParameter" not in json.dumps(statements(tpl, lid)), lid


def test_the_bucket_is_encrypted_and_expires_with_retention_days(tpl):
    bucket = tpl["Resources"]["ArtifactBucket"]["Properties"]
    [rule] = bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] in ("AES256", "aws:kms")
    # the backstop rule; the retention classes' rules are tests/unit/test_retention_classes.py's
    [lifecycle] = [r for r in bucket["LifecycleConfiguration"]["Rules"] if "TagFilters" not in r]
    assert (lifecycle["Status"], lifecycle["ExpirationInDays"]) == ("Enabled", {"Ref": "RetentionDays"})
    assert "Prefix" not in lifecycle and "Filter" not in lifecycle  # every object, tagged or not
