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


@pytest.mark.parametrize("query", ["", "?dry_run=true"], ids=["a change", "a preview"])
def test_a_lead_is_told_only_admins_change_or_preview_quotas(as_persona, client, lead, query):
    """The quota page refuses a lead its preview as well: the API's refusal sends them to an admin, not to it."""
    response = as_persona("lead").patch(f"/api/v1/teams/maps/quota/{query}", QUOTA, format="json")
    assert response.status_code == 403
    assert response.json() == {"detail": "Only admins (staff) change quotas or preview a change of them; ask one."}
    client.force_login(lead)
    assert client.post("/teams/maps/quota/", HTTP_HX_REQUEST="true").status_code == 403


def test_a_quota_change_is_saved_and_audited(as_persona, staff):
    response = as_persona("staff").patch("/api/v1/teams/maps/quota/", {**QUOTA, "weight": 2}, format="json")
    assert response.status_code == 200
    assert response.json()["weight"] == 2 and response.json()["quotas"][0]["nominal"] == 12
    entry = AuditEntry.objects.get(subject="quota")
    assert entry.actor == staff and "gpu nominal 8 GPUs -> 12 GPUs" in entry.summary


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


# --- GPU types: quotas per type --------------------------------------------------
TYPED = {"quotas": {"gpu:a100": {"nominal": 6, "borrowing_limit": 2, "lending_limit": None}}}


def test_a_team_on_a_typed_cluster_shows_a_quota_per_type(as_persona, gpu_types):
    quotas = {q["resource"]: q for q in as_persona("member").get("/api/v1/teams/maps/").json()["quotas"]}
    assert set(quotas) == {"gpu:a100", "gpu:l4"}
    assert quotas["gpu:a100"] | {} == {"resource": "gpu:a100", "nominal": 4, "borrowing_limit": 4,
                                       "lending_limit": None, "max_per_replica": 8, "default_per_replica": None}  # fmt: skip


@pytest.mark.parametrize("persona", PERSONAS)
def test_only_staff_change_a_types_quota(as_persona, persona, gpu_types):
    response = as_persona(persona).patch("/api/v1/teams/maps/quota/", TYPED, format="json")
    assert response.status_code == QUOTA_STATUS[persona]
    nominal = Quota.objects.get(team__slug="maps", resource="gpu:a100").nominal
    assert nominal == (6 if response.status_code == 200 else 4)


def test_a_patch_of_one_type_leaves_the_others(as_persona, gpu_types, staff):
    response = as_persona("staff").patch("/api/v1/teams/maps/quota/", TYPED, format="json")
    quotas = {q["resource"]: (q["nominal"], q["borrowing_limit"]) for q in response.json()["quotas"]}
    assert quotas == {"gpu:a100": (6, 2), "gpu:l4": (4, 4)}
    assert "a100 GPUs nominal 4 GPUs -> 6 GPUs" in AuditEntry.objects.get(subject="quota", actor=staff).summary


def test_a_typed_dry_run_saves_nothing(as_persona, gpu_types):
    response = as_persona("staff").patch("/api/v1/teams/maps/quota/?dry_run=true", TYPED, format="json")
    assert response.status_code == 200 and response.json()["dry_run"] is True
    assert Quota.objects.get(team__slug="maps", resource="gpu:a100").nominal == 4


@pytest.mark.parametrize("resource", ["gpu:h100", "gpu"], ids=["a type the cluster lacks", "untyped gpu"])
def test_an_unknown_type_is_a_400_naming_the_known_resources(as_persona, gpu_types, resource):
    response = as_persona("staff").patch("/api/v1/teams/maps/quota/", {"quotas": {resource: {"nominal": 1}}},
                                         format="json")  # fmt: skip
    assert response.status_code == 400
    assert response.json()["quotas"] == [
        f"Unknown resource {resource}; the resources are gpu:l4, gpu:a100, cpu, memory."]
    assert not Quota.objects.filter(team__slug="maps", resource=resource).exists()


def test_without_types_a_typed_quota_is_a_400(as_persona):
    response = as_persona("staff").patch("/api/v1/teams/maps/quota/", TYPED, format="json")
    assert response.status_code == 400
    assert response.json()["quotas"] == ["Unknown resource gpu:a100; the resources are gpu, cpu, memory."]


def test_a_row_left_from_before_types_can_be_dropped(as_persona, gpu_types, maps):
    Quota.objects.create(team=maps, resource="gpu", nominal=2)
    response = as_persona("staff").patch("/api/v1/teams/maps/quota/", {"quotas": {"gpu": None}}, format="json")
    assert response.status_code == 200 and not maps.quotas.filter(resource="gpu").exists()
    bad = as_persona("staff").patch("/api/v1/teams/maps/quota/", {"quotas": {"gpu:A!": None}}, format="json")
    assert bad.status_code == 400 and "Unknown resource gpu:A!" in bad.json()["quotas"][0]


def test_a_typed_amount_keeps_the_gpu_range(as_persona, gpu_types):
    response = as_persona("staff").patch("/api/v1/teams/maps/quota/",
                                         {"quotas": {"gpu:a100": {"nominal": 1_000_001}}}, format="json")  # fmt: skip
    assert response.status_code == 400
    assert "Must be a whole amount from 0 to 1000000" in str(response.json())
