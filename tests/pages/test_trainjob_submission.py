"""A Kubeflow Trainer v2 TrainJob through the spec, the form, the REST API and YAML import."""

from __future__ import annotations

import pytest
import yaml

from jobs.models import Job
from jobs.spec import SpecError, parse_spec, spec_to_data
from jobs.yaml_import import spec_from_yaml

pytestmark = pytest.mark.django_db

SPEC = {
    "team": "maps", "name": "llama-finetune", "kind": "TrainJob", "runtime": "torch-distributed",
    "image": "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime", "command": ["torchrun", "train.py"],
    "num_nodes": 2, "resources_per_node": {"gpu": 1, "cpu": "2", "memory": "4Gi"}, "max_runtime": 3600,
}  # fmt: skip

# A TrainJob as its users write one (trainer `pkg/apis/trainer/v1alpha1`, v2.2 and later).
MANIFEST = """
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: llama-finetune, namespace: maps}
spec:
  runtimeRef: {name: torch-distributed, apiGroup: trainer.kubeflow.org, kind: ClusterTrainingRuntime}
  activeDeadlineSeconds: 3600
  suspend: true
  initializer:
    model: {storageUri: "hf://meta-llama/Llama-3.2-1B"}
  trainer:
    image: pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime
    command: [torchrun, train.py]
    env:
      - {name: EPOCHS, value: "3"}
      - name: TOKEN
        valueFrom: {secretKeyRef: {name: hf, key: token}}
    numNodes: 2
    numProcPerNode: 4
    resourcesPerNode:
      limits: {nvidia.com/gpu: 1, cpu: "2", memory: 20Gi, example.com/fpga: 1}
  runtimePatches:
    - manager: platform.example.com/volumes
      trainingRuntimeSpec:
        template:
          metadata:
            annotations: {scheduling.volcano.sh/queue-name: other-queue}
          spec:
            replicatedJobs:
              - name: node
                template:
                  spec:
                    template:
                      spec:
                        nodeSelector: {gpu: a100}
                        volumes:
                          - {name: data, persistentVolumeClaim: {claimName: datasets}}
                          - {name: shm, emptyDir: {medium: Memory, sizeLimit: 16Gi}}
                        containers:
                          - name: node
                            volumeMounts:
                              - {name: data, mountPath: /data, readOnly: true}
                              - {name: shm, mountPath: /dev/shm}
"""


def test_a_trainjob_spec_becomes_one_group_of_nodes_on_its_runtime():
    spec = parse_spec(SPEC)
    assert (spec.kind, spec.runtime, spec.gpu_total) == ("TrainJob", "torch-distributed", 2)
    assert [(g.role, g.count, g.gpu, g.cpu, g.memory) for g in spec.replicas] == [("Node", 2, 1, 2000, 4 * 2**30)]
    assert spec_to_data(spec)["runtime"] == "torch-distributed"


def test_a_trainjob_may_give_its_nodes_as_a_replica_group_too():
    data = {**SPEC, "replicas": [{"role": "Node", "count": 2, "gpu": 1}]}
    del data["num_nodes"], data["resources_per_node"]
    assert parse_spec(data).replicas[0].count == 2


@pytest.mark.parametrize("overrides, field, message", [
    ({"runtime": None}, "runtime", "Required: the ClusterTrainingRuntime a TrainJob runs on, e.g. torch-distributed."),
    ({"runtime": "Torch_Distributed"}, "runtime", "Must be a ClusterTrainingRuntime name"),
    ({"kind": "TFJob", "replicas": [{"role": "Worker"}], "num_nodes": None, "resources_per_node": None},
     "runtime", "A TFJob runs on no runtime; the kinds that do: TrainJob."),
    ({"kind": "TFJob", "runtime": None}, "num_nodes", "A TFJob has replica groups, not nodes: give replicas."),
    ({"replicas": [{"role": "Node"}]}, "replicas", "Give num_nodes (and resources_per_node) or replicas, not both."),
    ({"num_nodes": 0}, "num_nodes", "Must be a whole number from 1 to"),
    ({"resources_per_node": {"gpu": -1}}, "resources_per_node.gpu", "Must be a whole number of GPUs"),
    ({"resources_per_node": {"disk": "1Gi"}}, "resources_per_node", "Must be a mapping of cpu, gpu, memory."),
    ({"name": "7b-finetune"}, "name", "A TrainJob name starts with a letter, got '7b-finetune'."),
])  # fmt: skip
def test_a_trainjob_spec_is_refused_by_the_field_at_fault(overrides, field, message):
    data = {key: value for key, value in {**SPEC, **overrides}.items() if value is not None}
    with pytest.raises(SpecError) as refused:
        parse_spec(data)
    assert any(text.startswith(message) for text in refused.value.errors.get(field, [])), refused.value.errors


def test_a_trainjob_manifest_becomes_the_spec_and_lists_what_it_drops():
    data, unsupported = spec_from_yaml(MANIFEST)
    spec = parse_spec(data)
    assert (spec.name, spec.team, spec.kind, spec.runtime, spec.max_runtime) == (
        "llama-finetune", "maps", "TrainJob", "torch-distributed", 3600)
    assert spec.command == ("torchrun", "train.py") and dict(spec.env) == {"EPOCHS": "3"}
    # 20Gi per node is 4Gi of the container and the 16Gi /dev/shm, as Gangway counts it.
    assert [(g.role, g.count, g.gpu, g.cpu, g.memory) for g in spec.replicas] == [("Node", 2, 1, 2000, 4 * 2**30)]
    assert spec.shm == 16 * 2**30 and [v.as_data() for v in spec.volumes] == [
        {"claim": "datasets", "path": "/data", "read_only": True}]
    patch = "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec"
    assert sorted(unsupported) == sorted([
        "spec.initializer", "spec.trainer.numProcPerNode", "spec.trainer.env[1] (only literal values)",
        "spec.trainer.resourcesPerNode.example.com/fpga", f"{patch}.nodeSelector",
    ])


@pytest.mark.parametrize("ref, message", [
    ({"name": "torch", "kind": "TrainingRuntime"}, "Gangway runs a TrainJob on a ClusterTrainingRuntime"),
    ({"name": "torch", "apiGroup": "example.com"}, "Gangway runs a TrainJob on a ClusterTrainingRuntime"),
])
def test_a_trainjob_on_another_kind_of_runtime_is_refused(ref, message):
    manifest = yaml.safe_load(MANIFEST)
    manifest["spec"]["runtimeRef"] = ref
    with pytest.raises(SpecError) as refused:
        spec_from_yaml(yaml.safe_dump(manifest))
    assert refused.value.errors["spec.runtimeRef"][0].startswith(message)


def test_the_form_submits_a_trainjob(login, owner):
    data = {
        "team": "maps", "kind": "TrainJob", "runtime": "torch-distributed", "name": "llama",
        "image": "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime", "command": "torchrun train.py", "tier": "",
        "replicas-TOTAL_FORMS": "1", "replicas-INITIAL_FORMS": "0", "replicas-0-role": "Node",
        "replicas-0-count": "2", "replicas-0-gpu": "1",
    }  # fmt: skip
    response = login(owner).post("/jobs/new/", data)
    job = Job.objects.get()
    assert response.status_code == 302, response.content.decode()[:2000]
    assert (job.kind, job.runtime, job.replicas[0]["role"], job.gpu_total) == ("TrainJob", "torch-distributed", "Node", 2)


def test_the_form_puts_a_missing_runtime_by_its_field(login, owner):
    data = {"team": "maps", "kind": "TrainJob", "name": "llama", "image": "busybox", "tier": "",
            "replicas-TOTAL_FORMS": "1", "replicas-INITIAL_FORMS": "0", "replicas-0-role": "Node",
            "replicas-0-count": "1", "replicas-0-gpu": "1"}  # fmt: skip
    response = login(owner).post("/jobs/new/", data)
    assert response.status_code == 422 and not Job.objects.exists()
    assert "Required: the ClusterTrainingRuntime a TrainJob runs on" in response.content.decode()


def test_importing_a_trainjob_fills_the_form_with_its_runtime_and_nodes(login, owner, htmx):
    response = login(owner).post("/jobs/new/import/", {"yaml": MANIFEST, "team": "maps"}, **htmx)
    body = response.content.decode()
    assert response.status_code == 200
    assert 'value="torch-distributed"' in body and '<option value="TrainJob" selected>' in body
    assert 'name="replicas-0-count" value="2"' in body and 'value="Node" selected' in body
    assert "spec.trainer.numProcPerNode" in body


def test_the_api_submits_a_trainjob_spec(client, owner, nodes):
    client.force_login(owner)
    response = client.post("/api/v1/jobs/", SPEC, content_type="application/json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["kind"], body["runtime"], body["replicas"][0]["role"], body["gpu_total"]) == (
        "TrainJob", "torch-distributed", "Node", 2)


def test_the_api_submits_a_trainjob_manifest_and_lists_what_it_drops(client, owner, nodes):
    client.force_login(owner)
    response = client.post("/api/v1/jobs/", MANIFEST, content_type="application/yaml")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["kind"], body["runtime"], body["shm"]) == ("TrainJob", "torch-distributed", "16Gi")
    assert "spec.initializer" in body["unsupported"] and "spec.trainer.numProcPerNode" in body["unsupported"]


def test_the_job_page_names_its_runtime(login, owner, submit):
    fields = {key: value for key, value in SPEC.items() if key != "team"}
    job = submit(**fields, replicas=None)
    body = login(owner).get(f"/jobs/{job.pk}/").content.decode()
    assert "TrainJob on torch-distributed" in body
    assert "kind: TrainJob" in body and "runtimeRef:" in body  # the manifest Gangway creates, shown on the page
