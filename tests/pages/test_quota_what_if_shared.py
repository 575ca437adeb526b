"""The staff quota editor's what-if reads the world as fit previews do: one reading of the queue and the
cluster shared by this process while nothing a page shows changes (FIT_PREVIEW_REUSE), the plan as it is made
once per reading, and the jobs its answer names read from the database."""

from __future__ import annotations

import pytest

from scheduling import preview
from tests.pages.test_fit_preview_shared import WAITS, reads  # noqa: F401  (a fixture)
from tests.pages.test_submit_page import form_data
from tests.page_forms import opened
from tests.pages.test_team_pages import quota_post

pytestmark = pytest.mark.django_db


@pytest.fixture
def plans(monkeypatch):
    """The plans the what-ifs make, counted."""
    counted = []
    real = preview.make_plan

    def make_plan(snapshot, **kwargs):
        counted.append(snapshot)
        return real(snapshot, **kwargs)
    monkeypatch.setattr(preview, "make_plan", make_plan)
    return counted


def test_what_ifs_share_one_reading_and_one_plan_as_it_is(login, staff, fill_and_wait, htmx, reads, plans):
    fill_and_wait(2)
    plans.clear()  # those of the submissions' checks (R10)
    client = login(staff)
    first = client.post("/teams/maps/quota/", quota_post(gpu_nominal="10"), **htmx).content.decode()
    again = client.post("/teams/maps/quota/", quota_post(gpu_nominal="10"), **htmx).content.decode()
    assert first == again and "Would keep waiting (2 of maps)" in again
    assert len(reads) == 1
    assert len(plans) == 3  # the plan as it is once, each what-if's own


def test_a_fit_preview_and_a_what_if_share_the_reading(login, staff, fill_and_wait, htmx, reads):
    fill_and_wait(1)
    client = login(staff)
    client.post("/jobs/new/preview/", form_data(**WAITS))
    client.post("/teams/maps/quota/", quota_post(gpu_nominal="10"), **htmx)
    assert len(reads) == 1


def test_a_saved_quota_is_read_by_the_next_what_if(login, staff, fill_and_wait, htmx, reads):
    fill_and_wait(1)
    client = login(staff)
    client.post("/teams/maps/quota/", quota_post(gpu_nominal="10"), **htmx)
    loaded = opened(client, "/teams/maps/quota/")["based_on"]
    assert client.post("/teams/maps/quota/", quota_post(gpu_nominal="9", based_on=loaded)).status_code == 302
    body = client.post("/teams/maps/quota/", quota_post(gpu_nominal="9"), **htmx).content.decode()
    assert len(reads) == 2
    assert "9 GPUs" in body and "No job would change" in body


def test_the_what_if_queries_do_not_grow_with_the_queue(login, staff, fill_and_wait, htmx, django_assert_max_num_queries):
    fill_and_wait(2)
    client = login(staff)
    client.post("/teams/maps/quota/", quota_post(gpu_nominal="10"), **htmx)
    with django_assert_max_num_queries(40) as few:
        client.post("/teams/maps/quota/", quota_post(gpu_nominal="10"), **htmx)
    fill_and_wait(30)
    with django_assert_max_num_queries(len(few)):
        body = client.post("/teams/maps/quota/", quota_post(gpu_nominal="10"), **htmx).content.decode()
    assert "Would keep waiting (10+ of maps)" in body and "waiting-29" not in body  # the first ten are named
