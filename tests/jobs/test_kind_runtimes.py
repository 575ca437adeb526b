"""Kinds that run on a runtime, and kinds of identical nodes, as the registry describes them.

FlowJob is a kind Gangway does not ship: it runs on a FlowRuntime, its replicas are nodes of
its one role, and its names start with a letter. Registering it is all every consumer needs.
"""

from __future__ import annotations

import pytest
from kubernetes.client import ApiClient, Configuration

from jobs import kinds
from jobs.models import Job
from jobs.spec import SpecError, parse_spec, spec_to_data
from scheduling.cluster.base import TenantTeam, Tenants, TenantTier
from scheduling.cluster.kubernetes import KubernetesCluster
from scheduling.snapshot import to_cluster_job
from tests.cluster.fake_apiserver import FakeApiServer

pytestmark = pytest.mark.django_db

FLOWJOB = kinds.JobKind(
    name="FlowJob", group="flow.example.com", version="v1", plural="flowjobs", layout=kinds.Layout.REPLICA_SPECS,
    roles=(kinds.Role("Node"),), container="flow", operator="the Flow operator", replica_specs="flowReplicaSpecs",
    runtime_kind="FlowRuntime", runtime_plural="flowruntimes", runtime_gang=("spec", "gang"), nodes=True,
    letter_first=True,
)  # fmt: skip

SPEC = {"team": "maps", "name": "flow", "kind": "FlowJob", "runtime": "flow-gpu", "image": "busybox",
        "num_nodes": 3, "resources_per_node": {"gpu": 2, "memory": "8Gi"}}  # fmt: skip


@pytest.fixture
def flowjob():
    with kinds.registered(FLOWJOB) as kind:
        yield kind


def test_num_nodes_and_resources_per_node_become_one_group_of_its_role(flowjob):
    spec = parse_spec(SPEC)
    assert spec.runtime == "flow-gpu"
    assert [(g.role, g.count, g.gpu, g.memory) for g in spec.replicas] == [("Node", 3, 2, 8 * 2**30)]
    assert spec_to_data(spec)["runtime"] == "flow-gpu" and "runtime" not in spec_to_data(parse_spec(
        {"team": "maps", "name": "tf", "image": "busybox", "replicas": [{"role": "Worker"}]}))


@pytest.mark.parametrize("overrides, field, message", [
    ({"runtime": None}, "runtime", "Required: the FlowRuntime a FlowJob runs on"),
    ({"runtime": "Flow GPU"}, "runtime", "Must be a FlowRuntime name"),
    ({"replicas": [{"role": "Node"}]}, "replicas", "Give num_nodes (and resources_per_node) or replicas, not both."),
    ({"num_nodes": 0}, "num_nodes", "Must be a whole number from 1 to"),
    ({"resources_per_node": {"memory": "lots"}}, "resources_per_node.memory", "Not a Kubernetes quantity"),
    ({"resources_per_node": ["gpu"]}, "resources_per_node", "Must be a mapping of cpu, gpu, memory."),
    ({"name": "1st-flow"}, "name", "A FlowJob name starts with a letter, got '1st-flow'."),
    ({"kind": "TFJob", "num_nodes": None, "resources_per_node": None, "replicas": [{"role": "Worker"}]},
     "runtime", "A TFJob runs on no runtime; the kinds that do: "),
    ({"kind": "TFJob", "runtime": None}, "num_nodes", "A TFJob has replica groups, not nodes: give replicas."),
])  # fmt: skip
def test_a_spec_of_such_a_kind_is_refused_by_the_field_at_fault(flowjob, overrides, field, message):
    data = {key: value for key, value in {**SPEC, **overrides}.items() if value is not None}
    with pytest.raises(SpecError) as refused:
        parse_spec(data)
    assert any(text.startswith(message) for text in refused.value.errors.get(field, [])), refused.value.errors


def test_a_kind_without_a_runtime_refuses_one_naming_the_kinds_that_take_one(flowjob):
    with pytest.raises(SpecError) as refused:
        parse_spec({"team": "maps", "name": "tf", "image": "busybox", "runtime": "x", "replicas": [{"role": "Worker"}]})
    (message,) = refused.value.errors["runtime"]
    assert message.startswith("A TFJob runs on no runtime; the kinds that do: ") and "FlowJob" in message
    assert "TFJob" not in message.split(":")[1]


def test_the_form_submits_its_runtime_and_the_job_page_names_it(client, owner, flowjob):
    client.force_login(owner)
    data = {"team": "maps", "kind": "FlowJob", "runtime": "flow-gpu", "name": "flow", "image": "busybox", "tier": "",
            "replicas-TOTAL_FORMS": "1", "replicas-INITIAL_FORMS": "0", "replicas-0-role": "Node",
            "replicas-0-count": "2", "replicas-0-gpu": "1"}  # fmt: skip
    response = client.post("/jobs/new/", data)
    job = Job.objects.get()
    assert response.status_code == 302 and (job.kind, job.runtime, job.gpu_total) == ("FlowJob", "flow-gpu", 2)
    assert "FlowJob on flow-gpu" in client.get(f"/jobs/{job.pk}/").content.decode()
    form = client.get(f"/jobs/new/?from={job.pk}").content.decode()  # a resubmission keeps it
    assert 'name="runtime" value="flow-gpu"' in form


def test_the_api_takes_its_runtime_and_nodes_and_answers_them(client, owner, flowjob):
    client.force_login(owner)
    response = client.post("/api/v1/jobs/", SPEC, content_type="application/json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["kind"], body["runtime"], body["replicas"][0]["count"], body["gpu_total"]) == ("FlowJob", "flow-gpu", 3, 6)
    assert to_cluster_job(Job.objects.get()).runtime == "flow-gpu"


def test_doctor_names_a_runtime_its_kind_would_not_gang_schedule(flowjob):
    fake = FakeApiServer().start()
    try:
        cluster = KubernetesCluster(ApiClient(Configuration(host=fake.url)), retry_budget=0.5)
        for crd in ("flowjobs.flow.example.com", "tfjobs.kubeflow.org", "pytorchjobs.kubeflow.org"):
            fake.add({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                      "metadata": {"name": crd}})  # fmt: skip
        for name, spec in (("flow-gpu", {"gang": {}}), ("flow-cpu", {})):
            cluster.api.custom.create_cluster_custom_object(
                "flow.example.com", "v1", "flowruntimes", {"kind": "FlowRuntime", "metadata": {"name": name}, "spec": spec})
        tenants = Tenants(teams=(TenantTeam(slug="maps", nominal={}, borrowing_limit={}),), tiers=(TenantTier("standard", 100, True),))
        problems = [finding.problem for finding in cluster.doctor(tenants)]
    finally:
        fake.stop()
    assert [p for p in problems if "FlowRuntime" in p] == [
        "FlowRuntime flow-cpu has no spec.gang, so the pods of a FlowJob on it are not gang-scheduled by Volcano."]
