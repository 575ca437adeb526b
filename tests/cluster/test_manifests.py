"""Manifest builders checked against the Training Operator SDK models, no cluster needed."""

import json

import pytest
from kubeflow.training import models
from kubeflow.training.api_client import ApiClient

from jobs import kinds
from scheduling.cluster import manifests
from scheduling.cluster.base import ClusterJob, ReplicaSpec, TenantTeam, TenantTier

GiB = 2**30


class _Response:
    """What the SDK's ApiClient.deserialize reads: a body in `.data`."""

    def __init__(self, obj: dict):
        self.data = json.dumps(obj)


def _job(**overrides) -> ClusterJob:
    fields = dict(
        job_id=12,
        name="resnet-g12",
        namespace="maps",
        team="maps",
        kind="TFJob",
        image="tensorflow/tensorflow:2.12.0-gpu",
        command=("python", "/app/train.py"),
        args=("--epochs", "90"),
        env=(("DATASET", "imagenet"),),
        replicas=(
            ReplicaSpec(role="Chief", count=1, gpu=1, cpu=2000, memory=4 * GiB),
            ReplicaSpec(role="Worker", count=3, gpu=2, cpu=500, memory=3 * 2**20 + 1),
        ),
        tier="standard",
        grace_period=120,
        max_runtime=7200,
        attempt=3,
        checkpoint_claim="maps-checkpoints",
    )
    fields.update(overrides)
    return ClusterJob(**fields)


def _round_trip(manifest: dict, model: str):
    """Returns the SDK model parsed from the manifest, after checking nothing was dropped."""
    client = ApiClient()
    parsed = client.deserialize(_Response(manifest), model)
    assert client.sanitize_for_serialization(parsed) == manifest
    return parsed


def _templates(manifest: dict) -> dict:
    kind = kinds.get(manifest["kind"])
    return {role: spec["template"] for role, spec in manifest["spec"][kind.replica_specs].items()}


def test_it_builds_a_tfjob_the_sdk_reads_without_loss():
    tfjob = _round_trip(manifests.training_job(_job()), "KubeflowOrgV1TFJob")

    assert isinstance(tfjob, models.KubeflowOrgV1TFJob)
    assert tfjob.api_version == "kubeflow.org/v1"
    assert tfjob.kind == "TFJob"
    assert (tfjob.metadata.namespace, tfjob.metadata.name) == ("maps", "resnet-g12")
    assert set(tfjob.spec.tf_replica_specs) == {"Chief", "Worker"}
    worker = tfjob.spec.tf_replica_specs["Worker"]
    assert worker.replicas == 3
    assert worker.restart_policy == "OnFailure"
    assert worker.template.spec.containers[0].name == "tensorflow"


def test_it_builds_a_pytorchjob_the_sdk_reads_without_loss():
    job = _job(
        kind="PyTorchJob",
        replicas=(
            ReplicaSpec(role="Master", count=1, gpu=1, cpu=4000, memory=8 * GiB),
            ReplicaSpec(role="Worker", count=2, gpu=1, cpu=4000, memory=8 * GiB),
        ),
    )
    pytorchjob = _round_trip(manifests.training_job(job), "KubeflowOrgV1PyTorchJob")

    assert isinstance(pytorchjob, models.KubeflowOrgV1PyTorchJob)
    assert pytorchjob.kind == "PyTorchJob"
    assert set(pytorchjob.spec.pytorch_replica_specs) == {"Master", "Worker"}
    for spec in pytorchjob.spec.pytorch_replica_specs.values():
        assert spec.template.spec.containers[0].name == "pytorch"
    assert pytorchjob.spec.run_policy.scheduling_policy.min_available == 3


@pytest.mark.parametrize("kind", ["TFJob", "PyTorchJob"])
def test_it_gang_schedules_every_replica_with_volcano(kind):
    roles = {"TFJob": ("Chief", "Worker"), "PyTorchJob": ("Master", "Worker")}[kind]
    job = _job(kind=kind, replicas=tuple(
        ReplicaSpec(role=role, count=n, gpu=1, cpu=1000, memory=GiB) for role, n in zip(roles, (1, 4))
    ))
    manifest = manifests.training_job(job)
    policy = manifest["spec"]["runPolicy"]

    assert policy["schedulingPolicy"] == {"minAvailable": 5, "queue": "maps", "priorityClass": "standard"}
    assert policy["suspend"] is False
    assert policy["activeDeadlineSeconds"] == 7200
    assert policy["cleanPodPolicy"] == "Running"
    for template in _templates(manifest).values():
        assert template["spec"]["schedulerName"] == "volcano"
        assert template["spec"]["priorityClassName"] == "standard"
        assert template["spec"]["terminationGracePeriodSeconds"] == 120
        assert template["spec"]["tolerations"] == [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
        ]


def test_it_labels_the_job_and_its_pods_with_the_gangway_job():
    manifest = manifests.training_job(_job())
    expected = {"gangway.io/job-id": "12", "gangway.io/team": "maps"}

    assert expected.items() <= manifest["metadata"]["labels"].items()
    for template in _templates(manifest).values():
        assert expected.items() <= template["metadata"]["labels"].items()


def test_it_asks_for_requests_equal_to_limits():
    templates = _templates(manifests.training_job(_job()))
    chief = templates["Chief"]["spec"]["containers"][0]["resources"]
    worker = templates["Worker"]["spec"]["containers"][0]["resources"]

    assert chief["requests"] == chief["limits"] == {"nvidia.com/gpu": "1", "cpu": "2", "memory": "4Gi"}
    assert worker["requests"] == worker["limits"] == {
        "nvidia.com/gpu": "2", "cpu": "500m", "memory": str(3 * 2**20 + 1),
    }


def test_it_leaves_gpus_out_of_a_cpu_only_replica():
    job = _job(replicas=(ReplicaSpec(role="Worker", count=1, gpu=0, cpu=1000, memory=GiB),))
    resources = _templates(manifests.training_job(job))["Worker"]["spec"]["containers"][0]["resources"]

    assert resources["limits"] == {"cpu": "1", "memory": "1Gi"}


def test_it_passes_command_args_env_attempt_and_checkpoint():
    container = _templates(manifests.training_job(_job()))["Worker"]["spec"]["containers"][0]
    template_spec = _templates(manifests.training_job(_job()))["Worker"]["spec"]

    assert container["image"] == "tensorflow/tensorflow:2.12.0-gpu"
    assert container["command"] == ["python", "/app/train.py"]
    assert container["args"] == ["--epochs", "90"]
    assert container["env"] == [
        {"name": "DATASET", "value": "imagenet"},
        {"name": "GANGWAY_JOB_ID", "value": "12"},
        {"name": "GANGWAY_ATTEMPT", "value": "3"},
        {"name": "CHECKPOINT_DIR", "value": "/checkpoint"},
    ]
    assert container["volumeMounts"] == [{"name": "checkpoint", "mountPath": "/checkpoint"}]
    assert template_spec["volumes"] == [
        {"name": "checkpoint", "persistentVolumeClaim": {"claimName": "maps-checkpoints"}}
    ]


def test_it_mounts_nothing_and_sets_no_deadline_when_none_is_asked():
    job = _job(checkpoint_claim="", max_runtime=None, command=(), args=(), env=())
    manifest = _round_trip(manifests.training_job(job), "KubeflowOrgV1TFJob")
    container = manifest.spec.tf_replica_specs["Worker"].template.spec.containers[0]

    assert manifest.spec.run_policy.active_deadline_seconds is None
    assert container.volume_mounts is None and container.command is None and container.args is None
    assert [e.name for e in container.env] == ["GANGWAY_JOB_ID", "GANGWAY_ATTEMPT"]
    assert manifest.spec.tf_replica_specs["Worker"].template.spec.volumes is None


def test_gangway_variables_win_over_the_jobs_own_env():
    job = _job(env=(("GANGWAY_ATTEMPT", "99"), ("A", "1")))
    env = _templates(manifests.training_job(job))["Worker"]["spec"]["containers"][0]["env"]

    assert {"name": "GANGWAY_ATTEMPT", "value": "3"} in env
    assert [e["name"] for e in env].count("GANGWAY_ATTEMPT") == 1


TEAM = TenantTeam(
    slug="maps",
    nominal={"gpu": 8, "cpu": 64000, "memory": 256 * GiB},
    borrowing_limit={"gpu": 4, "cpu": 0},
    per_replica_max={"gpu": 8, "cpu": 32000, "memory": 128 * GiB},
    default_request={"cpu": 1000, "memory": 2 * GiB},
    weight=2.0,
)


def test_the_quota_caps_requests_at_nominal_plus_borrowing_limit():
    quota = manifests.resource_quota(TEAM)

    assert quota["metadata"]["namespace"] == "maps"
    assert quota["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gangway"}
    # memory names no borrowing limit, so nothing caps it.
    assert quota["spec"]["hard"] == {"requests.nvidia.com/gpu": "12", "requests.cpu": "64"}


def test_the_limit_range_carries_per_pod_maximums_and_container_defaults():
    limits = manifests.limit_range(TEAM)["spec"]["limits"]

    assert limits == [
        {"type": "Pod", "max": {"nvidia.com/gpu": "8", "cpu": "32", "memory": "128Gi"}},
        {"type": "Container", "default": {"cpu": "1", "memory": "2Gi"},
         "defaultRequest": {"cpu": "1", "memory": "2Gi"}},
    ]


def test_the_volcano_queue_deserves_nominal_and_is_capped_at_the_ceiling():
    queue = manifests.volcano_queue(TEAM)

    assert queue["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert queue["kind"] == "Queue"
    assert queue["metadata"]["name"] == "maps"
    assert "namespace" not in queue["metadata"]  # Queues are cluster-scoped
    assert queue["spec"] == {
        "weight": 2,
        "reclaimable": True,
        "deserved": {"nvidia.com/gpu": "8", "cpu": "64", "memory": "256Gi"},
        "capability": {"nvidia.com/gpu": "12", "cpu": "64"},
    }


def test_the_priority_class_has_the_tiers_name_and_value_and_never_preempts():
    for tier in (TenantTier("production", 1000, False), TenantTier("standard", 100, True)):
        pc = manifests.priority_class(tier)
        assert pc["apiVersion"] == "scheduling.k8s.io/v1"
        assert (pc["metadata"]["name"], pc["value"]) == (tier.name, tier.value)
        assert pc["preemptionPolicy"] == "Never"
        assert pc["globalDefault"] is False


def test_the_namespace_is_the_team_slug_and_managed_by_gangway():
    ns = manifests.namespace(TEAM)

    assert ns["metadata"] == {
        "name": "maps",
        "labels": {"gangway.io/team": "maps", "app.kubernetes.io/managed-by": "gangway"},
    }


def test_it_mounts_claims_config_maps_and_a_memory_backed_shm():
    from scheduling.cluster.base import VolumeMount

    job = _job(checkpoint_claim="", shm=8 * GiB, volumes=(
        VolumeMount(source="claim", name="datasets", path="/data", read_only=True),
        VolumeMount(source="config_map", name="train-config", path="/etc/train", read_only=True),
    ))  # fmt: skip
    manifest = manifests.training_job(job)
    _round_trip(manifest, "KubeflowOrgV1TFJob")
    spec = _templates(manifest)["Worker"]["spec"]
    assert spec["volumes"] == [
        {"name": "claim-0", "persistentVolumeClaim": {"claimName": "datasets", "readOnly": True}},
        {"name": "config-1", "configMap": {"name": "train-config"}},
        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}},
    ]
    assert spec["containers"][0]["volumeMounts"] == [
        {"name": "claim-0", "mountPath": "/data", "readOnly": True},
        {"name": "config-1", "mountPath": "/etc/train", "readOnly": True},
        {"name": "shm", "mountPath": "/dev/shm"},
    ]


def test_pods_use_only_the_volume_types_of_the_restricted_standard():
    from scheduling.cluster.base import VolumeMount

    job = _job(shm=GiB, volumes=(VolumeMount(source="claim", name="datasets", path="/data"),))
    for template in _templates(manifests.training_job(job)).values():
        spec = template["spec"]
        for volume in spec["volumes"]:
            assert set(volume) - {"name"} <= set(manifests.VOLUME_TYPES)
        assert "hostNetwork" not in spec and "hostPID" not in spec and "hostIPC" not in spec
        assert not (spec["containers"][0].get("securityContext") or {}).get("privileged")
