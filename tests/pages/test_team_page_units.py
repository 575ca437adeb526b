"""The team pages write every figure with its unit: the quota history, the list's columns, the summary box."""

from __future__ import annotations

import pytest

from tests.page_forms import opened

pytestmark = pytest.mark.django_db


def test_the_team_page_shows_a_quota_change_in_its_units(login, staff, outsider, maps):
    client = login(staff)
    loaded = opened(client, "/teams/maps/quota/")
    client.post("/teams/maps/quota/", loaded | {"cpu_nominal": "64", "memory_nominal": "512Gi"})
    body = login(outsider).get("/teams/maps/").content.decode()
    assert "cpu nominal no quota -&gt; 64 CPUs" in body and "memory nominal no quota -&gt; 512 GiB" in body
    assert "64000" not in body
