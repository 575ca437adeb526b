"""The submit form on a cluster with GPU types: numbered choices with what each type offers the team,
errors by the field, the fit preview naming the type, import and resubmission keeping the choices."""

from __future__ import annotations

import pytest

from jobs.models import Job
from scheduling.cluster.simulated import SimulatedCluster
from scheduling.loop import admission_cycle
from tenants.models import Membership
from tests.conftest import A100_LABEL
from tests.pages.test_submit_page import form_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def typed(gpu_types, owner, outsider):
    admission_cycle(cluster=SimulatedCluster())  # the node mirror the form and R10 read
    return gpu_types


def post(client, *types: str, **overrides):
    data = form_data(**overrides)
    data["gpu_type"] = list(types)
    return client.post("/jobs/new/", data)


@pytest.mark.parametrize("persona, status", [("owner", 200), ("outsider", 200), (None, 302)])
def test_access_to_the_form_with_types(request, login, typed, persona, status):
    user = request.getfixturevalue(persona) if persona else None
    assert login(user).get("/jobs/new/").status_code == status


def test_it_offers_one_numbered_select_per_type_with_what_it_offers_the_team(login, owner, typed, submit):
    submit(name="running", gpu_type=["a100"], replicas=[{"role": "Worker", "count": 1, "gpu": 2}])
    admission_cycle(cluster=SimulatedCluster())
    body = login(owner).get("/jobs/new/").content.decode()
    assert body.count('<select name="gpu_type"') == 2
    assert '<label for="id_gpu_type_1">1st choice</label>' in body and '<label for="id_gpu_type_2">2nd choice</label>' in body
    assert "Any type of team maps, cheapest first" in body
    assert "a100 — 80 GB, large training · team nominal 4 GPUs, 2 in use · 6 of 8 GPUs free on its nodes" in body
    assert "l4 — 24 GB, inference and small runs · team nominal 4 GPUs, 0 in use · 8 of 8 GPUs free on its nodes" in body


def test_without_types_there_is_no_gpu_type_field(login, owner, nodes):
    body = login(owner).get("/jobs/new/").content.decode()
    assert 'name="gpu_type"' not in body


def test_it_submits_the_choices_in_the_order_chosen(login, owner, typed):
    response = post(login(owner), "a100", "l4")
    assert response.status_code == 302
    assert Job.objects.get().gpu_type == ["a100", "l4"]


def test_no_choice_is_the_teams_types(login, owner, typed):
    assert post(login(owner), "", "").status_code == 302
    assert Job.objects.get().gpu_type == []


def test_the_same_type_twice_answers_422_by_the_field(login, owner, typed):
    response = post(login(owner), "l4", "l4")
    body = response.content.decode()
    assert response.status_code == 422 and not Job.objects.exists()
    assert 'id="error-gpu_type"' in body and "Choice 2: GPU type l4 is named twice" in body


def test_an_unknown_type_answers_422_naming_the_clusters_types(login, owner, typed):
    response = post(login(owner), "h100")
    body = response.content.decode()
    assert response.status_code == 422
    assert "No GPU type h100 on this cluster; its types are l4, a100." in body
    assert "h100 (not a GPU type of this cluster)" in body  # the choice stays shown as asked


def test_a_type_on_a_job_without_gpus_answers_422(login, owner, typed):
    response = post(login(owner), "a100", **{"replicas-0-gpu": "0"})
    assert response.status_code == 422
    assert "name a GPU type only when a replica asks for GPUs" in response.content.decode()


def test_a_job_too_large_for_every_type_names_each_types_limit(login, owner, typed):
    response = post(login(owner), "a100", "l4", **{"replicas-0-count": "3", "replicas-0-gpu": "8"})
    body = response.content.decode()
    assert response.status_code == 422 and "Can never run: a100, l4: Requested 24 GPUs" in body


def test_the_fit_preview_says_which_type_it_would_get(login, owner, typed):
    data = form_data()
    data["gpu_type"] = ["a100", "l4"]
    body = login(owner).post("/jobs/new/preview/", data).content.decode()
    assert "Starts now on a100 GPUs (node-01)." in body


def test_the_fit_preview_says_when_a_type_is_unknown(login, owner, typed):
    data = form_data()
    data["gpu_type"] = ["h100"]
    body = login(owner).post("/jobs/new/preview/", data).content.decode()
    assert "Can never run" in body and "its types are l4, a100" in body


def test_changing_team_swaps_the_offers_out_of_band_and_keeps_the_choices(login, owner, typed, vision, htmx):
    Membership.objects.create(user=owner, team=vision)
    response = login(owner).get("/jobs/new/?team=vision&gpu_type=a100", HTTP_HX_TARGET="tier-field", **htmx)
    body = response.content.decode()
    assert 'id="tier-field"' in body and 'id="gpu-type-field" class="field wide" hx-swap-oob="true"' in body
    assert "Any type of team vision" in body and '<option value="a100" selected>' in body


def test_a_resubmission_keeps_the_types_asked(login, owner, typed, submit):
    job = submit(gpu_type=["l4", "a100"])
    body = login(owner).get(f"/jobs/new/?from={job.pk}").content.decode()
    first, second = body.split('id="id_gpu_type_1"')[1], body.split('id="id_gpu_type_2"')[1]
    assert first.split("</select>")[0].count('value="l4" selected') == 1
    assert second.split("</select>")[0].count('value="a100" selected') == 1


def test_an_imported_manifest_fills_the_types_from_its_node_affinity(login, owner, typed):
    manifest = f"""
apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {{name: resnet, namespace: maps}}
spec:
  tfReplicaSpecs:
    Worker:
      replicas: 1
      template:
        spec:
          nodeSelector: {{{A100_LABEL[0]}: {A100_LABEL[1]}}}
          containers:
            - name: tensorflow
              image: tensorflow/tensorflow:2.12.0-gpu
              resources: {{limits: {{nvidia.com/gpu: 2}}}}
"""
    response = login(owner).post("/jobs/new/import/", {"yaml": manifest, "team": "maps"})
    body = response.content.decode()
    assert response.status_code == 200, body
    assert "Every field of the manifest was carried over." in body
    assert body.split('id="id_gpu_type_1"')[1].split("</select>")[0].count('value="a100" selected') == 1
