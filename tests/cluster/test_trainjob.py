"""TrainJob (Kubeflow Trainer v2): its manifest against the CRD's fields, and the adapter over the fake API server.

The allowed fields at each level are those of trainer `pkg/apis/trainer/v1alpha1/trainjob_types.go`
(v2.2 and later): TrainJobSpec, RuntimeRef, Trainer, RuntimePatch and the patches below it.
"""

from __future__ import annotations

import re

from jobs import kinds
from scheduling.cluster import job_manifests, kubernetes_tenants
from scheduling.cluster.base import ClusterJob, Phase, ReplicaSpec, TenantTeam, Tenants, TenantTier, VolumeMount
from scheduling.cluster.kubernetes_outside import POLICY_VERSION, POLICY_VERSION_ANNOTATION

GiB = 2**30
TRAIN_JOB_SPEC = {"runtimeRef", "initializer", "trainer", "runtimePatches", "suspend", "activeDeadlineSeconds",
                  "managedBy"}  # fmt: skip
RUNTIME_REF = {"name", "apiGroup", "kind"}
TRAINER = {"image", "command", "args", "env", "numNodes", "resourcesPerNode", "numProcPerNode"}
RUNTIME_PATCH = {"manager", "time", "trainingRuntimeSpec"}
OBJECT_META_PATCH = {"labels", "annotations"}  # "Only labels and annotations are allowed."
POD_SPEC_PATCH = {"serviceAccountName", "volumes", "initContainers", "containers", "imagePullSecrets",
                  "securityContext", "nodeSelector", "affinity", "tolerations", "schedulingGates",
                  "terminationGracePeriodSeconds"}  # fmt: skip
CONTAINER_PATCH = {"name", "env", "volumeMounts", "securityContext"}

JOB = ClusterJob(
    job_id=21, name="llama-g21", namespace="maps", team="maps", kind="TrainJob", runtime="torch-distributed",
    image="pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime", command=("torchrun", "train.py"), args=("--lr", "3e-4"),
    env=(("EPOCHS", "3"),), replicas=(ReplicaSpec("Node", 4, 2, 8000, 64 * GiB),), tier="standard",
    grace_period=90, max_runtime=7200, attempt=2, checkpoint_claim="maps-checkpoints",
    volumes=(VolumeMount("claim", "datasets", "/data", read_only=True),), shm=8 * GiB,
)  # fmt: skip


def _keys_within(obj: dict, allowed: set[str]) -> None:
    assert set(obj) <= allowed, sorted(set(obj) - allowed)


def test_the_trainjob_names_its_runtime_nodes_and_deadline():
    manifest = job_manifests.job_manifest(JOB)
    assert (manifest["apiVersion"], manifest["kind"]) == ("trainer.kubeflow.org/v1alpha1", "TrainJob")
    assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", manifest["metadata"]["name"])  # the CRD's RFC 1035 rule
    assert manifest["metadata"]["labels"]["gangway.io/job-id"] == "21"
    spec = manifest["spec"]
    _keys_within(spec, TRAIN_JOB_SPEC)
    assert spec["runtimeRef"] == {"name": "torch-distributed", "apiGroup": "trainer.kubeflow.org",
                                  "kind": "ClusterTrainingRuntime"}  # fmt: skip
    assert spec["suspend"] is False and spec["activeDeadlineSeconds"] == 7200 and "managedBy" not in spec
    trainer = spec["trainer"]
    _keys_within(trainer, TRAINER)
    assert (trainer["image"], trainer["command"], trainer["args"], trainer["numNodes"]) == (
        "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime", ["torchrun", "train.py"], ["--lr", "3e-4"], 4)
    assert trainer["resourcesPerNode"] == {"requests": {"nvidia.com/gpu": "2", "cpu": "8", "memory": "64Gi"},
                                           "limits": {"nvidia.com/gpu": "2", "cpu": "8", "memory": "64Gi"}}
    env = {item["name"]: item["value"] for item in trainer["env"]}
    assert env == {"EPOCHS": "3", "GANGWAY_JOB_ID": "21", "GANGWAY_ATTEMPT": "2", "CHECKPOINT_DIR": "/checkpoint"}


def test_its_runtime_patch_sets_the_queue_the_pod_labels_and_the_volumes():
    (patch,) = job_manifests.job_manifest(JOB)["spec"]["runtimePatches"]
    _keys_within(patch, RUNTIME_PATCH)
    assert patch["manager"] == "gangway.io/scheduler" and len(patch["manager"]) <= 253
    template = patch["trainingRuntimeSpec"]["template"]
    _keys_within(template["metadata"], OBJECT_META_PATCH)
    # The trainer's Volcano plugin reads the queue from this annotation of the runtime template.
    assert template["metadata"]["annotations"] == {"scheduling.volcano.sh/queue-name": "maps"}
    (replicated,) = template["spec"]["replicatedJobs"]
    assert replicated["name"] == "node" and set(replicated) == {"name", "template"}
    pod = replicated["template"]["spec"]["template"]
    _keys_within(pod["metadata"], OBJECT_META_PATCH)
    assert pod["metadata"]["labels"]["gangway.io/job-id"] == "21" and pod["metadata"]["labels"]["gangway.io/tier"] == "standard"
    _keys_within(pod["spec"], POD_SPEC_PATCH)
    assert pod["spec"]["terminationGracePeriodSeconds"] == 90
    assert pod["spec"]["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert [v["name"] for v in pod["spec"]["volumes"]] == ["checkpoint", "claim-0", "shm"]
    (container,) = pod["spec"]["containers"]
    _keys_within(container, CONTAINER_PATCH)
    assert container["name"] == "node"
    assert [m["mountPath"] for m in container["volumeMounts"]] == ["/checkpoint", "/data", "/dev/shm"]


def test_it_suspends_and_resumes_through_spec_suspend_alone():
    train_job = kinds.get("TrainJob")
    # Gangway's suspend carries its mark, and a resume removes it (scheduling.cluster.manifests).
    assert job_manifests.suspend_patch(train_job) == {"metadata": {"annotations": {"gangway.io/suspended-by": "gangway"}},
                                                      "spec": {"suspend": True}}  # fmt: skip
    assert job_manifests.resume_patch(JOB) == {"metadata": {"annotations": {"gangway.io/suspended-by": None}},
                                               "spec": {"suspend": False}}  # trainer is immutable
    assert job_manifests.replica_needs(job_manifests.job_manifest(JOB)) == [
        ("Node", 4, {"nvidia.com/gpu": "2", "cpu": "8", "memory": "64Gi"})]


# -- the adapter over the fake API server ------------------------------------------

def _created(fake, cluster) -> dict:
    fake.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "maps"}})
    fake.add({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "datasets", "namespace": "maps"}})
    cluster.create_job(JOB)
    return fake.get("TrainJob", "llama-g21", "maps")


def _with_conditions(fake, *conditions: tuple[str, str, str]) -> None:
    obj = fake.get("TrainJob", "llama-g21", "maps")
    obj["status"] = {"conditions": [{"type": t, "status": s, "message": m, "reason": t} for t, s, m in conditions]}
    fake.add(obj)


def _node_pod(fake, index: int, phase: str = "Running") -> None:
    labels = {"gangway.io/job-id": "21", "jobset.sigs.k8s.io/replicatedjob-name": "node",
              "batch.kubernetes.io/job-completion-index": str(index)}  # fmt: skip
    fake.add({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"llama-g21-node-0-{index}", "namespace": "maps",
              "labels": labels}, "spec": {"nodeName": f"n{index}", "containers": [{"name": "node"}]},
              "status": {"phase": phase}})  # fmt: skip


def test_the_adapter_creates_it_in_the_team_namespace(fake, cluster):
    created = _created(fake, cluster)
    assert created["spec"]["runtimeRef"]["name"] == "torch-distributed" and created["spec"]["suspend"] is False
    assert ("POST", "/apis/trainer.kubeflow.org/v1alpha1/namespaces/maps/trainjobs") in fake.log
    cluster.create_job(JOB)  # a retried create finds it
    assert len(fake.list("TrainJob")) == 1


def test_the_adapter_suspends_and_resumes_it(fake, cluster):
    _created(fake, cluster)
    cluster.suspend_job(JOB)
    assert fake.get("TrainJob", "llama-g21", "maps")["spec"]["suspend"] is True
    assert [s.phase for s in cluster.job_statuses()] == [Phase.SUSPENDED]
    cluster.create_job(JOB)
    resumed = fake.get("TrainJob", "llama-g21", "maps")
    assert resumed["spec"]["suspend"] is False
    assert resumed["spec"]["trainer"] == job_manifests.job_manifest(JOB)["spec"]["trainer"]


def test_it_reads_the_trainers_conditions_back(fake, cluster):
    _created(fake, cluster)
    assert [(s.phase, s.running_pods) for s in cluster.job_statuses()] == [(Phase.CREATED, 0)]
    for index in range(4):
        _node_pod(fake, index)
    # The trainer has no Running condition: a TrainJob whose pods run is running.
    assert [(s.phase, s.running_pods) for s in cluster.job_statuses()] == [(Phase.RUNNING, 4)]
    _with_conditions(fake, ("Suspended", "False", "TrainJob is resumed"))
    assert cluster.job_statuses()[0].phase is Phase.RUNNING
    _with_conditions(fake, ("Complete", "True", "TrainJob is completed"))
    assert [(s.phase, s.message) for s in cluster.job_statuses()] == [(Phase.SUCCEEDED, "TrainJob is completed")]
    _with_conditions(fake, ("Failed", "True", "TrainJob is failed"))
    assert cluster.job_statuses()[0].phase is Phase.FAILED


def test_it_names_a_trainjobs_replicas_by_node(fake, cluster):
    _created(fake, cluster)
    _node_pod(fake, 1)
    _node_pod(fake, 0)
    assert [replica.replica for replica in cluster.logs("maps", 21)] == ["node-0", "node-1"]


def test_it_deletes_it(fake, cluster):
    _created(fake, cluster)
    cluster.delete_job("maps", "llama-g21", "TrainJob")
    assert fake.list("TrainJob") == []


TENANTS = Tenants(teams=(TenantTeam(slug="maps", nominal={"gpu": 8}, borrowing_limit={}),),
                  tiers=(TenantTier("standard", 100, True),))  # fmt: skip


def _cluster_with(fake, crds) -> None:
    """A cluster with a GPU node, a running Volcano scheduler, the queue admission policy (bound) and these CRDs."""
    for name in crds:
        fake.add({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": name}})
    fake.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "volcano-system"}})
    fake.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "maps"}})  # the tenant sync has run
    fake.add({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "volcano-scheduler", "namespace": "volcano-system",
              "labels": {"app": "volcano-scheduler"}}, "spec": {}, "status": {"phase": "Running"}})  # fmt: skip
    fake.add({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "spec": {},
              "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "64", "memory": "256Gi"}}})  # fmt: skip
    fake.add({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
              "metadata": {"name": "gangway-queue-required", "annotations": {POLICY_VERSION_ANNOTATION: POLICY_VERSION}},
              "spec": {}})  # fmt: skip
    fake.add({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
              "metadata": {"name": "gangway-queue-required"},
              "spec": {"policyName": "gangway-queue-required", "validationActions": ["Deny"]}})  # fmt: skip


def test_doctor_reports_the_trainers_missing_crds(fake, cluster):
    _cluster_with(fake, ("tfjobs.kubeflow.org", "pytorchjobs.kubeflow.org", "podgroups.scheduling.volcano.sh",
                         "queues.scheduling.volcano.sh"))  # fmt: skip
    findings = cluster.doctor(TENANTS)
    # The Training Operator's kinds still run: the missing Trainer is a note, not a problem.
    assert [(f.problem.split()[2], f.fix, f.blocking) for f in findings] == [
        ("trainjobs.trainer.kubeflow.org", "Install Kubeflow Trainer v2 on the cluster before anyone submits a TrainJob.", False),
        ("clustertrainingruntimes.trainer.kubeflow.org",
         "Install Kubeflow Trainer v2 on the cluster before anyone submits a TrainJob.", False),
    ]
    assert "so TrainJob jobs cannot run on this cluster (the cluster runs TFJob, PyTorchJob)" in findings[0].problem


def test_doctor_blocks_when_no_job_kind_can_run(fake, cluster):
    _cluster_with(fake, ("podgroups.scheduling.volcano.sh", "queues.scheduling.volcano.sh"))
    findings = cluster.doctor(TENANTS)
    assert findings and all(f.blocking for f in findings)
    assert {f.problem.split()[2] for f in findings} >= {"tfjobs.kubeflow.org", "trainjobs.trainer.kubeflow.org"}


def _runtime(name: str, **spec) -> dict:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime", "metadata": {"name": name},
            "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, **spec}}


def test_doctor_reports_a_runtime_that_volcano_would_not_gang_schedule(fake, cluster):
    _cluster_with(fake, kubernetes_tenants.required_crds())
    fake.add(_runtime("torch-distributed-volcano", podGroupPolicy={"volcano": {}}))
    fake.add(_runtime("torch-distributed"))
    findings = cluster.doctor(TENANTS)
    assert [f.problem for f in findings] == [
        "ClusterTrainingRuntime torch-distributed has no spec.podGroupPolicy.volcano, so the pods of a TrainJob on "
        "it are not gang-scheduled by Volcano."]
    assert findings[0].fix.startswith("Add podGroupPolicy.volcano: {} to ClusterTrainingRuntime torch-distributed")
