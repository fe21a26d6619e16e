"""Bearer tokens from env or from SSM by name (DESIGN §8, §12): read once, fail closed, constant-time."""

from types import SimpleNamespace

from pixivflow.adapters.secret_store import SecretStore
from pixivflow.http.auth import JOBS, NOT_CONFIGURED, TRIGGER, check_bearer


class Reader:
    def __init__(self, values):
        self.values, self.calls = values, []

    def __call__(self, name):
        self.calls.append(name)
        return self.values.get(name)


def test_env_token_wins_and_is_trimmed():
    reader = Reader({"/pf/trigger": "from-ssm"})
    secrets = SecretStore(reader, env={"TRIGGER_TOKEN": "  from-env \n", "TRIGGER_TOKEN_PARAMETER": "/pf/trigger"})
    assert secrets.token(TRIGGER) == "from-env"
    assert reader.calls == []


def test_parameter_is_read_once_per_cold_start():
    reader = Reader({"/pf/jobs": "jobs-secret"})
    secrets = SecretStore(reader, env={"JOBS_TOKEN_PARAMETER": "/pf/jobs"})
    assert secrets.token(JOBS) == "jobs-secret"
    assert secrets.token(JOBS) == "jobs-secret"
    assert reader.calls == ["/pf/jobs"]


def test_a_missing_or_blank_token_fails_closed():
    secrets = SecretStore(Reader({"/pf/blank": "   "}), env={"TRIGGER_TOKEN_PARAMETER": "/pf/blank"})
    assert secrets.token(TRIGGER) is None
    assert secrets.token(JOBS) is None
    assert check_bearer({"authorization": "Bearer anything"}, secrets.token(TRIGGER)) == NOT_CONFIGURED


def test_bearer_scheme_is_case_insensitive_and_the_token_exact():
    assert check_bearer({"Authorization": "Bearer s3cret"}, "s3cret") is None
    assert check_bearer({"authorization": "bearer s3cret"}, "s3cret") is None  # RFC 9110 §11.1 (issue 17)
    assert check_bearer({"authorization": "BEARER s3cret"}, "s3cret") is None
    assert check_bearer({"authorization": "Bearer S3CRET"}, "s3cret").status == 401
    assert check_bearer({"authorization": "Bearer \ud800"}, "s3cret").status == 401  # never an encoding crash
    assert check_bearer({"authorization": "Bearers3cret"}, "s3cret").status == 401
    assert check_bearer({"authorization": "Bearer s3cre"}, "s3cret").status == 401
    assert check_bearer({}, "s3cret").status == 401


def test_route_token_from_config_or_from_a_parameter():
    reader = Reader({"/pf/route": "route-secret"})
    secrets = SecretStore(reader, env={})
    assert secrets.route_token(SimpleNamespace(token="inline", tokenParameter=None)) == "inline"
    route = SimpleNamespace(token=None, tokenParameter="/pf/route")
    assert secrets.route_token(route) == "route-secret"
    assert secrets.route_token(route) == "route-secret"
    assert reader.calls == ["/pf/route"]
    assert secrets.route_token(SimpleNamespace(token=None, tokenParameter=None)) is None
