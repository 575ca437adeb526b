"""Manifests as engineers write them: the pod template read as the operator reads it, and what Gangway
sets in its place listed back, never changed silently."""

from __future__ import annotations

import pytest

from jobs.spec import SpecError, parse_spec
from jobs.yaml_import import spec_from_yaml

pytestmark = pytest.mark.django_db  # node selection is read against the cluster's GPU types

MASTER = "spec.pytorchReplicaSpecs.Master.template.spec"

# A log-shipping sidecar listed before the training container: the Training Operator finds its
# container by name ("pytorch"), not by position.
SIDECAR_FIRST = """
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: ddp, namespace: maps}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers:
            - name: log-shipper
              image: fluent/fluent-bit:2.2
            - name: pytorch
              image: pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime
              command: [torchrun, train.py]
              resources: {limits: {nvidia.com/gpu: 2, memory: 32Gi}}
              env: [{name: A, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]
    Worker:
      replicas: 3
      template:
        spec:
          containers:
            - name: pytorch
              image: pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime
              command: [torchrun, train.py]
              resources: {limits: {nvidia.com/gpu: 2, memory: 32Gi}}
"""


def test_the_training_container_is_read_by_its_name_not_its_position():
    data, unsupported = spec_from_yaml(SIDECAR_FIRST)
    spec = parse_spec(data)
    assert (spec.image, spec.command) == ("pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime", ("torchrun", "train.py"))
    assert [(group.role, group.count, group.gpu) for group in spec.replicas] == [("Master", 1, 2), ("Worker", 3, 2)]
    assert f"{MASTER}.containers[0] (only the pytorch container)" in unsupported
    assert f"{MASTER}.containers[1].env[0] (only literal values)" in unsupported  # named where it stands


def test_a_lone_container_of_another_name_is_the_training_container():
    worker_only = SIDECAR_FIRST[:SIDECAR_FIRST.index("    Master:")] + SIDECAR_FIRST[SIDECAR_FIRST.index("    Worker:"):]
    data, unsupported = spec_from_yaml(worker_only.replace("name: pytorch", "name: main"))
    assert data["image"] == "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime" and unsupported == []


def test_several_containers_none_of_them_named_are_refused_naming_the_one_wanted():
    with pytest.raises(SpecError) as refused:
        spec_from_yaml(SIDECAR_FIRST.replace("name: pytorch", "name: trainer"))
    assert refused.value.errors == {f"{MASTER}.containers": [
        "Required: a container named pytorch, the one the PyTorchJob runs in; got 2 containers."]}  # fmt: skip


# A claim mounted at /checkpoint, the usual name: where Gangway mounts the team's checkpoint claim.
CHECKPOINT_CLAIM = """
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: ddp, namespace: maps}
spec:
  pytorchReplicaSpecs:
    Worker:
      replicas: 2
      template:
        spec:
          containers:
            - name: pytorch
              image: pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime
              resources: {limits: {nvidia.com/gpu: 1, memory: 16Gi}}
              volumeMounts:
                - {name: ckpt, mountPath: /checkpoint}
          volumes:
            - {name: ckpt, persistentVolumeClaim: {claimName: my-ckpts}}
"""
WORKER = "spec.pytorchReplicaSpecs.Worker.template.spec"


@pytest.mark.parametrize("team_claim", ["", "team-ckpts"], ids=["a team with no claim", "a team with another claim"])
def test_a_claim_of_ones_own_at_checkpoint_is_listed_back_not_dropped(maps, team_claim):
    maps.checkpoint_claim = team_claim
    maps.save()
    data, unsupported = spec_from_yaml(CHECKPOINT_CLAIM)
    assert "volumes" not in data
    assert unsupported == [f"{WORKER}.volumes[0] (claim my-ckpts at /checkpoint, where Gangway mounts the team's "
                           "checkpoint claim; mount it at another path)"]  # fmt: skip


def test_the_teams_own_checkpoint_claim_at_checkpoint_is_gangways_to_mount(maps):
    maps.checkpoint_claim = "my-ckpts"
    maps.save()
    data, unsupported = spec_from_yaml(CHECKPOINT_CLAIM)
    assert "volumes" not in data and unsupported == []


# Parameter servers that ask for no /dev/shm; only the workers mount one.
PS_WITHOUT_SHM = """
apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {name: wide, namespace: maps}
spec:
  tfReplicaSpecs:
    PS:
      replicas: 2
      template:
        spec:
          containers:
            - name: tensorflow
              image: tensorflow/tensorflow:2.12.0-gpu
              resources: {limits: {cpu: "4", memory: 4Gi}}
              PS_MOUNTS
          PS_VOLUMES
    Worker:
      replicas: 2
      template:
        spec:
          containers:
            - name: tensorflow
              image: tensorflow/tensorflow:2.12.0-gpu
              resources: {limits: {nvidia.com/gpu: 1, cpu: "8", memory: 32Gi}}
              volumeMounts: [{name: shm, mountPath: /dev/shm}]
          volumes: [{name: shm, emptyDir: {medium: Memory, sizeLimit: 16Gi}}]
"""


def shm_lines(unsupported: list[str]) -> list[str]:
    return [item for item in unsupported if "/dev/shm" in item]


@pytest.mark.parametrize("ps_first", [True, False], ids=["the PS listed first", "the PS listed last"])
def test_a_replica_type_without_the_others_shm_is_listed_back(ps_first):
    text = PS_WITHOUT_SHM.replace("PS_MOUNTS", "").replace("PS_VOLUMES", "")
    if not ps_first:
        ps, worker = text.split("    Worker:\n")
        head, ps = ps.split("    PS:\n")
        text = head + "    Worker:\n" + worker + "    PS:\n" + ps
    data, unsupported = spec_from_yaml(text)
    assert data["shm"] == "16Gi"
    assert shm_lines(unsupported) == ["spec.tfReplicaSpecs.PS.template.spec (no /dev/shm, differs from Worker's 16Gi; "
                                      "one /dev/shm serves every replica, counted in its memory)"]  # fmt: skip


def test_a_replica_type_with_another_shm_is_listed_back():
    text = PS_WITHOUT_SHM.replace("PS_MOUNTS", "volumeMounts: [{name: shm, mountPath: /dev/shm}]").replace(
        "PS_VOLUMES", "volumes: [{name: shm, emptyDir: {medium: Memory, sizeLimit: 1Gi}}]")
    data, unsupported = spec_from_yaml(text)
    assert data["shm"] == "1Gi" and [group["memory"] for group in data["replicas"]] == ["3Gi", "16Gi"]
    assert shm_lines(unsupported) == ["spec.tfReplicaSpecs.Worker.template.spec (a /dev/shm of 16Gi, differs from "
                                      "PS's 1Gi; one /dev/shm serves every replica, counted in its memory)"]  # fmt: skip


def test_replica_types_of_one_shm_list_nothing():
    text = PS_WITHOUT_SHM.replace("PS_MOUNTS", "volumeMounts: [{name: shm, mountPath: /dev/shm}]").replace(
        "PS_VOLUMES", "volumes: [{name: shm, emptyDir: {medium: Memory, sizeLimit: 16Gi}}]")
    data, unsupported = spec_from_yaml(text)
    assert data["shm"] == "16Gi" and shm_lines(unsupported) == []


# Kubeflow's own examples annotate the pod template so that Istio injects no sidecar (a sidecar
# keeps the job from ever completing).
ISTIO_ANNOTATED = """
apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {name: mnist, namespace: maps}
spec:
  tfReplicaSpecs:
    Worker:
      replicas: 2
      template:
        metadata:
          annotations: {sidecar.istio.io/inject: "false"}
          labels: {app: mnist}
        spec:
          containers:
            - name: tensorflow
              image: tensorflow/tensorflow:2.12.0-gpu
              resources: {limits: {nvidia.com/gpu: 1}}
"""


def test_the_pod_templates_metadata_is_listed_back():
    _, unsupported = spec_from_yaml(ISTIO_ANNOTATED)
    assert unsupported == ["spec.tfReplicaSpecs.Worker.template.metadata"]


REQUESTS_AND_LIMITS = """
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: ddp, namespace: maps}
spec:
  pytorchReplicaSpecs:
    Worker:
      replicas: 4
      template:
        spec:
          containers:
            - name: pytorch
              image: pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime
              resources:
                requests: {nvidia.com/gpu: 1, cpu: REQUESTED_CPU, memory: 16Gi}
                limits: {nvidia.com/gpu: 1, cpu: "16", memory: 64Gi}
"""
RESOURCES = "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].resources"


def test_requests_below_the_limits_are_listed_back_with_what_gangway_requests():
    data, unsupported = spec_from_yaml(REQUESTS_AND_LIMITS.replace("REQUESTED_CPU", '"4"'))
    assert (data["replicas"][0]["cpu"], data["replicas"][0]["memory"]) == ("16", "64Gi")
    assert unsupported == [f"{RESOURCES}.requests.cpu (4; Gangway requests the limit, 16)",
                           f"{RESOURCES}.requests.memory (16Gi; Gangway requests the limit, 64Gi)"]  # fmt: skip


def test_requests_equal_to_the_limits_however_written_list_nothing():
    text = REQUESTS_AND_LIMITS.replace("REQUESTED_CPU", "16000m").replace("memory: 16Gi", "memory: 65536Mi")
    assert spec_from_yaml(text)[1] == []


# Fail fast (Never) or retry only retryable exits (ExitCode), and a gang asked of Volcano its own way.
RESTART_AND_SCHEDULING = """
apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {name: mnist, namespace: maps}
spec:
  runPolicy:
    schedulingPolicy: SCHEDULING
  tfReplicaSpecs:
    Worker:
      replicas: 2
      restartPolicy: RESTART
      template:
        spec:
          containers:
            - name: tensorflow
              image: tensorflow/tensorflow:2.12.0-gpu
              resources: {limits: {nvidia.com/gpu: 1}}
"""


def test_a_restart_policy_and_a_scheduling_policy_gangway_replaces_are_listed_back():
    text = RESTART_AND_SCHEDULING.replace("RESTART", "ExitCode").replace(
        "SCHEDULING", "{minAvailable: 1, scheduleTimeoutSeconds: 600, queue: research}")
    _, unsupported = spec_from_yaml(text)
    assert unsupported == [
        "spec.runPolicy.schedulingPolicy.scheduleTimeoutSeconds",
        "spec.tfReplicaSpecs.Worker.restartPolicy (ExitCode; Gangway sets OnFailure, restarting a failed replica in place)",
        "spec.runPolicy.schedulingPolicy.minAvailable (1; Gangway starts all 2 replicas at once)",
        "spec.runPolicy.schedulingPolicy.queue (research; Gangway sets the team's queue)",
    ]


def test_a_restart_policy_and_a_scheduling_policy_as_gangway_sets_them_list_nothing():
    text = RESTART_AND_SCHEDULING.replace("RESTART", "OnFailure").replace(
        "SCHEDULING", "{minAvailable: 2, queue: maps, priorityClass: standard}")
    data, unsupported = spec_from_yaml(text)
    assert unsupported == [] and data["tier"] == "standard"


def test_an_env_value_left_empty_reads_as_empty_as_kubernetes_reads_it():
    data, unsupported = spec_from_yaml(ISTIO_ANNOTATED.replace(
        "              resources:", "              env: [{name: DEBUG, value: }, {name: EMPTY, value: ''}]\n"
                                   "              resources:"))  # fmt: skip
    assert data["env"] == {"DEBUG": "", "EMPTY": ""} and dict(parse_spec(data).env) == {"DEBUG": "", "EMPTY": ""}
