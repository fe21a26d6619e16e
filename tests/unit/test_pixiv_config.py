"""Config for the Pixiv source (issue 10): the `pixiv`, `network` and `download` blocks, source
selection, `source.baseUrls`, `${VAR}` secret references, and what the runtime builds."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import boto3
import pytest
import yaml
from moto import mock_aws

from pixivflow.adapters.pixiv.secrets import SecretMissing, SecretResolver, SecretUnavailable, expand, references
from pixivflow.config import parse_config
from pixivflow.domain.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
DEMO = yaml.safe_load((ROOT / "events" / "demo" / "config.yaml").read_text())


def demo(**changes):
    cfg = copy.deepcopy(DEMO)
    cfg["source"]["path"] = str(ROOT / "events" / "demo" / "catalog.json")
    cfg.update(changes)
    return cfg


def without_source(**changes):
    cfg = demo(**changes)
    del cfg["source"]
    return cfg


def test_a_pixiv_block_without_source_selects_the_pixiv_source():
    config = parse_config(without_source(pixiv={"refreshToken": "${PIXIV_TOKEN}"}))
    assert config.source.kind == "pixiv" and config.source.baseUrls is None
    assert (config.pixiv.accountId, config.pixiv.clientId, config.pixiv.userAgent) == ("default", None, None)
    assert (config.network.timeoutMs, config.network.retries, config.network.requestPacingMs) == (30_000, 2, 1000)
    assert (config.download.requestDelay, config.download.assetUrlTtlSeconds) == (500, 43_200)


def test_catalog_keeps_working_even_beside_a_pixiv_block():
    config = parse_config(demo(pixiv={"refreshToken": "${PIXIV_TOKEN}"}))
    assert config.source.kind == "catalog"


def test_neither_source_nor_pixiv_is_an_error_naming_source():
    with pytest.raises(ConfigError, match=r"source: Field required"):
        parse_config(without_source())


def test_the_pixivflow_blocks_load_as_pixivflow_writes_them():
    config = parse_config(without_source(
        pixiv={"clientId": "cid", "clientSecret": "cs", "deviceToken": "pixiv", "refreshToken": "${PIXIV_TOKEN}",
               "userAgent": "PixivAndroidApp/5.0.234 (Android 11; Pixel 6)", "accountId": "second"},
        network={"timeoutMs": 15000, "retries": 3, "retryDelay": 1000, "requestPacingMs": 1500,
                 "proxy": {"enabled": True, "host": "127.0.0.1", "port": 3128, "protocol": "http"}},
        download={"concurrency": 3, "requestDelay": 800, "maxRetries": 3, "candidateScanLimit": 7},
    ))
    assert (config.pixiv.accountId, config.network.retries, config.network.proxy.port) == ("second", 3, 3128)
    assert (config.download.requestDelay, config.download.candidateScanLimit) == (800, 7)
    assert "cs" not in repr(config.pixiv) and "PIXIV_TOKEN" not in repr(config.pixiv)  # secrets stay out of reprs


@pytest.mark.parametrize(
    "change,where",
    [
        ({"pixiv": {"accountId": "bad id!"}}, "pixiv.accountId"),
        ({"network": {"timeoutMs": 10}}, "network.timeoutMs"),
        ({"network": {"retries": 9}}, "network.retries"),
        ({"network": {"proxy": {"enabled": True}}}, "network.proxy.host"),
        ({"download": {"requestDelay": -1}}, "download.requestDelay"),
        ({"source": {"kind": "pixiv", "baseUrls": {"api": "ftp://x"}}}, "source.baseUrls.api"),
        ({"source": {"kind": "pixiv", "baseUrls": {"image": "http://h/x?y=1"}}}, "source.baseUrls.image"),
    ],
)
def test_bad_values_name_their_field(change, where):
    cfg = without_source(pixiv={"refreshToken": "${T}"})
    for key, value in change.items():
        cfg[key] = {**cfg.get(key, {}), **value} if key == "pixiv" else value
    with pytest.raises(ConfigError, match=re.escape(where) + ": "):
        parse_config(cfg)


def test_base_urls_lose_a_trailing_slash():
    config = parse_config(demo(source={"kind": "pixiv", "baseUrls": {"oauth": "http://127.0.0.1:8080/"}}))
    assert (config.source.baseUrls.oauth, config.source.baseUrls.api) == ("http://127.0.0.1:8080", None)


# ------------------------------------------------------------------ ${VAR} references


def test_expand_replaces_each_reference_and_names_a_missing_one():
    assert references("a ${ONE} b ${TWO} ${ONE}") == ["ONE", "TWO"]
    assert expand("Bearer ${TOKEN}", {"TOKEN": "t-1"}.get) == "Bearer t-1"
    assert expand("plain", {}.get) == "plain"
    with pytest.raises(SecretMissing, match=r"^secret reference \$\{NOPE\} cannot be resolved") as caught:
        expand("${NOPE}", {}.get)
    assert isinstance(caught.value, ConfigError)


def test_resolver_prefers_env_then_ssm_below_the_path():
    with mock_aws():
        ssm = boto3.client("ssm")
        ssm.put_parameter(Name="/pixivflow/routes/PIXIV_TOKEN", Value="from-ssm", Type="SecureString")
        resolver = SecretResolver("/pixivflow/routes/", env={}, ssm=ssm)
        assert resolver.parameter_name("PIXIV_TOKEN") == "/pixivflow/routes/PIXIV_TOKEN"
        assert resolver.lookup("PIXIV_TOKEN") == "from-ssm"
        assert resolver.lookup("ABSENT") is None
        assert SecretResolver("/pixivflow/routes", env={"PIXIV_TOKEN": "from-env"}, ssm=ssm).lookup("PIXIV_TOKEN") == "from-env"
        assert SecretResolver(None, env={}, ssm=ssm).lookup("PIXIV_TOKEN") is None  # no path: env only
        resolver.put("PIXIV_TOKEN", "rotated")
        assert ssm.get_parameter(Name="/pixivflow/routes/PIXIV_TOKEN", WithDecryption=True)["Parameter"]["Value"] == "rotated"
        assert ssm.get_parameter(Name="/pixivflow/routes/PIXIV_TOKEN")["Parameter"]["Type"] == "SecureString"


def test_resolver_reads_its_path_from_route_secrets_path(monkeypatch):
    monkeypatch.setenv("ROUTE_SECRETS_PATH", "/stack/secrets")
    assert SecretResolver(env={}).parameter_name("X") == "/stack/secrets/X"


def test_a_transient_store_failure_is_retried_then_unavailable_and_never_cached():
    from botocore.exceptions import ClientError

    class Flaky:
        def __init__(self):
            self.calls = 0
            self.down = True

        def get_parameter(self, Name, WithDecryption):  # noqa: N803
            self.calls += 1
            if self.down:
                raise ClientError({"Error": {"Code": "InternalServerError", "Message": "x"}}, "GetParameter")
            return {"Parameter": {"Value": "v"}}

    ssm, sleeps = Flaky(), []
    resolver = SecretResolver("/p", env={}, ssm=ssm, sleep=sleeps.append)
    with pytest.raises(SecretUnavailable, match=r"\$\{T\}: InternalServerError"):
        resolver.lookup("T")
    assert ssm.calls == 3 and sleeps == [0.2, 0.4]
    ssm.down = False
    assert resolver.lookup("T") == "v"  # asked again: the failure was not remembered
    assert resolver.lookup("T") == "v" and ssm.calls == 4  # a found value is kept


def test_access_denied_is_a_configuration_problem_not_an_outage():
    from botocore.exceptions import ClientError

    class Denied:
        def get_parameter(self, Name, WithDecryption):  # noqa: N803
            raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "x"}}, "GetParameter")

    with pytest.raises(SecretMissing, match="AccessDeniedException"):
        SecretResolver("/p", env={}, ssm=Denied()).lookup("T")


# ------------------------------------------------------------------ runtime


def test_runtime_builds_the_pixiv_source_without_any_request(tmp_path, monkeypatch):
    from pixivflow import runtime
    from pixivflow.adapters.pixiv import PixivSource
    from pixivflow.local.provision import provision

    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(demo(pixiv={"refreshToken": "${PIXIV_TOKEN}", "accountId": "acct-1"},
                                                  source={"kind": "pixiv", "baseUrls": {"api": "http://127.0.0.1:9"}})))
    with mock_aws():
        for key, value in provision().items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("PIXIVFLOW_CONFIG", str(path))
        runtime.reset()
        try:
            source = runtime.get().wiring.source
            assert isinstance(source, PixivSource)
            assert source.client.bases.api == "http://127.0.0.1:9"
            assert source.client.bases.oauth == "https://oauth.secure.pixiv.net"
            assert source.client.api_requests == 0 and source.client.image_requests == 0
        finally:
            runtime.reset()


def test_pixiv_secrets_live_below_their_own_path_and_fall_back_to_the_routes_path(monkeypatch):
    """DESIGN §12 / issue 21: PIXIV_SECRETS_PATH (execute's alone), else ROUTE_SECRETS_PATH as before."""
    asked = []

    class Ssm:
        def get_parameter(self, Name, WithDecryption):
            asked.append(Name)
            return {"Parameter": {"Value": "v"}}

    monkeypatch.setenv("ROUTE_SECRETS_PATH", "/pixivflow/routes")
    monkeypatch.setenv("PIXIV_SECRETS_PATH", "/pixivflow/pixiv/")
    assert SecretResolver(env={}, ssm=Ssm()).lookup("PIXIV_REFRESH_TOKEN") == "v"
    monkeypatch.delenv("PIXIV_SECRETS_PATH")
    assert SecretResolver(env={}, ssm=Ssm()).lookup("PIXIV_REFRESH_TOKEN") == "v"
    assert asked == ["/pixivflow/pixiv/PIXIV_REFRESH_TOKEN", "/pixivflow/routes/PIXIV_REFRESH_TOKEN"]


def test_a_pixiv_secret_store_outage_is_the_one_unavailable_every_reader_shares():
    from pixivflow.domain.errors import SecretStoreUnavailable

    assert issubclass(SecretUnavailable, SecretStoreUnavailable)


# -- issue 24: account governance, SOCKS, PIXIV_CANDIDATE_SCAN_LIMIT ----------------------------


def governed(value):
    return demo(schedulerRuntime={"resourceGovernance": {"pixivAccounts": {"main": value}}})


def test_max_concurrency_per_account_is_1_to_16_and_defaults_to_1():
    config = parse_config(governed({"maxConcurrency": 4}))
    governance = config.schedulerRuntime.resourceGovernance
    assert governance.account("main").maxConcurrency == 4
    assert governance.account("other").maxConcurrency == 1  # PixivFlow's default for an unlisted account
    assert parse_config(demo()).schedulerRuntime.resourceGovernance.account("default").maxConcurrency == 1
    for bad in (0, 17, 2.5, "2", True):
        with pytest.raises(ConfigError) as err:
            parse_config(governed({"maxConcurrency": bad}))
        assert "schedulerRuntime.resourceGovernance.pixivAccounts.main.maxConcurrency" in str(err.value), bad


def test_queue_limit_is_accepted_and_ignored_with_a_warning():
    config = parse_config(governed({"maxConcurrency": 1, "queueLimit": 5}))
    assert any(w.startswith("schedulerRuntime.resourceGovernance.pixivAccounts.main.queueLimit: not supported")
               for w in config.warnings)
    assert not any("queueLimit" in w for w in parse_config(governed({"maxConcurrency": 1})).warnings)


@pytest.mark.parametrize("protocol", ["socks4", "socks5"])
def test_a_socks_proxy_is_a_config_error_naming_the_field(protocol):
    with pytest.raises(ConfigError) as err:
        parse_config(demo(network={"proxy": {"enabled": True, "host": "127.0.0.1", "port": 1080, "protocol": protocol}}))
    assert f"network.proxy.protocol: {protocol} proxies are not supported" in str(err.value)
    # A disabled SOCKS block changes nothing (PixivFlow's template ships one disabled).
    parse_config(demo(network={"proxy": {"enabled": False, "protocol": protocol}}))


@pytest.mark.parametrize("raw, expected, warned", [
    ("12", 12, False), ("500", 100, True), ("0", 5, False), ("-3", 5, False), ("ten", 5, False), ("", 5, False)])
def test_pixiv_candidate_scan_limit_env_is_honoured_with_the_specs_clamps(monkeypatch, raw, expected, warned):
    from pixivflow.domain.scan import effective_scan_bound

    monkeypatch.setenv("PIXIV_CANDIDATE_SCAN_LIMIT", raw)
    config = parse_config(demo(download={"requestDelay": 0}))
    assert effective_scan_bound(1, None, config.download.candidateScanLimit) == expected
    assert any("download.candidateScanLimit" in w for w in config.warnings) is warned
