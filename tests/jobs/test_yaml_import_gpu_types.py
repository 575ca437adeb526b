"""A manifest's node selection on a GPU type's label becomes the spec's gpu_type; the rest is listed."""

from __future__ import annotations

import pytest
import yaml

from jobs.spec import parse_spec
from jobs.yaml_import import spec_from_manifest
from tests.conftest import A100_LABEL, L4_LABEL

pytestmark = pytest.mark.django_db
LABEL = A100_LABEL[0]
POD = "spec.tfReplicaSpecs.Worker.template.spec"
TERM = f"{POD}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"


def tfjob(pod: dict, *, ps: dict | None = None) -> dict:
    container = {"name": "tensorflow", "image": "tensorflow/tensorflow:2.12.0-gpu",
                 "resources": {"limits": {"nvidia.com/gpu": 1}}}  # fmt: skip
    specs = {"Worker": {"replicas": 2, "template": {"spec": {**pod, "containers": [container]}}}}
    if ps is not None:
        specs["PS"] = {"replicas": 1, "template": {"spec": {**ps, "containers": [{**container, "resources": {}}]}}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "resnet", "namespace": "maps"},
            "spec": {"tfReplicaSpecs": specs}}  # fmt: skip


def required(*expressions: dict) -> dict:
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": list(expressions)}]}}}}


def test_a_node_selector_on_a_types_label_becomes_its_gpu_type(gpu_types):
    data, unsupported = spec_from_manifest(tfjob({"nodeSelector": {LABEL: A100_LABEL[1]}}))
    assert data["gpu_type"] == ["a100"] and unsupported == []
    assert parse_spec(data).gpu_type == ("a100",)


def test_the_values_of_a_required_affinity_are_a_preference_list_in_the_order_written(gpu_types):
    pod = required({"key": LABEL, "operator": "In", "values": [A100_LABEL[1], L4_LABEL[1]]})
    data, unsupported = spec_from_manifest(tfjob(pod))
    assert data["gpu_type"] == ["a100", "l4"] and unsupported == []


def test_other_selection_is_listed_back_and_the_type_still_read(gpu_types):
    pod = {"nodeSelector": {LABEL: L4_LABEL[1], "pool": "fast"},
           **required({"key": LABEL, "operator": "In", "values": [L4_LABEL[1], "NVIDIA-T4"]},
                      {"key": "zone", "operator": "In", "values": ["a"]})}  # fmt: skip
    pod["affinity"]["podAntiAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": []}
    pod["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = []
    data, unsupported = spec_from_manifest(tfjob(pod))
    assert data["gpu_type"] == ["l4"]
    assert unsupported == [
        f"{POD}.nodeSelector.pool",
        f"{POD}.affinity.podAntiAffinity",
        f"{POD}.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution",
        f"{TERM}.matchExpressions[0].values[1] (no GPU type has the value 'NVIDIA-T4')",
        f"{TERM}.matchExpressions[1]",
    ]


@pytest.mark.parametrize("expression", [
    {"key": LABEL, "operator": "NotIn", "values": [A100_LABEL[1]]},
    {"key": LABEL, "operator": "Exists"},
])  # fmt: skip
def test_an_expression_other_than_in_is_listed(gpu_types, expression):
    data, unsupported = spec_from_manifest(tfjob(required(expression)))
    assert "gpu_type" not in data and unsupported == [f"{TERM}.matchExpressions[0]"]


def test_several_terms_are_listed_whole(gpu_types):
    term = {"matchExpressions": [{"key": LABEL, "operator": "In", "values": [A100_LABEL[1]]}]}
    pod = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [term, term]}}}}  # fmt: skip
    data, unsupported = spec_from_manifest(tfjob(pod))
    assert "gpu_type" not in data and len(unsupported) == 1 and "only one nodeSelectorTerm" in unsupported[0]


def test_a_value_no_type_has_is_listed(gpu_types):
    data, unsupported = spec_from_manifest(tfjob({"nodeSelector": {LABEL: "Tesla-T4"}}))
    assert "gpu_type" not in data
    assert unsupported == [f"{POD}.nodeSelector.{LABEL} (no GPU type has the value 'Tesla-T4')"]


def test_replicas_selecting_other_types_keep_the_first_and_are_listed(gpu_types):
    manifest = tfjob({"nodeSelector": {LABEL: A100_LABEL[1]}}, ps={"nodeSelector": {LABEL: L4_LABEL[1]}})
    data, unsupported = spec_from_manifest(manifest)
    assert data["gpu_type"] == ["a100"]
    assert unsupported == ["spec.tfReplicaSpecs.PS.template.spec (selects GPU types l4, but another replica "
                           "selects a100; all replicas of a job get one type)"]  # fmt: skip


def test_without_types_the_selection_is_listed_whole_as_before(nodes):
    data, unsupported = spec_from_manifest(tfjob({"nodeSelector": {LABEL: A100_LABEL[1]}, **required()}))
    assert "gpu_type" not in data
    assert unsupported == [f"{POD}.nodeSelector", f"{POD}.affinity"]


def test_a_trainjobs_runtime_patch_selects_its_type(gpu_types):
    manifest = yaml.safe_load(f"""
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {{name: llama, namespace: maps}}
spec:
  runtimeRef: {{name: torch-distributed}}
  trainer:
    image: pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime
    numNodes: 2
    resourcesPerNode: {{limits: {{nvidia.com/gpu: 4}}}}
  runtimePatches:
    - manager: example.com/me
      trainingRuntimeSpec:
        template:
          spec:
            replicatedJobs:
              - name: node
                template:
                  spec:
                    template:
                      spec:
                        affinity:
                          nodeAffinity:
                            requiredDuringSchedulingIgnoredDuringExecution:
                              nodeSelectorTerms:
                                - matchExpressions:
                                    - {{key: {LABEL}, operator: In, values: [{L4_LABEL[1]}, {A100_LABEL[1]}]}}
""")
    data, unsupported = spec_from_manifest(manifest)
    assert data["gpu_type"] == ["l4", "a100"] and unsupported == []
