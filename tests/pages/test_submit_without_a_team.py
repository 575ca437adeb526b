"""One signed in but in no team cannot submit a job: no page offers them "Submit a job" as if they could. The
header draws it disabled, the dashboard and My jobs say whom to ask in its place, and the submit page says so
instead of a form that cannot be sent."""

from __future__ import annotations

import pytest

from jobs.models import Job
from tenants.models import Team
from tests.conftest import make_user
from tests.pages.test_submit_page import form_data

pytestmark = pytest.mark.django_db

ASK = "You are in no team yet, so you cannot submit jobs: ask an admin to add you to one."
SUBMIT_LINK = 'href="/jobs/new/"'


@pytest.fixture
def loner(maps):
    return make_user("loner")


@pytest.mark.parametrize("path", ["/", "/jobs/", "/teams/maps/"])
def test_no_page_links_one_in_no_team_to_the_submit_form(login, loner, path):
    body = login(loner).get(path).content.decode()
    assert SUBMIT_LINK not in body and 'href="/jobs/new/?team=' not in body
    assert '<span class="nav-cta off" aria-disabled="true" title="' + ASK + '">+ Submit job</span>' in body


@pytest.mark.parametrize("path", ["/", "/jobs/"])
def test_the_dashboard_and_my_jobs_say_whom_to_ask_in_place_of_the_button(login, loner, path):
    body = login(loner).get(path).content.decode()
    assert f'<p class="muted no-team">{ASK}</p>' in body


def test_my_jobs_empty_says_no_jobs_without_offering_to_submit_one(login, loner):
    body = login(loner).get("/jobs/").content.decode()
    assert '<p class="empty">No jobs yet.</p>' in body


def test_the_submit_page_says_whom_to_ask_instead_of_a_form(login, loner):
    response = login(loner).get("/jobs/new/")
    body = response.content.decode()
    assert response.status_code == 200
    assert f'<p class="notice" id="no-team">{ASK}' in body
    assert 'id="job-form"' not in body


def test_a_post_from_one_in_no_team_is_refused_with_the_same_sentence(login, loner):
    response = login(loner).post("/jobs/new/", form_data())
    assert response.status_code == 403 and ASK in response.content.decode()
    assert not Job.objects.exists()


def test_a_member_still_has_the_button_the_link_and_the_form(login, owner):
    client = login(owner)
    for path in ("/", "/jobs/"):
        body = client.get(path).content.decode()
        assert '<a class="nav-cta" href="/jobs/new/"' in body and "no-team" not in body
    assert 'id="job-form"' in client.get("/jobs/new/").content.decode()


def test_staff_in_no_team_may_submit_for_any(login, staff, maps):
    body = login(staff).get("/").content.decode()
    assert '<a class="nav-cta" href="/jobs/new/"' in body and ASK not in body


def test_staff_are_told_to_create_a_team_first_when_there_is_none(login, staff):
    Team.objects.all().delete()
    body = login(staff).get("/jobs/new/").content.decode()
    assert "none exists yet: create one in the" in body and 'id="job-form"' not in body
