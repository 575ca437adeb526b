"""Pages that submit are cheap to refuse: a capped formset, and a per-user rate limit answering 429 with Retry-After.

`replicas-TOTAL_FORMS=100000` once made Django build 1,005 forms (seconds of CPU) per post.
"""

from __future__ import annotations


import pytest
from django.core.cache import caches

from jobs.models import Job
from tests.pages.test_submit_page import TFJOB, form_data

PAGES = {
    "the submit form": ("/jobs/new/", form_data),
    "the fit preview": ("/jobs/new/preview/", form_data),
    "the YAML import": ("/jobs/new/import/", lambda: {"yaml": TFJOB, "team": "maps"}),
}


@pytest.fixture
def api(client, owner):
    client.force_login(owner)
    return client


@pytest.fixture
def three_a_minute(settings):
    settings.PAGE_RATE = "3/min"
    settings.CACHES = {**settings.CACHES, "throttle": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache",
                                                       "LOCATION": "page-limits"}}  # fmt: skip
    caches["throttle"].clear()
    yield
    caches["throttle"].clear()


@pytest.mark.parametrize("url", ["/jobs/new/", "/jobs/new/preview/", "/jobs/new/import/"])
def test_a_huge_form_count_builds_no_more_forms_than_the_cap(api, url, monkeypatch):
    from django.forms import formsets

    built = []
    real = formsets.BaseFormSet._construct_form
    monkeypatch.setattr(formsets.BaseFormSet, "_construct_form",
                        lambda self, i, **kwargs: built.append(i) or real(self, i, **kwargs))  # fmt: skip
    data = {**form_data(), "replicas-TOTAL_FORMS": "100000", "yaml": "kind: ["}
    response = api.post(url, data)
    assert len(built) <= 10, f"{len(built)} forms built for a count of 100000"
    assert response.status_code in (200, 422) and not Job.objects.exists()


def test_the_form_says_how_many_groups_a_job_may_have(api):
    response = api.post("/jobs/new/", {**form_data(), "replicas-TOTAL_FORMS": "100000"})
    assert response.status_code == 422
    assert "Please submit at most 5 forms." in response.content.decode()


@pytest.mark.parametrize("url, data", PAGES.values(), ids=PAGES.keys())
def test_posts_beyond_the_rate_get_a_429_page_with_retry_after(api, three_a_minute, url, data):
    answers = [api.post(url, data()) for _ in range(4)]
    assert [answer.status_code == 429 for answer in answers] == [False, False, False, True]
    response = answers[-1]
    assert response.status_code == 429
    assert int(response["Retry-After"]) >= 1
    body = response.content.decode()
    assert "Too many requests" in body and "3/min" in body and "Try again in" in body


def test_an_htmx_post_beyond_the_rate_gets_a_fragment_for_the_alert_line(api, three_a_minute):
    for _ in range(3):
        api.post("/jobs/new/preview/", form_data(), HTTP_HX_REQUEST="true")
    response = api.post("/jobs/new/preview/", form_data(), HTTP_HX_REQUEST="true")
    assert response.status_code == 429 and response["HX-Retarget"] == "#page-alert"
    assert response.content.decode().startswith('<p class="error-summary" role="alert">Too many submissions')


def test_nothing_is_submitted_beyond_the_rate(api, three_a_minute):
    for _ in range(5):
        api.post("/jobs/new/", form_data())
    assert Job.objects.count() == 3


def test_the_rate_is_per_user(client, owner, member, three_a_minute):
    client.force_login(owner)
    for _ in range(4):
        client.post("/jobs/new/preview/", form_data())
    client.force_login(member)
    assert client.post("/jobs/new/preview/", form_data()).status_code == 200


def test_pages_are_still_read_freely(api, three_a_minute):
    for _ in range(4):
        api.post("/jobs/new/preview/", form_data())
    assert api.get("/jobs/new/").status_code == 200


def test_the_quota_editor_is_limited_too(client, staff, maps, three_a_minute):
    client.force_login(staff)
    for _ in range(3):
        client.post("/teams/maps/quota/", {"weight": "1", "gpu_nominal": "8"}, HTTP_HX_REQUEST="true")
    response = client.post("/teams/maps/quota/", {"weight": "1", "gpu_nominal": "9"})
    assert response.status_code == 429
