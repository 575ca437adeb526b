"""The jobs API and GPU types: gpu_type in (the body or ?gpu_type=), the types asked and the type given
out, the list filtered by the type given, and the schema documenting both."""

from __future__ import annotations

import pytest

from jobs.models import Job
from scheduling.cluster.simulated import SimulatedCluster
from scheduling.loop import admission_cycle
from tests.conftest import spec_data

URL = "/api/v1/jobs/"


@pytest.fixture
def typed(gpu_types, owner, outsider):
    admission_cycle(cluster=SimulatedCluster())  # the node mirror R10 reads
    return gpu_types


@pytest.mark.parametrize("persona, status", [("owner", 201), ("maps_token", 201), ("outsider", 403),
                                             ("vision_token", 403), ("anonymous", 401)])  # fmt: skip
def test_only_the_team_submits_a_typed_job(typed, as_persona, persona, status):
    response = as_persona(persona).post(URL, spec_data(gpu_type=["a100", "l4"]), format="json")
    assert response.status_code == status, response.json()
    assert Job.objects.filter(gpu_type=["a100", "l4"]).count() == (status == 201)


def test_it_gives_back_the_types_asked_and_the_type_given(typed, as_persona):
    body = as_persona("owner").post(URL, spec_data(gpu_type="a100"), format="json").json()
    assert body["gpu_type"] == ["a100"] and body["assigned_gpu_type"] == ""
    admission_cycle(cluster=SimulatedCluster())
    again = as_persona("owner").get(f"{URL}{body['id']}/").json()
    assert again["state"] == "admitted" and again["assigned_gpu_type"] == "a100"


def test_an_unknown_type_is_a_400_by_the_field_naming_the_clusters_types(typed, as_persona):
    response = as_persona("owner").post(URL, spec_data(gpu_type=["h100"]), format="json")
    assert response.status_code == 400
    assert response.json() == {"gpu_type": ["No GPU type h100 on this cluster; its types are l4, a100."]}
    assert not Job.objects.exists()


def test_a_bad_name_is_a_400_naming_its_place_in_the_list(typed, as_persona):
    response = as_persona("owner").post(URL, spec_data(gpu_type=["a100", "A100"]), format="json")
    assert response.status_code == 400 and list(response.json()) == ["gpu_type[1]"]


def test_a_job_too_large_for_every_type_is_refused_naming_each(typed, as_persona):
    data = spec_data(gpu_type=["a100", "l4"], replicas=[{"role": "Worker", "count": 3, "gpu": 8}])
    body = as_persona("owner").post(URL, data, format="json").json()
    assert body["detail"].startswith("Can never run: a100, l4: Requested 24 GPUs; team maps may use at most 8")


def test_the_query_names_the_types_beside_a_manifest(typed, as_persona):
    manifest = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "resnet", "namespace": "maps"},
                "spec": {"tfReplicaSpecs": {"Worker": {"replicas": 1, "template": {"spec": {"containers": [
                    {"name": "tensorflow", "image": "tensorflow/tensorflow:2.12.0-gpu",
                     "resources": {"limits": {"nvidia.com/gpu": 2}}}]}}}}}}  # fmt: skip
    response = as_persona("owner").post(f"{URL}?gpu_type=a100,l4", manifest, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["gpu_type"] == ["a100", "l4"]


def test_the_query_and_a_body_naming_other_types_are_refused(typed, as_persona):
    response = as_persona("owner").post(f"{URL}?gpu_type=l4", spec_data(gpu_type="a100"), format="json")
    assert response.status_code == 400 and "give them once" in response.json()["gpu_type"][0]
    same = as_persona("owner").post(f"{URL}?gpu_type=a100", spec_data(gpu_type="a100"), format="json")
    assert same.status_code == 201


def test_the_list_filters_by_the_type_given(typed, submit, as_persona):
    on_a100 = submit(name="big", gpu_type=["a100"])
    submit(name="small", gpu_type=["l4"])
    submit(name="cpu-only", replicas=[{"role": "Worker", "count": 1, "gpu": 0}])
    admission_cycle(cluster=SimulatedCluster())
    response = as_persona("member").get(f"{URL}?gpu_type=a100")
    assert [job["id"] for job in response.json()["results"]] == [on_a100.pk]
    assert as_persona("outsider").get(f"{URL}?gpu_type=a100").json()["results"] == []


def test_the_schema_documents_gpu_type_in_and_out(client, db):
    schema = client.get("/api/schema/?format=json").json()
    parts = schema["components"]["schemas"]
    spec = next(value for name, value in parts.items() if name.startswith("JobSpec"))
    assert {"oneOf"} <= set(spec["properties"]["gpu_type"])
    assert {"gpu_type", "assigned_gpu_type"} <= set(parts["Job"]["properties"])
    create = schema["paths"]["/api/v1/jobs/"]["post"]
    assert "gpu_type" in {parameter["name"] for parameter in create["parameters"]}
    listed = schema["paths"]["/api/v1/jobs/"]["get"]
    assert "gpu_type" in {parameter["name"] for parameter in listed["parameters"]}
