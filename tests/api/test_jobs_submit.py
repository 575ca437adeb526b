"""POST /api/v1/jobs/: submission through the service, idempotency, manifests, and who may submit."""

import json

import pytest
import yaml

from jobs.api import JobViewSet
from jobs.models import Job
from scheduling.cluster.simulated import SimulatedCluster
from scheduling.loop import admission_cycle
from tests.api.conftest import PERSONAS
from tests.conftest import spec_data

URL = "/api/v1/jobs/"

SUBMIT_STATUS = {
    "owner": 201, "member": 201, "lead": 201, "outsider": 403, "staff": 201,
    "maps_token": 201, "vision_token": 403, "revoked_token": 401, "anonymous": 401,
}  # fmt: skip


@pytest.mark.parametrize("persona", PERSONAS)
def test_it_lets_only_the_team_submit(as_persona, persona):
    response = as_persona(persona).post(URL, spec_data(), format="json")
    assert response.status_code == SUBMIT_STATUS[persona], response.json()
    assert Job.objects.count() == (1 if SUBMIT_STATUS[persona] == 201 else 0)


def test_it_answers_201_with_the_job_and_where_it_stands(as_persona):
    response = as_persona("owner").post(URL, spec_data(), format="json")
    assert response.status_code == 201
    body = response.json()
    job = Job.objects.get()
    assert body["id"] == job.pk and body["state"] == "queued" and body["team"] == "maps"
    assert body["owner"] == "owner" and body["tier"] == "standard" and body["gpu_total"] == 2
    assert {"position", "team_position", "eta", "reason", "unsupported"} <= set(body)
    assert body["reason"] == "Waiting for the next admission cycle."
    assert response["Location"].endswith(f"/api/v1/jobs/{job.pk}/")


def test_its_position_reason_and_eta_come_with_the_admission_cycle_its_submission_asks_for(
        as_persona, monkeypatch, django_capture_on_commit_callbacks):
    """As README says: the 201 comes before any cycle has looked at the job (no plan runs in the
    request, so a CI burst stays cheap); the cycle it triggers gives them seconds later."""
    sent = []
    monkeypatch.setattr("portal.triggers.trigger", sent.append)
    with django_capture_on_commit_callbacks(execute=True):
        body = as_persona("owner").post(URL, spec_data(), format="json").json()
    assert body["state"] == "queued" and body["reason"] == "Waiting for the next admission cycle."
    assert body["position"] is None and body["team_position"] is None and body["eta"] is None
    assert sent == ["gangway.admission_cycle"]


def test_a_team_token_submits_as_its_team(as_persona):
    body = as_persona("maps_token").post(URL, spec_data(team=None) | {"team": "maps"}, format="json").json()
    job = Job.objects.get(pk=body["id"])
    assert job.owner is None and job.submitted_via == "API token ci-maps"


def test_a_team_token_fills_in_its_team(as_persona):
    data = spec_data()
    del data["team"]
    response = as_persona("maps_token").post(URL, data, format="json")
    assert response.status_code == 201 and response.json()["team"] == "maps"


def test_it_refuses_another_team_for_a_team_token_with_a_reason(as_persona):
    response = as_persona("maps_token").post(URL, spec_data(team="vision"), format="json")
    assert response.status_code == 403
    assert response.json()["detail"] == "This token acts for team maps only; it cannot submit for team 'vision'."


def test_it_answers_an_unknown_team_like_a_foreign_one(as_persona):
    unknown = as_persona("owner").post(URL, spec_data(team="nope"), format="json")
    foreign = as_persona("owner").post(URL, spec_data(team="vision"), format="json")
    assert unknown.status_code == foreign.status_code == 403
    assert "Your teams: maps." in unknown.json()["detail"]


def test_it_returns_field_errors_for_an_invalid_spec(as_persona):
    data = spec_data(image="", replicas=[{"role": "Worker", "count": 2, "gpu": -1}])
    response = as_persona("owner").post(URL, data, format="json")
    assert response.status_code == 400
    errors = response.json()
    assert errors["image"] == ["Required: a container image such as tensorflow/tensorflow:2.12.0-gpu."]
    assert "replicas[0].gpu" in errors
    assert not Job.objects.exists()


def test_it_requires_a_team(as_persona):
    data = spec_data()
    del data["team"]
    response = as_persona("owner").post(URL, data, format="json")
    assert response.status_code == 400 and "team" in response.json()


def test_it_rejects_what_can_never_fit_with_the_reason(as_persona, nodes):
    admission_cycle(cluster=SimulatedCluster())  # records the nodes R10 checks against
    data = spec_data(replicas=[{"role": "Worker", "count": 3, "gpu": 8}])
    response = as_persona("owner").post(URL, data, format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["detail"].startswith("Can never run: ") and "24" in body["detail"] and body["code"]
    assert not Job.objects.exists()


def test_the_same_key_and_body_returns_the_original_job(as_persona):
    client = as_persona("maps_token")
    first = client.post(URL, spec_data(), format="json", HTTP_IDEMPOTENCY_KEY="build-7")
    again = client.post(URL, spec_data(), format="json", HTTP_IDEMPOTENCY_KEY="build-7")
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["id"] == again.json()["id"] and Job.objects.count() == 1


def test_the_same_key_with_another_body_is_a_conflict(as_persona):
    client = as_persona("maps_token")
    first = client.post(URL, spec_data(), format="json", HTTP_IDEMPOTENCY_KEY="build-7")
    other = client.post(URL, spec_data(name="other"), format="json", HTTP_IDEMPOTENCY_KEY="build-7")
    assert other.status_code == 409
    assert other.json()["job"] == first.json()["id"] and "use a new key" in other.json()["detail"]


def test_it_refuses_an_overlong_idempotency_key(as_persona):
    response = as_persona("owner").post(URL, spec_data(), format="json", HTTP_IDEMPOTENCY_KEY="k" * 201)
    assert response.status_code == 400 and "Idempotency-Key" in response.json()


MANIFEST = {
    "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "bert", "namespace": "maps"},
    "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 2, "template": {"spec": {
        "nodeSelector": {"pool": "a100"},
        "containers": [{"name": "pytorch", "image": "pytorch/pytorch:2.3.0", "command": ["python", "train.py"],
                        "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}}}},
}  # fmt: skip


def test_it_accepts_a_manifest_as_json_and_lists_what_it_dropped(as_persona):
    response = as_persona("owner").post(URL, MANIFEST, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["kind"] == "PyTorchJob" and body["gpu_total"] == 2
    assert body["unsupported"] == ["spec.pytorchReplicaSpecs.Worker.template.spec.nodeSelector"]


def test_it_accepts_a_manifest_as_yaml(as_persona):
    client = as_persona("maps_token")
    response = client.post(URL, yaml.safe_dump(MANIFEST), content_type="application/yaml")
    assert response.status_code == 201, response.json()
    assert response.json()["name"] == "bert"


def test_it_takes_the_team_from_the_query_for_a_yaml_spec(as_persona):
    data = spec_data()
    del data["team"]
    response = as_persona("owner").post(f"{URL}?team=maps", yaml.safe_dump(data), content_type="text/yaml")
    assert response.status_code == 201, response.json()


def test_its_schema_lists_every_media_type_it_parses_and_each_is_taken(as_persona, client):
    taken = [parser.media_type for parser in JobViewSet.parser_classes]
    schema = client.get("/api/schema/?format=json").json()
    listed = schema["paths"][URL]["post"]["requestBody"]["content"]

    assert list(listed) == taken and len(taken) == 4  # JSON and the three YAML spellings
    assert all(body["schema"] == {"$ref": "#/components/schemas/JobSpecRequest"} for body in listed.values())
    for number, media_type in enumerate(taken):
        data = spec_data(name=f"typed-{number}")
        text = json.dumps(data) if media_type == "application/json" else yaml.safe_dump(data)
        response = as_persona("maps_token").post(URL, text, content_type=media_type)
        assert response.status_code == 201, (media_type, response.json())


def test_it_explains_malformed_yaml(as_persona):
    response = as_persona("owner").post(URL, "name: [unclosed", content_type="application/yaml")
    assert response.status_code == 400 and response.json()["detail"].startswith("Not valid YAML")


def test_it_explains_a_manifest_it_cannot_read(as_persona):
    broken = {**MANIFEST, "metadata": ["not", "a", "mapping"]}
    response = as_persona("owner").post(URL, broken, format="json")
    assert response.status_code == 400
    assert {"metadata", "manifest"} & set(response.json())  # the field, once the importer names it


def test_a_token_with_a_highest_tier_cannot_go_above_it(maps, tiers):
    from tenants.tokens import token_create
    from tests.api.conftest import bearer

    _, value = token_create(name="capped", team=maps, max_tier=tiers["standard"])
    client = bearer(value)
    assert client.post(URL, spec_data(tier="standard"), format="json").status_code == 201
    response = client.post(URL, spec_data(name="urgent", tier="production"), format="json")
    assert response.status_code == 403
    assert response.json()["detail"] == "This token may submit up to tier standard; the job asks for tier production."


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"replicas": [{"role": {}, "count": 1}]}, "replicas[0].role"),
        ({"kind": {}}, "kind"),
        ({"replicas": [{"role": ["Worker"], "count": 2}]}, "replicas[0].role"),
    ],
    ids=["a mapping as the role", "a mapping as the kind", "a list as the role"],
)
def test_odd_json_types_are_field_errors_not_server_errors(as_persona, overrides, field):
    response = as_persona("owner").post(URL, spec_data(**overrides), format="json")
    assert response.status_code == 400 and field in response.json()


def test_unknown_api_paths_answer_json(as_persona):
    response = as_persona("owner").get("/api/v1/nothing-here/")
    assert response.status_code == 404 and "see /api/schema/swagger/" in response.json()["detail"]
    response = as_persona("owner").get("/api/v1/jobs/not-a-number/")
    assert response.status_code == 404 and response["Content-Type"] == "application/json"


def test_a_missing_trailing_slash_is_pointed_out(as_persona):
    response = as_persona("owner").post("/api/v1/jobs", spec_data(), format="json")
    assert response.status_code == 404 and "did you mean /api/v1/jobs/" in response.json()["detail"]


def test_a_token_submission_reads_the_token_tiers_nodes_and_quotas_once(maps, tiers, nodes, django_assert_num_queries):
    from tenants.tokens import token_create
    from tests.api.conftest import bearer

    admission_cycle(cluster=SimulatedCluster())  # records the nodes R10 checks against
    _, value = token_create(name="capped", team=maps, max_tier=tiers["standard"])
    client = bearer(value)
    assert client.post(URL, spec_data(name="first"), format="json").status_code == 201  # records last use
    # token, the team's tiers, the GPU types, nodes, the teams joined to their quotas; then, in a savepoint,
    # the team's row locked and its queued jobs counted (MAX_QUEUED_PER_TEAM), the job and its event.
    with django_assert_num_queries(11):
        assert client.post(URL, spec_data(name="second"), format="json").status_code == 201


def test_it_mounts_the_teams_claims_and_counts_shm_in_each_replicas_memory(as_persona):
    volumes = [{"claim": "datasets", "path": "/data", "read_only": True}, {"config_map": "train-config", "path": "/etc/train"}]
    spec = spec_data(volumes=volumes, shm="16Gi", replicas=[{"role": "Worker", "count": 2, "gpu": 1, "memory": "4Gi"}])
    response = as_persona("owner").post(URL, spec, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["volumes"] == volumes and body["shm"] == "16Gi"
    assert body["replicas"][0]["memory"] == "20Gi"  # 4Gi asked + the 16Gi /dev/shm
    job = Job.objects.get()
    assert job.replicas[0]["memory"] == 20 * 1024**3 and job.shm == 16 * 1024**3


def test_shm_without_a_memory_request_or_team_default_is_refused_by_the_field(as_persona):
    response = as_persona("owner").post(URL, spec_data(shm="8Gi"), format="json")
    assert response.status_code == 400
    assert "no default memory per replica" in response.json()["replicas[0].memory"][0]
    assert Job.objects.count() == 0


def test_shm_starts_from_the_teams_default_memory(as_persona, maps):
    from tenants.models import Quota

    Quota.objects.create(team=maps, resource="memory", nominal=512 * 1024**3, default_per_replica=8 * 1024**3)
    response = as_persona("owner").post(URL, spec_data(shm="8Gi"), format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["replicas"][0]["memory"] == "16Gi"


def test_a_manifests_volumes_are_carried_over_and_a_host_path_listed_back(as_persona):
    manifest = {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "bert", "namespace": "maps"},
        "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 1, "template": {"spec": {
            "containers": [{"name": "pytorch", "image": "busybox", "resources": {"limits": {"memory": "12Gi"}},
                            "volumeMounts": [{"name": "d", "mountPath": "/data"}, {"name": "h", "mountPath": "/h"},
                                             {"name": "shm", "mountPath": "/dev/shm"}]}],
            "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "datasets"}},
                        {"name": "h", "hostPath": {"path": "/"}},
                        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "4Gi"}}]}}}}},
    }  # fmt: skip
    response = as_persona("owner").post(URL, yaml.safe_dump(manifest), content_type="application/yaml")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["volumes"] == [{"claim": "datasets", "path": "/data", "read_only": False}]
    assert body["shm"] == "4Gi" and body["replicas"][0]["memory"] == "12Gi"
    assert any("hostPath" in item for item in body["unsupported"])


def test_it_answers_409_naming_the_cap_when_the_team_has_too_many_jobs_queued(as_persona, settings, maps):
    settings.MAX_QUEUED_PER_TEAM = 1
    assert as_persona("maps_token").post(URL, spec_data(name="first"), format="json").status_code == 201

    response = as_persona("maps_token").post(URL, spec_data(name="second"), format="json")

    assert response.status_code == 409
    assert response.json() == {
        "detail": "Team maps already has 1 job queued, the most a team may queue (MAX_QUEUED_PER_TEAM); wait for "
        "some to start or cancel some.",
        "code": "queue_full",
    }
    assert list(Job.objects.values_list("name", flat=True)) == ["first"]


def test_a_replay_with_its_idempotency_key_answers_200_at_the_cap(as_persona, settings):
    client = as_persona("maps_token")
    first = client.post(URL, spec_data(), format="json", HTTP_IDEMPOTENCY_KEY="ci-7")
    settings.MAX_QUEUED_PER_TEAM = 1

    replay = client.post(URL, spec_data(), format="json", HTTP_IDEMPOTENCY_KEY="ci-7")

    assert replay.status_code == 200 and replay.json()["id"] == first.json()["id"]
    assert Job.objects.count() == 1
