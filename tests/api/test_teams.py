"""GET /api/v1/teams/, /teams/{slug}/ and /cluster/; PUT/PATCH /teams/{slug}/quota/ for staff."""

import pytest

from tenants.models import AuditEntry, Quota
from tests.api.conftest import PERSONAS

TEAM_STATUS = {
    "owner": 200, "member": 200, "lead": 200, "outsider": 404, "staff": 200,
    "maps_token": 200, "vision_token": 404, "revoked_token": 401, "anonymous": 401,
}  # fmt: skip
QUOTA_STATUS = {
    "owner": 403, "member": 403, "lead": 403, "outsider": 404, "staff": 200,
    "maps_token": 403, "vision_token": 404, "revoked_token": 401, "anonymous": 401,
}  # fmt: skip


@pytest.mark.parametrize("persona", PERSONAS)
def test_it_shows_a_team_to_its_people_and_token(as_persona, persona):
    response = as_persona(persona).get("/api/v1/teams/maps/")
    assert response.status_code == TEAM_STATUS[persona]


def test_the_team_list_is_scoped(as_persona):
    slugs = lambda persona: [t["slug"] for t in as_persona(persona).get("/api/v1/teams/").json()["results"]]
    assert slugs("member") == ["maps"]
    assert slugs("vision_token") == ["vision"]
    assert slugs("staff") == ["maps", "vision"]


def test_a_team_shows_quota_role_and_usage_as_the_last_cycle_left_it(as_persona, submit, cycle, lead):
    submit(replicas=[{"role": "Worker", "count": 3, "gpu": 4}])  # 12 GPUs: 8 within, 4 borrowed
    cycle()
    body = as_persona("lead").get("/api/v1/teams/maps/").json()
    assert body["role"] == "lead" and body["default_tier"] == "standard"
    assert body["quotas"][0] | {} == {"resource": "gpu", "nominal": 8, "borrowing_limit": 8, "lending_limit": None,
                                      "max_per_replica": 8, "default_per_replica": None}  # fmt: skip
    usage = body["usage"]["gpu"]
    assert (usage["used"], usage["within"], usage["borrowed"]) == (12, 8, 4)


def test_the_cluster_summary_needs_only_a_login(as_persona):
    assert as_persona("maps_token").get("/api/v1/cluster/").status_code == 200
    assert as_persona("anonymous").get("/api/v1/cluster/").status_code == 401
    body = as_persona("member").get("/api/v1/cluster/").json()
    assert {"capacity", "used", "free", "teams", "last_cycle"} <= set(body)


QUOTA = {"quotas": {"gpu": {"nominal": 12, "borrowing_limit": 4, "lending_limit": None}}}


@pytest.mark.parametrize("persona", PERSONAS)
def test_only_staff_change_quotas(as_persona, persona):
    response = as_persona(persona).patch("/api/v1/teams/maps/quota/", QUOTA, format="json")
    assert response.status_code == QUOTA_STATUS[persona]
    nominal = Quota.objects.get(team__slug="maps", resource="gpu").nominal
    assert nominal == (12 if response.status_code == 200 else 8)


def test_a_quota_change_is_saved_and_audited(as_persona, staff):
    response = as_persona("staff").patch("/api/v1/teams/maps/quota/", {**QUOTA, "weight": 2}, format="json")
    assert response.status_code == 200
    assert response.json()["weight"] == 2 and response.json()["quotas"][0]["nominal"] == 12
    entry = AuditEntry.objects.get(subject="quota")
    assert entry.actor == staff and "gpu nominal 8 -> 12" in entry.summary


def test_put_replaces_every_quota(as_persona, maps):
    Quota.objects.create(team=maps, resource="cpu", nominal=64000)
    response = as_persona("staff").put("/api/v1/teams/maps/quota/", QUOTA, format="json")
    assert response.status_code == 200
    assert list(maps.quotas.values_list("resource", flat=True)) == ["gpu"]


def test_put_needs_the_quotas(as_persona):
    response = as_persona("staff").put("/api/v1/teams/maps/quota/", {"weight": 2}, format="json")
    assert response.status_code == 400 and "quotas" in response.json()


def test_a_dry_run_previews_and_saves_nothing(as_persona):
    response = as_persona("staff").put("/api/v1/teams/maps/quota/?dry_run=1", QUOTA, format="json")
    assert response.status_code == 200
    body = response.json()
    assert body["dry_run"] is True and {"preempted", "starting", "rejected", "quiet"} <= set(body)
    assert Quota.objects.get(team__slug="maps", resource="gpu").nominal == 8
    assert not AuditEntry.objects.filter(subject="quota").exists()


@pytest.mark.parametrize(
    "body, field",
    [
        ({"quotas": {"gpus": {"nominal": 1}}}, "quotas"),
        ({"quotas": {"gpu": {"nominal": -1}}}, "quotas"),
        ({"weight": 0}, "weight"),
    ],
    ids=["an unknown resource", "a negative nominal", "a zero weight"],
)
def test_it_explains_an_invalid_quota(as_persona, body, field):
    response = as_persona("staff").patch("/api/v1/teams/maps/quota/", body, format="json")
    assert response.status_code == 400 and field in response.json()
