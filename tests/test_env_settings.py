"""Settings read from the environment fail loudly, naming the variable."""

from __future__ import annotations

import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from portal import env


@pytest.mark.parametrize(
    ("reader", "value", "fragment"),
    [
        (lambda: env.flag("X_FLAG", False), "maybe", "X_FLAG must be one of"),
        (lambda: env.integer("X_INT", 1), "ten", "X_INT must be a whole number"),
        (lambda: env.integer("X_INT", 1, minimum=1), "0", "X_INT must be at least 1"),
        (lambda: env.number("X_NUMBER", 1), "5s", "X_NUMBER must be a number, got '5s'"),
        (lambda: env.choice("X_CHOICE", "a", ("a", "b")), "c", "X_CHOICE must be one of a, b"),
    ],
)
def test_a_bad_value_names_the_variable(monkeypatch, reader, value, fragment):
    monkeypatch.setenv(fragment.split()[0], value)
    with pytest.raises(ImproperlyConfigured, match=fragment):
        reader()


def test_a_secret_can_come_from_a_file(monkeypatch, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("s3cret\n")
    monkeypatch.setenv("X_SECRET_FILE", str(secret))
    assert env.text("X_SECRET") == "s3cret"


def test_settings_refuse_to_start_without_a_secret_key_outside_debug(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", "import django; from django.conf import settings; settings.INSTALLED_APPS"],
        env={"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "portal.settings", "GANGWAY_VAR_DIR": str(tmp_path)},
        capture_output=True, text=True, cwd=str(__import__("pathlib").Path(__file__).parent.parent),
    )  # fmt: skip
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


def test_an_unknown_cluster_backend_is_refused(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", "from django.conf import settings; settings.INSTALLED_APPS"],
        env={"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "portal.settings", "DJANGO_DEBUG": "1",
             "CLUSTER_BACKEND": "nomad", "GANGWAY_VAR_DIR": str(tmp_path)},
        capture_output=True, text=True, cwd=str(__import__("pathlib").Path(__file__).parent.parent),
    )  # fmt: skip
    assert "CLUSTER_BACKEND must be one of simulated, kubernetes, got 'nomad'" in result.stderr


@pytest.mark.parametrize(("value", "said"), [
    ("five percent", "SIM_FAILURE_RATE must be a number, got 'five percent'."),
    ("1.5", "SIM_FAILURE_RATE must be between 0 and 1, got 1.5."),
])
def test_a_bad_simulated_failure_rate_is_refused_naming_the_variable(tmp_path, value, said):
    result = subprocess.run(
        [sys.executable, "-c", "from django.conf import settings; settings.INSTALLED_APPS"],
        env={"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "portal.settings", "DJANGO_DEBUG": "1",
             "SIM_FAILURE_RATE": value, "GANGWAY_VAR_DIR": str(tmp_path)},
        capture_output=True, text=True, cwd=str(__import__("pathlib").Path(__file__).parent.parent),
    )  # fmt: skip
    assert result.returncode != 0
    assert said in result.stderr


def test_demo_traffic_is_refused_on_a_real_cluster(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", "from django.conf import settings; settings.INSTALLED_APPS"],
        env={"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "portal.settings", "DJANGO_DEBUG": "1",
             "CLUSTER_BACKEND": "kubernetes", "DEMO_TRAFFIC": "40", "GANGWAY_VAR_DIR": str(tmp_path)},
        capture_output=True, text=True, cwd=str(__import__("pathlib").Path(__file__).parent.parent),
    )  # fmt: skip
    assert "DEMO_TRAFFIC submits made-up jobs: it runs on the simulated cluster only" in result.stderr


SSO = {"OIDC_RP_CLIENT_ID": "gangway", "OIDC_RP_CLIENT_SECRET": "s", "OIDC_OP_AUTHORIZATION_ENDPOINT": "http://idp/auth",
       "OIDC_OP_TOKEN_ENDPOINT": "http://idp/token", "OIDC_OP_USER_ENDPOINT": "http://idp/user",
       "OIDC_OP_JWKS_ENDPOINT": "http://idp/jwks"}  # fmt: skip


@pytest.mark.parametrize(
    ("group_map", "answer"),
    [("ml=maps:lead, ops=staff", "started"), ("ml=maps:owner", "OIDC_GROUP_MAP entry 'ml=maps:owner' must be")],
)
def test_settings_with_single_sign_on_start_and_check_the_group_map_before_any_model_loads(
        tmp_path, group_map, answer):
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup(); print('started')"],
        env={"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "portal.settings", "DJANGO_DEBUG": "1",
             "GANGWAY_VAR_DIR": str(tmp_path), "OIDC_GROUP_MAP": group_map, **SSO},
        capture_output=True, text=True, cwd=str(__import__("pathlib").Path(__file__).parent.parent),
    )  # fmt: skip
    assert answer in result.stdout + result.stderr
    assert "AppRegistryNotReady" not in result.stderr


@pytest.mark.parametrize(
    ("url", "flag", "options"),
    [
        ("postgres://postgres@127.0.0.1:5432/gangway", None, {"server_side_binding": True, "prepare_threshold": 5}),
        ("postgres://postgres@127.0.0.1:5432/gangway", "0", {}),
        ("sqlite:///demo.sqlite3", None, "sqlite"),
    ],
    ids=["postgresql prepares repeated statements", "unless turned off for a pooler", "sqlite keeps its own options"],
)
def test_database_options(tmp_path, url, flag, options):
    env = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "portal.settings", "DJANGO_DEBUG": "1",
           "GANGWAY_VAR_DIR": str(tmp_path), "DATABASE_URL": url}  # fmt: skip
    if flag is not None:
        env["DATABASE_PREPARED_STATEMENTS"] = flag
    script = "from django.conf import settings; print(settings.DATABASES['default'].get('OPTIONS', {}))"
    result = subprocess.run(
        [sys.executable, "-c", script],
        env=env, capture_output=True, text=True, cwd=str(__import__("pathlib").Path(__file__).parent.parent),
        check=True,
    )  # fmt: skip
    printed = result.stdout.strip()
    if options == "sqlite":
        assert "transaction_mode" in printed and "server_side_binding" not in printed
    else:
        assert printed == str(options)


@pytest.mark.parametrize(
    "broker",
    ["redis://redis.example.com:6379/0", "rediss://redis.example.com:6380/0?ssl_cert_reqs=required"],
    ids=["redis", "redis over TLS"],
)
def test_every_shared_cache_is_in_the_brokers_redis(tmp_path, broker):
    """Throttle counts, a job's shared log reads and the worker's task-failure counts for /metrics live in the
    broker's Redis when no REDIS_URL is given; elsewhere each process would keep its own, silently."""
    env = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "portal.settings", "DJANGO_DEBUG": "1",
           "GANGWAY_VAR_DIR": str(tmp_path), "CELERY_BROKER_URL": broker}  # fmt: skip
    script = ("from django.conf import settings; "
              "print(sorted({settings.CACHES[name]['LOCATION'] for name in ('throttle', 'logs', 'metrics')}))")
    result = subprocess.run(
        [sys.executable, "-c", script],
        env=env, capture_output=True, text=True, cwd=str(__import__("pathlib").Path(__file__).parent.parent),
        check=True,
    )  # fmt: skip
    assert result.stdout.strip() == str([broker])
