"""Odd bytes in the places an API caller controls get a 400 naming the field, never a 500."""

from __future__ import annotations

import json

import pytest

from jobs.models import Job
from tests.conftest import spec_data


@pytest.fixture
def api(client, owner):
    client.force_login(owner)
    return client


@pytest.mark.parametrize("team", ["ma\x00ps", "MAPS", "m" * 64, "../maps"])
def test_a_team_that_is_not_a_name_is_a_field_error(api, team):
    response = api.post(f"/api/v1/jobs/?team={team}", data=json.dumps(spec_data(team=None) | {"team": None}),
                        content_type="application/json")  # fmt: skip
    assert response.status_code == 400, response.content
    assert "team" in response.json()
    assert not Job.objects.exists()


def test_an_idempotency_key_with_control_characters_is_refused(api):
    response = api.post("/api/v1/jobs/", data=json.dumps(spec_data()), content_type="application/json",
                        HTTP_IDEMPOTENCY_KEY="key\x00one")  # fmt: skip
    assert response.status_code == 400
    assert "Idempotency-Key" in response.json()
    assert not Job.objects.exists()


def test_an_oversized_body_is_a_413_in_json_and_changes_nothing(api):
    body = json.dumps(spec_data()) + " " * (600 * 1024)
    response = api.post("/api/v1/jobs/", data=body, content_type="application/json")
    assert response.status_code == 413
    assert "larger than 512 KiB" in response.json()["detail"]
    assert not Job.objects.exists()
