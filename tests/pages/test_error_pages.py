"""Error pages in the site's style, in debug too when DEBUG_ERROR_PAGES is off (the demo)."""

from __future__ import annotations

import html
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import BadRequest, SuspiciousOperation
from django.test import RequestFactory

from portal import views

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]
DEBUG_PAGE = "Using the URLconf defined in"  # Django's debug 404 page lists the URLs it tried


def test_404_is_styled_and_keeps_the_navigation(login, owner):
    response = login(owner).get("/no/such/page/")
    body = response.content.decode()
    assert response.status_code == 404
    assert "Nothing here" in body and 'class="topbar"' in body and "My jobs" in body
    assert "Resolver404" not in body and "tried" not in body


def test_403_is_styled_and_says_why(login, owner, maps):
    response = login(owner).get("/teams/maps/quota/")
    assert response.status_code == 403
    assert "Only admins edit quotas." in response.content.decode()


def test_500_renders_without_a_request_context():
    response = views.server_error(RequestFactory().get("/"))
    assert response.status_code == 500
    assert "Something broke on our side" in response.content.decode()


def test_login_page_is_styled(client):
    body = client.get("/login/").content.decode()
    assert "Log in to Gangway" in body and 'name="csrfmiddlewaretoken"' in body


@pytest.fixture
def as_the_demo(settings, client):
    """Debug with DEBUG_ERROR_PAGES off, as `make demo` runs: the Host header's check first, the error pages' middleware
    last (portal/settings.py)."""
    settings.DEBUG = True
    settings.MIDDLEWARE = ["portal.middleware.product_bad_host_page", *settings.MIDDLEWARE,
                           "portal.middleware.ProductErrorPages"]  # fmt: skip
    client.raise_request_exception = False
    return client


def test_the_demo_answers_an_unknown_address_with_the_styled_404(as_the_demo, owner):
    as_the_demo.force_login(owner)
    response = as_the_demo.get("/no/such/page/")
    body = response.content.decode()

    assert response.status_code == 404
    assert "Nothing here" in body and 'class="topbar"' in body and DEBUG_PAGE not in body


def test_the_demo_answers_a_view_that_finds_nothing_with_the_styled_404(as_the_demo, owner):
    as_the_demo.force_login(owner)
    response = as_the_demo.get("/jobs/987654/")

    assert response.status_code == 404 and "Nothing here" in response.content.decode()


def test_the_demo_still_adds_a_missing_slash(as_the_demo, owner):
    as_the_demo.force_login(owner)
    response = as_the_demo.get("/jobs")

    assert response.status_code == 301 and response["Location"] == "/jobs/"


def test_the_demo_answers_an_error_with_the_styled_500_and_logs_its_traceback(as_the_demo, owner, monkeypatch,
                                                                             caplog):
    as_the_demo.force_login(owner)
    monkeypatch.setattr("jobs.views.jobs_for", lambda user: 1 / 0)
    response = as_the_demo.get("/jobs/")

    assert response.status_code == 500 and "Something broke on our side" in response.content.decode()
    errors = [record for record in caplog.records if record.name == "django.request" and record.levelname == "ERROR"]
    assert [record.getMessage() for record in errors] == ["Internal Server Error: /jobs/"]
    assert errors[0].exc_info[0] is ZeroDivisionError


def test_the_demo_answers_an_api_error_in_json(as_the_demo, owner, monkeypatch):
    as_the_demo.force_login(owner)
    monkeypatch.setattr("jobs.api.visible_jobs", lambda request: 1 / 0)
    response = as_the_demo.get("/api/v1/jobs/")

    assert response.status_code == 500 and response.json()["detail"].startswith("The server failed")


def test_the_demo_answers_a_bad_host_with_the_styled_400_and_logs_it_as_django_does(as_the_demo, caplog):
    response = as_the_demo.get("/jobs/", HTTP_HOST="gangway.attacker.example")
    body = response.content.decode()

    assert response.status_code == 400 and "This address cannot be read" in body and "Traceback" not in body
    (logged,) = [record for record in caplog.records if record.name == "django.security.DisallowedHost"]
    assert "gangway.attacker.example" in logged.getMessage()


def test_the_demo_answers_a_bad_host_under_the_api_in_json(as_the_demo):
    response = as_the_demo.get("/api/v1/jobs/", HTTP_HOST="gangway.attacker.example")

    assert response.status_code == 400 and response.json()["detail"].startswith("The request's Host header")


@pytest.mark.parametrize("refusal", [BadRequest("The filter cannot be read."), SuspiciousOperation("A forged value.")],
                         ids=["a bad request", "a suspicious one"])  # fmt: skip
def test_the_demo_answers_a_request_a_view_refuses_with_the_styled_400(as_the_demo, owner, monkeypatch, refusal):
    as_the_demo.force_login(owner)

    def refuse(user):
        raise refusal

    monkeypatch.setattr("jobs.views.jobs_for", refuse)
    response = as_the_demo.get("/jobs/")

    assert response.status_code == 400 and "This address cannot be read" in response.content.decode()
    assert "Traceback" not in response.content.decode()


ASK_FOR_NOTHING = """
import json
import django
django.setup()
from django.test import Client
response = Client().get("/no/such/page/")
print(json.dumps({"status": response.status_code, "body": response.content.decode()}))
"""


@pytest.mark.parametrize(("pages", "debug_page"), [("0", False), (None, True)],
                         ids=["off: the portal's, as in the demo", "by default: Django's"])  # fmt: skip
def test_debug_error_pages_chooses_the_404_page_debug_shows(tmp_path, pages, debug_page):
    keep = {key: value for key, value in os.environ.items() if not key.startswith(("DATABASE_", "CELERY_", "DJANGO_"))}
    env = {**keep, "DJANGO_SETTINGS_MODULE": "portal.settings", "DJANGO_DEBUG": "1", "GANGWAY_VAR_DIR": str(tmp_path),
           "ALLOWED_HOSTS": "testserver"}  # fmt: skip
    env.pop("DEBUG_ERROR_PAGES", None)
    if pages is not None:
        env["DEBUG_ERROR_PAGES"] = pages
    run = subprocess.run([sys.executable, "-c", ASK_FOR_NOTHING], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    answer = json.loads(run.stdout.strip().splitlines()[-1])

    assert answer["status"] == 404
    assert (DEBUG_PAGE in answer["body"]) is debug_page and ("Nothing here" in answer["body"]) is not debug_page


# Serves as the demo's web server does: runserver with the options deploy/demo.sh gives it, on the demo's settings.
AS_THE_DEMO_SERVES = """
import json, shlex
import django
django.setup()
from django.contrib.staticfiles.management.commands.runserver import Command
from django.test import RequestFactory
line = next(line for line in open("deploy/demo.sh") if "manage.py runserver" in line)
flags = [word for word in shlex.split(line.split("runserver", 1)[1].split(">")[0]) if word.startswith("--")]
command = Command()
handler = command.get_handler(**vars(command.create_parser("manage.py", "runserver").parse_args(flags)))
answers = {}
for path, host in (("/static/nope.css", "testserver"), ("/static/css/gangway.css", "testserver"),
                   ("/jobs/", "gangway.attacker.example"), ("/api/v1/jobs/", "gangway.attacker.example")):
    said = []
    body = b"".join(handler(RequestFactory().get(path, HTTP_HOST=host).environ, lambda status, headers: said.append(status)))
    answers[path] = {"status": int(said[0].split()[0]), "body": body.decode()}
print(json.dumps(answers))
"""


def test_the_demos_server_answers_a_missing_static_file_and_a_bad_host_with_the_portals_pages(tmp_path):
    keep = {key: value for key, value in os.environ.items() if not key.startswith(("DATABASE_", "CELERY_", "DJANGO_"))}
    env = {**keep, "DJANGO_SETTINGS_MODULE": "portal.settings", "DJANGO_DEBUG": "1", "DEBUG_ERROR_PAGES": "0",
           "GANGWAY_VAR_DIR": str(tmp_path), "ALLOWED_HOSTS": "testserver"}  # fmt: skip
    run = subprocess.run([sys.executable, "-c", AS_THE_DEMO_SERVES], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    answers = json.loads(run.stdout.strip().splitlines()[-1])

    missing, there = answers["/static/nope.css"], answers["/static/css/gangway.css"]
    assert missing["status"] == 404 and "Nothing here" in missing["body"] and "Page not found" not in missing["body"]
    assert there["status"] == 200 and there["body"].strip()
    page, api = answers["/jobs/"], answers["/api/v1/jobs/"]
    assert page["status"] == 400 and "This address cannot be read" in page["body"] and "Traceback" not in page["body"]
    assert api["status"] == 400 and json.loads(api["body"])["detail"].startswith("The request's Host header")


def test_a_signed_out_visitors_404_asks_them_to_sign_in(client):
    body = html.unescape(client.get("/no/such/page/").content.decode())
    assert "Check the address, or sign in: a team's jobs and pages show only to its people." in body
    assert 'href="/login/?next=/no/such/page/"' in body
    assert "a team you are not in" not in body and "your list" not in body


def test_a_job_not_found_points_to_the_list_of_jobs(login, owner):
    response = login(owner).get("/jobs/987654/")
    body = response.content.decode()
    assert response.status_code == 404
    assert "No such job. Check the address, or find the job in your list." in body


def test_a_team_not_found_points_to_the_list_of_teams(login, owner):
    body = login(owner).get("/teams/no-such-team/").content.decode()
    assert "No such team. Check the address, or find the team in the list of teams." in body
    assert 'class="button primary" href="/teams/">Teams</a>' in body and "the job" not in body


def test_a_sweep_not_found_points_to_its_teams_page(login, owner):
    body = html.unescape(login(owner).get("/jobs/sweeps/987654/").content.decode())
    assert "No such sweep. Check the address, or find the sweep on its team's page." in body
    assert "the job" not in body


def test_an_unknown_address_signed_in_asks_only_to_check_it(login, owner):
    body = login(owner).get("/no/such/page/").content.decode()
    assert "This page does not exist. Check the address." in body


def test_opening_a_jobs_cancel_address_answers_the_portals_405_with_a_link_back(login, owner, submit):
    job = submit(name="kept")
    response = login(owner).get(f"/jobs/{job.pk}/cancel/")
    body = html.unescape(response.content.decode())
    assert response.status_code == 405 and response["Allow"] == "POST"
    assert "This address takes a form's post, sent by a button on the job's page; opening it changes nothing." in body
    assert f'href="/jobs/{job.pk}/">Back to the job</a>' in body and 'class="topbar"' in body
    job.refresh_from_db()
    assert job.state == "queued"


def test_the_demo_answers_a_get_of_a_cancel_with_the_portals_405(as_the_demo, owner, submit):
    job = submit(name="kept")
    as_the_demo.force_login(owner)
    response = as_the_demo.get(f"/jobs/{job.pk}/cancel/")
    assert response.status_code == 405 and response["Allow"] == "POST" and "Back to the job" in response.content.decode()
