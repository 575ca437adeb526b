"""Production settings: headers on pages and API answers, login lockout, `check --deploy` clean."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import override_settings

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = dict(SECURE_SSL_REDIRECT=True, SESSION_COOKIE_SECURE=True, CSRF_COOKIE_SECURE=True,
                  SECURE_HSTS_SECONDS=31_536_000)  # fmt: skip


def assert_hardened(response) -> None:
    csp = response["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp.split(
        "style-src-attr")[0]
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"
    assert response["Strict-Transport-Security"].startswith("max-age=31536000")


@override_settings(**PRODUCTION)
def test_a_page_carries_the_security_headers(client, owner):
    client.force_login(owner)
    response = client.get("/", secure=True)
    assert response.status_code == 200
    assert_hardened(response)


@override_settings(**PRODUCTION)
def test_an_api_answer_carries_the_security_headers(client, owner):
    client.force_login(owner)
    response = client.get("/api/v1/jobs/", secure=True)
    assert response.status_code == 200
    assert_hardened(response)


@override_settings(**PRODUCTION)
def test_plain_http_is_redirected_but_probes_are_not(client, db):
    assert client.get("/login/").status_code == 301
    assert client.get("/healthz").status_code == 200


@override_settings(**PRODUCTION)
def test_session_cookies_are_secure_and_http_only(client, owner):
    response = client.post("/login/", {"username": "owner", "password": "pw"}, secure=True)
    cookie = response.cookies["sessionid"]
    assert cookie["secure"] and cookie["httponly"]


def test_pages_carry_no_inline_scripts():
    """The policy forbids inline scripts, so no template may need one."""
    for template in (ROOT / "templates").rglob("*.html"):
        text = template.read_text()
        for opening in text.split("<script")[1:]:
            assert "src=" in opening.split(">")[0], f"inline script in {template.relative_to(ROOT)}"
        assert " onclick=" not in text and " onload=" not in text, template


@pytest.mark.django_db
@override_settings(AXES_ENABLED=True, AXES_FAILURE_LIMIT=3)
def test_repeated_failed_logins_lock_the_account_out(client, owner):
    from axes.models import AccessAttempt

    for _ in range(3):
        client.post("/login/", {"username": "owner", "password": "wrong"})
    locked = client.post("/login/", {"username": "owner", "password": "pw"})
    assert locked.status_code == 429
    assert "Too many failed logins" in locked.content.decode()
    assert "_auth_user_id" not in client.session
    attempt = AccessAttempt.objects.get(username="owner")
    assert attempt.failures_since_start >= 3


@pytest.mark.django_db
@override_settings(AXES_ENABLED=True, AXES_FAILURE_LIMIT=3)
def test_staff_see_lockouts_in_the_admin(client, owner):
    for _ in range(3):
        client.post("/login/", {"username": "owner", "password": "wrong"})
    staff = get_user_model().objects.create_superuser("root", "r@example.com", "pw")
    client.force_login(staff)
    page = client.get("/admin/axes/accessattempt/")
    assert page.status_code == 200 and "owner" in page.content.decode()


def test_check_deploy_reports_nothing_with_debug_off(tmp_path):
    env = {"PATH": os.environ["PATH"], "DJANGO_SETTINGS_MODULE": "portal.settings", "GANGWAY_VAR_DIR": str(tmp_path),
           "SECRET_KEY": "k" * 20 + "-7f3a9c2e51b84d06a1e9c3f7b25d8e4a-not-a-real-secret-but-long-and-varied",
           "ALLOWED_HOSTS": "gangway.example.com", "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/postgres"}  # fmt: skip
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout
