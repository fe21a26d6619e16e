"""Issue 25, artifacts: a few fixed retention classes, because S3 lifecycle rules cannot follow a
per-config day count. Every stored object is tagged ``retention=<class>``; template.yaml has one
expiration rule per class plus the backstop that also aborts abandoned multipart uploads;
PixivFlow's ``storage.cacheRetentionDays`` picks the smallest class >= the days, and says so in a
``config check`` warning when it rounds."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest
import yaml
from moto import mock_aws

from pixivflow.config import parse_config
from pixivflow.config.runtime import RETENTION_CLASSES

ROOT = Path(__file__).resolve().parents[2]


class _Loader(yaml.SafeLoader):
    pass


_Loader.add_multi_constructor("!", lambda loader, suffix, node: {suffix: loader.construct_scalar(node)}
                              if isinstance(node, yaml.ScalarNode) else loader.construct_sequence(node))


@pytest.fixture(scope="module")
def rules() -> list[dict]:
    template = yaml.load((ROOT / "template.yaml").read_text(), Loader=_Loader)
    return template["Resources"]["ArtifactBucket"]["Properties"]["LifecycleConfiguration"]["Rules"]


def _config(**storage):
    return parse_config({"source": {"kind": "catalog", "path": "catalog.json"}, "storage": storage})


def test_every_retention_class_has_one_rule_expiring_its_tag_after_its_days(rules):
    tagged = {r["TagFilters"][0]["Value"]: r for r in rules if "TagFilters" in r}
    assert sorted(tagged, key=lambda v: int(v[:-1])) == [f"{d}d" for d in RETENTION_CLASSES]
    for days in RETENTION_CLASSES:
        rule = tagged[f"{days}d"]
        assert (rule["Status"], rule["ExpirationInDays"], rule["TagFilters"]) == (
            "Enabled", days, [{"Key": "retention", "Value": f"{days}d"}])
    # the backstop: every object (tagged or not) by RetentionDays, and abandoned multipart uploads
    [backstop] = [r for r in rules if "TagFilters" not in r]
    assert backstop["ExpirationInDays"] == {"Ref": "RetentionDays"} and "Prefix" not in backstop
    assert backstop["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 1}


def test_s3_accepts_the_rules_as_the_template_writes_them(rules):
    """The same rules through the S3 API (moto validates the lifecycle document)."""
    api = []
    for r in rules:
        rule = {"ID": r["Id"], "Status": r["Status"],
                "Expiration": {"Days": 30 if isinstance(r["ExpirationInDays"], dict) else r["ExpirationInDays"]}}
        rule["Filter"] = {"Tag": r["TagFilters"][0]} if "TagFilters" in r else {"Prefix": ""}
        if "AbortIncompleteMultipartUpload" in r:
            rule["AbortIncompleteMultipartUpload"] = r["AbortIncompleteMultipartUpload"]
        api.append(rule)
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="retention-check")
        s3.put_bucket_lifecycle_configuration(Bucket="retention-check", LifecycleConfiguration={"Rules": api})
        back = s3.get_bucket_lifecycle_configuration(Bucket="retention-check")["Rules"]
    assert {r["ID"]: r["Expiration"]["Days"] for r in back} == {
        "ExpireArtifacts": 30, **{f"Retention{d}d": d for d in RETENTION_CLASSES}}


@pytest.mark.parametrize("days, kept", [(1, "1d"), (2, "7d"), (7, "7d"), (8, "14d"), (14, "14d"), (20, "30d"), (30, "30d")])
def test_cache_retention_days_picks_the_smallest_class_that_keeps_a_file_that_long(days, kept):
    config = _config(cacheRetentionDays=days)
    assert config.storage.retention_class == kept
    rounded = [w for w in config.warnings if w.startswith("storage.cacheRetentionDays")]
    if f"{days}d" == kept:
        assert rounded == []
    else:
        assert rounded == [f"storage.cacheRetentionDays: {days} days is not a retention class; stored files are kept "
                           f"{kept[:-1]} days, the smallest class that is at least {days} (the classes are 1, 7, 14, 30 days)"]


def test_pixivflows_default_is_14_days_and_beyond_the_longest_class_is_said():
    assert _config().storage.retention_class == "14d" and not [w for w in _config().warnings if "cacheRetentionDays" in w]
    config = _config(cacheRetentionDays=90)
    assert config.storage.retention_class == "30d"
    assert [w for w in config.warnings if w.startswith("storage.")] == [
        "storage.cacheRetentionDays: 90 days is longer than the longest retention class; stored files are kept 30 days "
        "(the classes are 1, 7, 14, 30 days)"]


@pytest.mark.parametrize("bad", [0, -3, "7", 7.5, True])
def test_a_day_count_that_is_not_a_positive_integer_is_refused_naming_the_field(bad):
    from pixivflow.domain.errors import ConfigError

    with pytest.raises((ConfigError, ValueError)) as exc:
        _config(cacheRetentionDays=bad)
    assert "storage.cacheRetentionDays" in str(exc.value)
