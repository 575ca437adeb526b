"""Flags read strictly: the usual true/false spellings are understood, anything else is a 400 that saves nothing.

`?dry_run=True` once saved the quota change it was meant to preview.
"""

from __future__ import annotations

import json

import pytest

from jobs.spec import SpecError, parse_spec
from tenants.inputs import flag
from tenants.models import AuditEntry, Quota
from tests.conftest import spec_data

CHANGE = json.dumps({"quotas": {"gpu": {"nominal": 3}}})
TRUE = ["true", "True", "TRUE", "1", "yes", "Yes", "on", "ON"]
FALSE = ["false", "False", "0", "no", "NO", "off", "Off"]
NOT_FLAGS = ["null", "maybe", "", "2", "truthy", "none", "t"]


@pytest.fixture
def api(client, staff, maps):
    client.force_login(staff)
    return client


def gpu_nominal() -> int:
    return Quota.objects.get(team__slug="maps", resource="gpu").nominal


@pytest.mark.parametrize("value", TRUE)
def test_every_true_spelling_previews_and_saves_nothing(api, value):
    response = api.patch(f"/api/v1/teams/maps/quota/?dry_run={value}", CHANGE, content_type="application/json")
    assert response.status_code == 200 and response.json()["dry_run"] is True
    assert gpu_nominal() == 8 and not AuditEntry.objects.exists()


@pytest.mark.parametrize("value", FALSE)
def test_every_false_spelling_saves(api, value):
    response = api.patch(f"/api/v1/teams/maps/quota/?dry_run={value}", CHANGE, content_type="application/json")
    assert response.status_code == 200 and "dry_run" not in response.json()
    assert gpu_nominal() == 3


@pytest.mark.parametrize("value", NOT_FLAGS)
def test_anything_else_is_a_400_naming_the_flag_and_saves_nothing(api, value):
    response = api.patch(f"/api/v1/teams/maps/quota/?dry_run={value}", CHANGE, content_type="application/json")
    assert response.status_code == 400
    assert "Must be true or false" in response.json()["dry_run"][0]
    assert gpu_nominal() == 8 and not AuditEntry.objects.exists()


def test_a_bad_flag_is_refused_before_the_body_is_read(api):
    response = api.patch("/api/v1/teams/maps/quota/?dry_run=maybe", "{", content_type="application/json")
    assert response.status_code == 400 and "dry_run" in response.json()


@pytest.mark.parametrize("value, expected", [(True, True), (False, False), ("yes", True), ("Off", False), (" 1 ", True)])
def test_the_spec_reads_its_flag_the_same_way(value, expected):
    spec = parse_spec(spec_data(simulate={"fail": value}), team="maps")
    assert spec.sim_fail is expected


@pytest.mark.parametrize("value", [None, "maybe", 1, 0.0, [], {}])
def test_the_spec_refuses_what_is_not_a_flag(value):
    with pytest.raises(SpecError) as error:
        parse_spec(spec_data(simulate={"fail": value}), team="maps")
    assert "Must be true or false" in error.value.errors["simulate.fail"][0]


def test_the_helper_names_what_it_got():
    assert [flag(word) for word in TRUE] == [True] * len(TRUE)
    assert [flag(word) for word in FALSE] == [False] * len(FALSE)
    with pytest.raises(ValueError, match="got null"):
        flag(None)
