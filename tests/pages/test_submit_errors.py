"""Errors on the submit form, for every reader: marked fields, fit errors by what causes them, YAML positions."""

from __future__ import annotations

import re

import pytest

from jobs.models import Job
from tests.pages.test_submit_page import form_data

pytestmark = pytest.mark.django_db


def input_tag(body: str, name: str) -> str:
    return re.search(rf'<(?:input|select|textarea)[^>]*name="{re.escape(name)}"[^>]*>', body).group(0)


def test_a_field_with_an_error_is_marked_and_names_its_error(login, owner):
    body = login(owner).post("/jobs/new/", form_data(name="Bad_Name")).content.decode()
    tag = input_tag(body, "name")
    assert 'aria-invalid="true"' in tag and 'aria-describedby="error-name"' in tag
    assert '<div id="error-name" class="field-errors">' in body
    assert 'aria-invalid' not in input_tag(body, "image")


def test_a_replica_field_with_an_error_is_marked(login, owner):
    body = login(owner).post("/jobs/new/", form_data(**{"replicas-0-count": "0"})).content.decode()
    assert 'aria-describedby="error-replicas-0-count"' in input_tag(body, "replicas-0-count")
    assert 'id="error-replicas-0-count"' in body


@pytest.mark.parametrize(("field", "value", "message"), [
    ("replicas-0-memory", "17Ti", "Must be from 0 to 16 TiB, in whole bytes, got &#x27;17Ti&#x27;."),
    ("replicas-0-cpu", "2000", "Must be from 0 to 1024 CPUs, in whole millicores, got &#x27;2000&#x27;."),
], ids=["memory in TiB", "CPU in CPUs"])  # fmt: skip
def test_a_replica_amount_past_its_most_is_refused_naming_the_most_in_its_unit(login, owner, field, value, message):
    response = login(owner).post("/jobs/new/", form_data(**{field: value}))
    body = response.content.decode()
    assert response.status_code == 422 and message in body
    assert "17592186044416" not in body and "1024000" not in body


def test_the_error_summary_can_take_the_focus(login, owner):
    body = login(owner).post("/jobs/new/", form_data(name="Bad_Name")).content.decode()
    assert re.search(r'<p class="error-summary" role="alert" tabindex="-1" data-error-count="1">', body)


def test_a_fit_error_lands_by_the_replica_groups_and_marks_their_sizes(login, owner, cycle):
    cycle()
    response = login(owner).post("/jobs/new/", form_data(**{"replicas-0-count": "3", "replicas-0-gpu": "8"}))
    body = response.content.decode()
    assert response.status_code == 422
    errors = body.split('<div id="replica-errors" class="field-errors">')[1].split("</div>")[0]
    assert "Can never run" in errors
    for name in ("replicas-0-count", "replicas-0-gpu", "replicas-0-cpu", "replicas-0-memory"):
        assert 'aria-describedby="replica-errors"' in input_tag(body, name)
    assert not Job.objects.exists()


def test_a_fit_error_of_a_non_preemptible_tier_lands_by_the_tier(login, owner, cycle):
    cycle()  # production may use nominal only: 12 GPUs > maps' 8
    body = login(owner).post("/jobs/new/", form_data(tier="production", **{"replicas-0-count": "3", "replicas-0-gpu": "4"})).content.decode()
    tier_errors = body.split('<div id="error-tier" class="field-errors">')[1].split("</div>")[0]
    assert "Can never run" in tier_errors
    assert 'aria-describedby="error-tier"' in input_tag(body, "tier")


def test_a_yaml_error_names_its_line_and_column(login, owner, htmx):
    text = "apiVersion: kubeflow.org/v1\nkind: TFJob\nmetadata:\n  name: x: y\n"
    response = login(owner).post("/jobs/new/import/", {"yaml": text, "team": "maps"}, **htmx)
    body = response.content.decode()
    assert response.status_code == 422
    assert "Not valid YAML at line 4, column 10: mapping values are not allowed here" in body
    assert 'aria-describedby="error-yaml"' in input_tag(body, "yaml")


def test_every_page_has_a_skip_link_to_its_content(login, owner, csrf_client):
    for path in ("/", "/jobs/", "/jobs/new/", "/teams/", "/teams/maps/"):
        body = login(owner).get(path).content.decode()
        assert '<a class="skip-link" href="#content">Skip to content</a>' in body
        assert '<main class="page" id="content" tabindex="-1">' in body
    assert "Skip to content" in csrf_client.get("/login/").content.decode()  # signed out too


def test_a_full_queue_is_refused_above_the_form_with_nothing_created(login, owner, settings):
    settings.MAX_QUEUED_PER_TEAM = 1
    client = login(owner)
    assert client.post("/jobs/new/", form_data(name="first")).status_code == 302

    response = client.post("/jobs/new/", form_data(name="second"))

    body = response.content.decode()
    assert response.status_code == 422
    assert ("Team maps already has 1 job queued, the most a team may queue (MAX_QUEUED_PER_TEAM); wait for some "
            "to start or cancel some.") in body  # fmt: skip
    assert list(Job.objects.values_list("name", flat=True)) == ["first"]
