"""``${VAR}`` references and the secret store behind them (DESIGN §7; issue 11 deliverable 2).

Resolution: env, then SSM ``<RouteSecretsPath>/<VAR>``; found values cached, misses asked again,
a transient SSM failure retried and never remembered as "no secret" (also for the bearer tokens).
"""

from __future__ import annotations

import pytest
from moto import mock_aws

from pixivflow.adapters.secret_refs import (
    Expander,
    SecretResolver,
    SecretStoreUnavailable,
    UnresolvedSecret,
    expand,
    references,
    ssm_reader,
)
from pixivflow.domain.errors import ConfigError
from pixivflow.adapters.secret_store import SecretStore
from pixivflow.http.auth import JOBS, NOT_CONFIGURED, TRIGGER, check_bearer


class Reader:
    """An SSM stand-in: ``script`` answers first (an exception is raised), then ``values``."""

    def __init__(self, values=None, script=()):
        self.values, self.script, self.calls = dict(values or {}), list(script), []

    def __call__(self, name):
        self.calls.append(name)
        if self.script:
            answer = self.script.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer
        return self.values.get(name)


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def resolver(reader, env=None, **kw):
    return SecretResolver(env=env or {}, reader=reader, path="/pf/routes", sleep=lambda s: None, **kw)


def test_expand_replaces_every_reference_and_leaves_other_text_alone():
    values = {"BASE": "https://api.example", "TOKEN": "t0k3n"}
    assert expand("${BASE}/v1?x=${TOKEN}&y=$TOKEN&z={TOKEN}", values.get) == "https://api.example/v1?x=t0k3n&y=$TOKEN&z={TOKEN}"
    assert expand("no references", lambda n: pytest.fail("no lookup without a reference")) == "no references"
    assert references("Bearer ${A} ${B_2} ${A} ${1X}") == ["A", "B_2"]


def test_an_unresolvable_reference_names_the_variable_never_a_value():
    with pytest.raises(UnresolvedSecret) as info:
        expand("${BASE}/x?key=${MISSING_KEY}", {"BASE": "https://secret-host.example"}.get)
    assert info.value.name == "MISSING_KEY" and isinstance(info.value, ConfigError)
    assert "${MISSING_KEY}" in str(info.value) and "secret-host" not in str(info.value)


def test_env_first_then_ssm_below_the_path_cached_for_a_while():
    reader = Reader({"/pf/routes/TOKEN": "from-ssm"})
    clock = Clock()
    r = resolver(reader, env={"BASE": "https://b.example"}, monotonic=clock, ttl_s=300)
    assert r.lookup("BASE") == "https://b.example" and reader.calls == []
    assert r.lookup("TOKEN") == "from-ssm" and r.lookup("TOKEN") == "from-ssm"
    assert reader.calls == ["/pf/routes/TOKEN"]
    reader.values["/pf/routes/TOKEN"] = "rotated"
    clock.t += 301
    assert r.lookup("TOKEN") == "rotated"  # a rotation is picked up after the cache time


def test_a_miss_is_not_cached_so_a_new_parameter_is_found_at_once():
    reader = Reader({})
    r = resolver(reader)
    assert r.lookup("LATE") is None
    reader.values["/pf/routes/LATE"] = "now-there"
    assert r.lookup("LATE") == "now-there"
    assert reader.calls == ["/pf/routes/LATE", "/pf/routes/LATE"]


def test_a_transient_failure_is_retried_and_never_cached_as_no_secret():
    reader = Reader({"/pf/routes/TOKEN": "value"}, script=[RuntimeError("ThrottlingException")])
    r = resolver(reader)
    assert r.lookup("TOKEN") == "value"  # second try within the same lookup
    assert len(reader.calls) == 2
    down = Reader(script=[RuntimeError("EndpointConnectionError")] * 3)
    r = resolver(down, attempts=3)
    with pytest.raises(SecretStoreUnavailable) as info:
        r.lookup("TOKEN")
    assert "/pf/routes/TOKEN" in str(info.value) and len(down.calls) == 3
    down.values["/pf/routes/TOKEN"] = "back"
    assert r.lookup("TOKEN") == "back"  # nothing was remembered from the outage


def test_runtime_variables_are_never_read_from_env():
    reader = Reader({})
    r = resolver(reader, env={"AWS_SECRET_ACCESS_KEY": "lambda-creds", "AWS_SESSION_TOKEN": "x"})
    assert r.lookup("AWS_SECRET_ACCESS_KEY") is None
    assert reader.calls == ["/pf/routes/AWS_SECRET_ACCESS_KEY"]


def test_without_a_path_only_env_is_consulted():
    r = SecretResolver(env={"A": "1"}, reader=lambda n: pytest.fail("no SSM without RouteSecretsPath"), path="")
    assert r.lookup("A") == "1" and r.lookup("B") is None


def test_expander_scrubs_the_values_it_substituted():
    e = Expander({"TOKEN": "sekrit-123", "BASE": "https://h.example"}.get, where="route r")
    assert e("Bearer ${TOKEN}") == "Bearer sekrit-123"
    assert e.scrub("401: bad token sekrit-123 for Bearer sekrit-123") == "401: bad token ${TOKEN} for Bearer ${TOKEN}"
    with pytest.raises(UnresolvedSecret) as info:
        e("${NOPE}")
    assert "route r" in str(info.value) and "${NOPE}" in str(info.value)


def test_ssm_reader_tells_a_missing_parameter_from_an_outage(monkeypatch):
    with mock_aws():
        import boto3

        boto3.client("ssm", region_name="us-east-1").put_parameter(Name="/pf/routes/T", Value="v", Type="SecureString")
        assert ssm_reader("/pf/routes/T") == "v"
        assert ssm_reader("/pf/routes/NOT_THERE") is None
    monkeypatch.setenv("AWS_ENDPOINT_URL_SSM", "http://127.0.0.1:1")  # nothing listens: an outage, not a miss
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    with pytest.raises(Exception) as info:  # raised, never answered as "no such parameter"
        ssm_reader("/pf/routes/T")
    assert "ParameterNotFound" not in str(info.value)


# -- bearer tokens of the HTTP surface (adapters/secret_store.SecretStore) --------------------------------------------


def test_a_transient_failure_on_a_token_fails_closed_for_that_request_only():
    reader = Reader({"/pf/trigger": "trigger-secret"}, script=[RuntimeError("Throttling")] * 3)
    secrets = SecretStore(reader, env={"TRIGGER_TOKEN_PARAMETER": "/pf/trigger"}, attempts=3, sleep=lambda s: None)
    assert secrets.token(TRIGGER) is None  # three failures: this request is refused ...
    assert check_bearer({"authorization": "Bearer trigger-secret"}, secrets.token(TRIGGER)) is None  # ... the next reads again
    assert reader.calls == ["/pf/trigger"] * 4
    assert secrets.token(TRIGGER) == "trigger-secret" and len(reader.calls) == 4  # cached once read


def test_a_single_transient_failure_is_absorbed_by_the_retry():
    reader = Reader({"/pf/jobs": "jobs-secret"}, script=[RuntimeError("Throttling")])
    secrets = SecretStore(reader, env={"JOBS_TOKEN_PARAMETER": "/pf/jobs"}, sleep=lambda s: None)
    assert secrets.token(JOBS) == "jobs-secret" and len(reader.calls) == 2


def test_a_missing_token_parameter_is_asked_again_after_a_minute():
    reader = Reader({})
    clock = Clock()
    secrets = SecretStore(reader, env={"JOBS_TOKEN_PARAMETER": "/pf/jobs"}, sleep=lambda s: None, monotonic=clock)
    assert secrets.token(JOBS) is None and secrets.token(JOBS) is None
    assert check_bearer({}, secrets.token(JOBS)) == NOT_CONFIGURED
    assert reader.calls == ["/pf/jobs"]
    reader.values["/pf/jobs"] = "created-later"
    clock.t += 61
    assert secrets.token(JOBS) == "created-later"


def test_a_route_token_parameter_outage_raises_instead_of_sending_without_credentials():
    from types import SimpleNamespace

    reader = Reader({"/pf/route": "route-secret"}, script=[RuntimeError("Throttling")] * 3)
    secrets = SecretStore(reader, env={}, sleep=lambda s: None)
    route = SimpleNamespace(token=None, tokenParameter="/pf/route")
    with pytest.raises(SecretStoreUnavailable):
        secrets.route_token(route)
    assert secrets.route_token(route) == "route-secret"


def test_secrets_lookup_resolves_route_references_below_route_secrets_path():
    reader = Reader({"/pixivflow/routes/TELEPOST_TOKEN": "tp"})
    secrets = SecretStore(reader, env={"ROUTE_SECRETS_PATH": "/pixivflow/routes/", "BASE": "https://b"}, sleep=lambda s: None)
    assert secrets.lookup("BASE") == "https://b" and secrets.lookup("TELEPOST_TOKEN") == "tp"
