"""The Kubernetes adapter over real HTTP against the fake API server."""

import dataclasses
import socket
import threading
import time

import pytest
from kubernetes.client import Configuration

from scheduling.cluster.base import (
    ClusterError,
    ClusterJob,
    ClusterUnavailable,
    NoAnswer,
    NodeInfo,
    OutsidePod,
    Phase,
    ReplicaSpec,
    SyncIncomplete,
    TenantTeam,
    Tenants,
    TenantTier,
)
from scheduling.cluster.kubernetes import KubernetesCluster
from scheduling.cluster.kubernetes_api import client_for
from scheduling.cluster.kubernetes_outside import POLICY_VERSION, POLICY_VERSION_ANNOTATION

GiB = 2**30

JOB = ClusterJob(
    job_id=12, name="resnet-g12", namespace="maps", team="maps", kind="TFJob",
    image="tensorflow/tensorflow:2.12.0-gpu", command=("python", "/app/train.py"), args=(),
    env=(("DATASET", "imagenet"),),
    replicas=(ReplicaSpec(role="Worker", count=2, gpu=1, cpu=2000, memory=4 * GiB),),
    tier="standard", grace_period=60, max_runtime=3600,
)

TENANTS = Tenants(
    teams=(
        TenantTeam(slug="maps", nominal={"gpu": 8, "cpu": 32000}, borrowing_limit={"gpu": 4},
                   per_replica_max={"gpu": 8}, default_request={"cpu": 500, "memory": GiB}),
        TenantTeam(slug="vision", nominal={"gpu": 8}, borrowing_limit={"gpu": 0}, weight=2.0),
    ),
    tiers=(TenantTier("production", 1000, False), TenantTier("standard", 100, True)),
)


def _namespace(name):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def _node(name, gpu="8", cpu="64", memory="256Gi", **spec):
    allocatable = {"cpu": cpu, "memory": memory, "pods": "110"}
    if gpu is not None:
        allocatable["nvidia.com/gpu"] = gpu
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "spec": spec, "status": {"allocatable": allocatable}}


def _pod(name, namespace="default", node="n1", phase="Running", labels=None, requests=None, **spec):
    container = {"name": "main", "image": "busybox", "resources": {"requests": requests or {}}}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "spec": {"nodeName": node, "containers": [container], **spec},
            "status": {"phase": phase}}


def _tfjob(fake):
    return fake.get("TFJob", "resnet-g12", "maps")


# -- jobs ----------------------------------------------------------------------

def test_creating_a_job_twice_makes_one_object(fake, cluster):
    fake.add(_namespace("maps"))

    cluster.create_job(JOB)
    cluster.create_job(JOB)

    jobs = fake.list("TFJob")
    assert [j["metadata"]["name"] for j in jobs] == ["resnet-g12"]
    assert jobs[0]["spec"]["runPolicy"]["suspend"] is False
    assert [m for m, p in fake.log if p.endswith("/tfjobs")] == ["POST", "POST"]


def test_suspend_then_create_resumes_the_job_with_the_next_attempt(fake, cluster):
    fake.add(_namespace("maps"))
    cluster.create_job(JOB)

    cluster.suspend_job(JOB)
    assert _tfjob(fake)["spec"]["runPolicy"]["suspend"] is True

    cluster.create_job(dataclasses.replace(JOB, attempt=2))
    resumed = _tfjob(fake)
    env = resumed["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["env"]
    assert resumed["spec"]["runPolicy"]["suspend"] is False
    assert {"name": "GANGWAY_ATTEMPT", "value": "2"} in env
    assert resumed["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] == 2


def test_creating_a_running_job_again_leaves_it_untouched(fake, cluster):
    fake.add(_namespace("maps"))
    cluster.create_job(JOB)
    version = _tfjob(fake)["metadata"]["resourceVersion"]

    cluster.create_job(dataclasses.replace(JOB, attempt=2))

    assert _tfjob(fake)["metadata"]["resourceVersion"] == version


def test_suspending_a_missing_job_is_success(cluster):
    cluster.suspend_job(JOB)


def test_deleting_removes_the_job_and_a_missing_job_is_success(fake, cluster):
    fake.add(_namespace("maps"))
    cluster.create_job(JOB)

    cluster.delete_job("maps", "resnet-g12", "TFJob")
    cluster.delete_job("maps", "resnet-g12", "TFJob")

    assert fake.list("TFJob") == []


def test_deleting_a_tfjob_leaves_a_pytorchjob_of_the_same_name_and_makes_one_call(fake, cluster):
    fake.add(_namespace("maps"))
    cluster.create_job(JOB)
    # A person's own PyTorchJob that happens to share the Gangway TFJob's name and namespace.
    fake.add({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
              "metadata": {"name": "resnet-g12", "namespace": "maps"}, "spec": {}})  # fmt: skip
    fake.log.clear()

    cluster.delete_job("maps", "resnet-g12", "TFJob")

    assert fake.list("TFJob") == []
    assert [j["metadata"]["name"] for j in fake.list("PyTorchJob")] == ["resnet-g12"]
    assert fake.log == [("DELETE", "/apis/kubeflow.org/v1/namespaces/maps/tfjobs/resnet-g12")]


@pytest.mark.parametrize(
    ("conditions", "suspend", "phase"),
    [
        ([], False, Phase.CREATED),
        ([("Created", "True")], False, Phase.CREATED),
        ([("Created", "True"), ("Running", "True")], False, Phase.RUNNING),
        ([("Created", "True"), ("Running", "False"), ("Restarting", "True")], False, Phase.RESTARTING),
        ([("Created", "True"), ("Restarting", "True"), ("Running", "False"), ("Succeeded", "True")],
         False, Phase.SUCCEEDED),
        ([("Created", "True"), ("Running", "False"), ("Failed", "True")], False, Phase.FAILED),
        ([("Created", "True"), ("Running", "False"), ("Suspended", "True")], True, Phase.SUSPENDED),
        ([("Created", "True"), ("Running", "True")], True, Phase.SUSPENDED),
    ],
    ids=["no condition yet is created", "created", "running", "restarting", "succeeded after a restart",
         "failed", "suspended", "asked to suspend before the operator says so"],
)
def test_statuses_are_mapped_from_conditions(fake, cluster, conditions, suspend, phase):
    fake.add(_namespace("maps"))
    cluster.create_job(JOB)
    job = _tfjob(fake)
    job["spec"]["runPolicy"]["suspend"] = suspend
    job["status"] = {"conditions": [
        {"type": kind, "status": status, "message": f"TFJob maps/resnet-g12 is {kind.lower()}."}
        for kind, status in conditions
    ]}
    fake.add(job)

    [status] = cluster.job_statuses()

    assert (status.job_id, status.namespace, status.name, status.phase) == (12, "maps", "resnet-g12", phase)


def test_statuses_count_running_pods_of_each_job_and_ignore_other_objects(fake, cluster):
    fake.add(_namespace("maps"))
    cluster.create_job(JOB)
    cluster.create_job(dataclasses.replace(JOB, job_id=13, name="bert-g13", kind="PyTorchJob"))
    labels = {"gangway.io/job-id": "12", "gangway.io/team": "maps"}
    fake.add(_pod("resnet-g12-worker-0", "maps", node="n1", labels=labels))
    fake.add(_pod("resnet-g12-worker-1", "maps", node="n2", labels=labels))
    fake.add(_pod("resnet-g12-worker-2", "maps", node=None, phase="Pending", labels=labels))
    fake.add({"apiVersion": "kubeflow.org/v1", "kind": "TFJob",
              "metadata": {"name": "hand-made", "namespace": "maps"}, "spec": {}})

    statuses = cluster.job_statuses()

    assert [(s.job_id, s.running_pods, s.nodes) for s in statuses] == [(12, 2, ("n1", "n2")), (13, 0, ())]


def test_statuses_carry_no_checkpoint_since_pods_report_theirs_through_the_endpoint(fake, cluster):
    fake.add(_namespace("maps"))
    cluster.create_job(JOB)
    job = _tfjob(fake)
    job["status"] = {"conditions": [{"type": "Running", "status": "True"}]}
    fake.add(job)
    fake.add(_pod("resnet-g12-worker-0", "maps", node="n1", labels={"gangway.io/job-id": "12"}))

    [status] = cluster.job_statuses()

    assert (status.phase, status.running_pods, status.checkpointed_at) == (Phase.RUNNING, 1, None)


def test_a_cluster_without_kubeflow_trainer_still_reports_its_tfjobs(fake, cluster):
    """No TrainJob CRD (its list answers 404): reconcile still reads every other kind's jobs."""
    fake.add(_namespace("maps"))
    cluster.create_job(JOB)
    fake.fail(404, method="GET", path="/trainjobs$")

    assert [(s.job_id, s.name) for s in cluster.job_statuses()] == [(12, "resnet-g12")]


# -- nodes and outside usage ----------------------------------------------------

def test_nodes_are_read_from_allocatable_quantities(fake, cluster):
    fake.add(_node("n2", gpu="8", cpu="64", memory="256Gi"))
    fake.add(_node("n1", gpu="4", cpu="15500m", memory="63900Mi"))
    fake.add(_node("cpu-only", gpu=None, cpu="8", memory="32G"))

    assert cluster.nodes() == [
        NodeInfo("cpu-only", gpu=0, cpu=8000, memory=32 * 10**9),
        NodeInfo("n1", gpu=4, cpu=15500, memory=63900 * 2**20),
        NodeInfo("n2", gpu=8, cpu=64000, memory=256 * GiB),
    ]


def test_cordoned_and_tainted_nodes_are_reported_not_schedulable_saying_why(fake, cluster):
    """Such nodes are not left out: R10 counts them (a job only they could hold waits for them)."""
    fake.add(_node("ok", taints=[{"key": "nvidia.com/gpu", "effect": "PreferNoSchedule"}]))
    fake.add(_node("cordoned", unschedulable=True,
                   taints=[{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]))
    fake.add(_node("draining", taints=[{"key": "maintenance", "effect": "NoExecute"}]))
    fake.add(_node("reserved", taints=[{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]))
    fake.add(_node("gpu-pool", taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]))
    fake.add(_node("gpu-evicting", taints=[{"key": "nvidia.com/gpu", "effect": "NoExecute"}]))

    nodes = cluster.nodes()

    assert [(node.name, node.unschedulable) for node in nodes] == [
        ("cordoned", "cordoned"), ("draining", "tainted maintenance"), ("gpu-evicting", "tainted nvidia.com/gpu"),
        ("gpu-pool", ""), ("ok", ""), ("reserved", "tainted dedicated"),
    ]
    assert [node.name for node in nodes if node.schedulable] == ["gpu-pool", "ok"]
    assert nodes[0] == NodeInfo("cordoned", gpu=8, cpu=64000, memory=256 * GiB, unschedulable="cordoned")


def test_doctor_counts_only_the_nodes_that_take_pods(fake, cluster):
    fake.add(_node("n1", unschedulable=True))
    fake.add(_node("n2", taints=[{"key": "maintenance", "effect": "NoSchedule"}]))

    problems = [finding.problem for finding in cluster.doctor(Tenants(teams=(), tiers=()))]

    assert "None of the 2 nodes accepts pods: all are cordoned or tainted NoSchedule/NoExecute." in problems


def test_outside_usage_counts_pods_gangway_did_not_create(fake, cluster):
    fake.add(_pod("notebook", "research", requests={"nvidia.com/gpu": "1", "cpu": "500m", "memory": "1Gi"}))
    fake.add(_pod("bound", "research", node="n2", phase="Pending", requests={"cpu": "2"},
                  initContainers=[{"name": "init", "resources": {"requests": {"cpu": "3"}}}]))
    fake.add(_pod("unbound", "research", node=None, phase="Pending", requests={"cpu": "2"}))
    fake.add(_pod("finished", "research", phase="Succeeded", requests={"cpu": "2"}))
    fake.add(_pod("worker", "maps", labels={"gangway.io/job-id": "12"}, requests={"nvidia.com/gpu": "1"}))

    assert sorted(cluster.outside_usage(), key=lambda pod: pod.name) == [
        OutsidePod("research", "bound", node="n2", gpu=0, cpu=3000, memory=0),
        OutsidePod("research", "notebook", node="n1", gpu=1, cpu=500, memory=GiB),
    ]


# -- tenants -------------------------------------------------------------------------

def test_tenant_sync_creates_everything_then_changes_nothing(fake, cluster):
    first = cluster.sync_tenants(TENANTS)
    second = cluster.sync_tenants(TENANTS)

    assert "Created Namespace maps." in first
    assert "Created ResourceQuota maps/gangway-quota." in first
    assert "Created PriorityClass production." in first
    assert "Created Queue vision." in first
    assert len(first) == 2 + 4 * 2
    assert second == []
    assert [m for m, _ in fake.log[-10:]] == ["GET"] * 10  # the second run only read
    queue = fake.get("Queue", "maps")
    assert queue["spec"]["capability"] == {"nvidia.com/gpu": "12"}
    assert queue["spec"]["deserved"] == {"nvidia.com/gpu": "8", "cpu": "32"}
    assert fake.get("ResourceQuota", "gangway-quota", "vision")["spec"]["hard"] == {"requests.nvidia.com/gpu": "8"}


def test_tenant_sync_reads_quantities_as_the_server_rewrites_them(fake, cluster):
    cluster.sync_tenants(TENANTS)
    queue = fake.get("Queue", "maps")
    queue["spec"]["deserved"] = {"nvidia.com/gpu": "8", "cpu": "32000m"}
    fake.add(queue)

    assert cluster.sync_tenants(TENANTS) == []


def test_tenant_sync_repairs_drift_and_keeps_foreign_labels(fake, cluster):
    cluster.sync_tenants(TENANTS)
    quota = fake.get("ResourceQuota", "gangway-quota", "maps")
    quota["spec"]["hard"] = {"requests.nvidia.com/gpu": "100", "pods": "10"}
    quota["metadata"]["labels"]["owner"] = "platform"
    fake.add(quota)

    assert cluster.sync_tenants(TENANTS) == ["Updated ResourceQuota maps/gangway-quota (spec.hard)."]
    repaired = fake.get("ResourceQuota", "gangway-quota", "maps")
    assert repaired["spec"]["hard"] == {"requests.nvidia.com/gpu": "12"}
    assert repaired["metadata"]["labels"]["owner"] == "platform"


def test_tenant_sync_follows_a_quota_change(fake, cluster):
    cluster.sync_tenants(TENANTS)
    maps = dataclasses.replace(TENANTS.teams[0], borrowing_limit={})
    changed = dataclasses.replace(TENANTS, teams=(maps, TENANTS.teams[1]))

    assert cluster.sync_tenants(changed) == [
        "Updated ResourceQuota maps/gangway-quota (spec.hard).",
        "Updated Queue maps (spec.capability).",
    ]
    assert "capability" not in fake.get("Queue", "maps")["spec"]


def test_tenant_sync_recreates_a_priority_class_whose_value_changed(fake, cluster):
    cluster.sync_tenants(TENANTS)
    raised = dataclasses.replace(TENANTS, tiers=(TenantTier("production", 2000, False), TENANTS.tiers[1]))

    assert cluster.sync_tenants(raised) == [
        "Recreated PriorityClass production (value cannot change in place)."
    ]
    assert fake.get("PriorityClass", "production")["value"] == 2000


def test_tenant_sync_reads_again_after_a_stale_resource_version(fake, cluster):
    cluster.sync_tenants(TENANTS)
    quota = fake.get("ResourceQuota", "gangway-quota", "maps")
    quota["spec"]["hard"] = {}
    fake.add(quota)
    fake.fail(409, method="PUT", path="/resourcequotas/gangway-quota$")
    fake.log.clear()

    assert cluster.sync_tenants(TENANTS) == ["Updated ResourceQuota maps/gangway-quota (spec.hard)."]
    assert [m for m, p in fake.log if p.endswith("/namespaces/maps/resourcequotas/gangway-quota")] == [
        "GET", "PUT", "GET", "PUT",
    ]



TERMINATING = ('resourcequotas "gangway-quota" is forbidden: unable to create new content in namespace maps '
               "because it is being terminated")


def test_tenant_sync_goes_on_past_an_object_the_cluster_refuses_and_says_what_it_refused(fake, cluster):
    fake.fail(403, method="POST", path="/namespaces/maps/resourcequotas$", times=100, message=TERMINATING)
    with pytest.raises(SyncIncomplete) as error:
        cluster.sync_tenants(TENANTS)
    assert fake.get("Namespace", "vision") is not None  # the team after it: in line all the same
    assert fake.get("ResourceQuota", "gangway-quota", "vision") is not None
    assert sorted(q["metadata"]["name"] for q in fake.list("Queue")) == ["maps", "vision"]
    assert error.value.failures == [f"create ResourceQuota maps/gangway-quota: 403 Forbidden: {TERMINATING}"]
    assert "Created Namespace vision." in error.value.changes


def test_tenant_sync_leaves_out_the_objects_of_a_namespace_it_could_not_create(fake, cluster):
    fake.fail(403, method="POST", path="/api/v1/namespaces$", times=1, message='namespaces "maps" is forbidden')
    with pytest.raises(SyncIncomplete) as error:
        cluster.sync_tenants(TENANTS)
    assert [failure.split(":")[0] for failure in error.value.failures] == [
        "create Namespace maps", "ResourceQuota maps/gangway-quota", "LimitRange maps/gangway-limits"]
    assert error.value.failures[1].endswith("left out, as its namespace was refused")
    assert fake.get("ResourceQuota", "gangway-quota", "vision") is not None
    assert fake.get("Queue", "maps") is not None  # cluster-scoped: not the namespace's


def test_tenant_sync_stops_at_an_outage(fake, cluster):
    fake.fail(503, times=10**6)
    with pytest.raises(ClusterUnavailable):
        cluster.sync_tenants(TENANTS)

# -- errors ----------------------------------------------------------------------------

def test_a_refusal_names_the_kind_and_the_object(fake, cluster):
    fake.add(_namespace("maps"))
    fake.fail(422, method="POST", path="/tfjobs$", message='TFJob.kubeflow.org "resnet-g12" is invalid')

    with pytest.raises(ClusterError) as error:
        cluster.create_job(JOB)

    assert str(error.value) == (
        'create TFJob maps/resnet-g12: 422 Unprocessable Entity: TFJob.kubeflow.org "resnet-g12" is invalid'
    )


def test_a_missing_namespace_surfaces_as_an_error(cluster):
    with pytest.raises(ClusterError, match=r'^create TFJob maps/resnet-g12: 404 Not Found: namespaces "maps"'):
        cluster.create_job(JOB)


def test_too_many_requests_is_retried_after_the_time_the_server_asks(fake):
    cluster = KubernetesCluster(client_for(Configuration(host=fake.url)), retry_budget=3)
    fake.add(_node("n1"))
    fake.fail(429, path="/nodes$", retry_after=1)

    started = time.monotonic()
    assert [node.name for node in cluster.nodes()] == ["n1"]

    assert time.monotonic() - started >= 1
    assert fake.log == [("GET", "/api/v1/nodes"), ("GET", "/api/v1/nodes")]


def test_server_errors_are_retried_then_the_cluster_is_unavailable(fake, cluster):
    fake.add(_namespace("maps"))
    fake.fail(500, times=2, method="POST")
    cluster.create_job(JOB)  # two 500s, then the create goes through
    assert len(fake.list("TFJob")) == 1

    fake.fail(503, times=100)
    started = time.monotonic()
    with pytest.raises(ClusterUnavailable, match=r"^list Node \*: 503 Service Unavailable"):
        cluster.nodes()
    assert time.monotonic() - started < 1.5
    assert 2 <= len([p for _, p in fake.log if p == "/api/v1/nodes"]) <= 6


def test_an_unreachable_server_is_unavailable():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cluster = KubernetesCluster(client_for(Configuration(host=f"http://127.0.0.1:{port}")), retry_budget=0.3)

    with pytest.raises(ClusterUnavailable, match="cannot reach the API server"):
        cluster.job_statuses()


class SilentServer:
    """A TCP server that accepts connections and never answers: an API server that hangs."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.accepted = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _accept(self):
        while True:
            try:
                self.accepted.append(self.sock.accept()[0])  # read nothing, answer nothing
            except OSError:
                return

    def close(self):
        self.sock.close()
        for connection in self.accepted:
            connection.close()


def test_a_server_that_never_answers_costs_one_read_timeout_not_four():
    server = SilentServer()
    cluster = KubernetesCluster(client_for(Configuration(host=server.url)), retry_budget=3)
    cluster.api.timeout = (1.0, 0.5)
    try:
        with pytest.raises(NoAnswer, match="the API server did not answer in time: .*[Rr]ead timed out"):
            cluster.nodes()
        assert len(server.accepted) == 1  # urllib3's own Retry(3) made it four
    finally:
        server.close()


def test_a_connection_reset_is_tried_again_within_the_budget(fake, cluster):
    fake.add(_node("n1"))
    fake.drop(times=1, path="/nodes$")  # the server closes the connection without an answer
    assert [node.name for node in cluster.nodes()] == ["n1"]
    assert fake.log == [("GET", "/api/v1/nodes"), ("GET", "/api/v1/nodes")]


# -- doctor ------------------------------------------------------------------------------

CRDS = ("tfjobs.kubeflow.org", "pytorchjobs.kubeflow.org", "trainjobs.trainer.kubeflow.org",
        "clustertrainingruntimes.trainer.kubeflow.org", "podgroups.scheduling.volcano.sh", "queues.scheduling.volcano.sh")


def _healthy(fake):
    for name in CRDS:
        fake.add({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                  "metadata": {"name": name}})
    fake.add(_namespace("volcano-system"))
    for team in TENANTS.teams:  # the tenant sync has run
        fake.add(_namespace(team.slug))
    fake.add(_pod("volcano-scheduler-7d9f", "volcano-system", labels={"app": "volcano-scheduler"}))
    fake.add(_node("n1", gpu="8"))
    fake.add(_node("n2", gpu="8"))
    fake.add({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
              "metadata": {"name": "gangway-queue-required", "annotations": {POLICY_VERSION_ANNOTATION: POLICY_VERSION}},
              "spec": {}})  # fmt: skip
    fake.add({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
              "metadata": {"name": "gangway-queue-required"},
              "spec": {"policyName": "gangway-queue-required", "validationActions": ["Deny"]}})  # fmt: skip


def test_doctor_finds_nothing_on_a_healthy_cluster(fake, cluster):
    _healthy(fake)

    assert cluster.doctor(TENANTS) == []


def test_doctor_on_a_bare_cluster_names_each_missing_piece(fake, cluster):
    fake.add(_node("n1", gpu=None))

    problems = [finding.problem for finding in cluster.doctor(TENANTS)]

    for name in CRDS:
        assert any(name in problem for problem in problems)
    assert any("No running Volcano scheduler pod (app=volcano-scheduler)" in p for p in problems)
    assert "No schedulable node reports nvidia.com/gpu, so no GPU job can ever start." in problems


def test_doctor_names_nodes_without_gpus(fake, cluster):
    _healthy(fake)
    fake.add(_node("cpu-1", gpu=None))

    [finding] = cluster.doctor(TENANTS)

    assert finding.problem == "1 of 3 schedulable nodes report no nvidia.com/gpu: cpu-1."
    assert "device plugin" in finding.fix


def test_doctor_reports_defaults_no_quota_admits_and_nominals_above_capacity(fake, cluster):
    _healthy(fake)
    fake.add(_namespace("tiny"))
    team = TenantTeam(slug="tiny", nominal={"gpu": 8, "cpu": 1000}, borrowing_limit={"cpu": 0},
                      default_request={"cpu": 2000})
    tenants = dataclasses.replace(TENANTS, teams=(*TENANTS.teams, team))

    findings = cluster.doctor(tenants)

    assert [f.problem for f in findings] == [
        "Team tiny's LimitRange default of 2 CPUs per container is more than its quota "
        "(nominal + borrowing limit) of 1 CPU, so a pod relying on the default is never admitted.",
        "Nominal gpu quotas add up to 24 GPUs but the schedulable nodes have 16 GPUs, "
        "so not every team can get its guaranteed share.",
    ]
    assert all(f.fix.endswith(".") for f in findings)


# -- configuration ---------------------------------------------------------------------

def test_it_is_built_from_the_kubeconfig_the_environment_names(fake, tmp_path, monkeypatch):
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
        f"clusters:\n- name: fake\n  cluster:\n    server: {fake.url}\n"
        "users:\n- name: me\n  user:\n    token: not-a-secret\n"
        "contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: me\n"
    )
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    fake.add(_node("n1"))

    assert [node.name for node in KubernetesCluster.from_environment().nodes()] == ["n1"]


def test_without_any_configuration_the_cluster_is_unavailable(tmp_path, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))

    with pytest.raises(ClusterUnavailable, match="KUBECONFIG"):
        KubernetesCluster.from_environment()


# -- claims --------------------------------------------------------------------------------------------------

def _claim(name, namespace="maps", storage="500Gi", phase="Bound"):
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": namespace},
            "spec": {"accessModes": ["ReadOnlyMany"]},
            "status": {"phase": phase, "capacity": {"storage": storage}, "accessModes": ["ReadOnlyMany"]}}  # fmt: skip


def _with_claim(name="datasets"):
    from scheduling.cluster.base import VolumeMount

    return dataclasses.replace(JOB, volumes=(VolumeMount(source="claim", name=name, path="/data", read_only=True),))


def test_it_creates_a_job_whose_claims_exist(fake, cluster):
    fake.add(_namespace("maps"))
    fake.add(_claim("datasets"))
    cluster.create_job(_with_claim())
    created = fake.get("TFJob", "resnet-g12", "maps")
    volumes = created["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["volumes"]
    assert volumes == [{"name": "claim-0", "persistentVolumeClaim": {"claimName": "datasets", "readOnly": True}}]


def test_it_refuses_a_job_whose_claim_is_missing_and_creates_nothing(fake, cluster):
    fake.add(_namespace("maps"))
    fake.add(_claim("checkpoints"))
    fake.add(_claim("datasets", namespace="vision"))  # another team's claim does not count
    with pytest.raises(ClusterError, match="mounts PersistentVolumeClaim datasets, which namespace maps does not "
                                           r"have \(its claims: checkpoints\)"):  # fmt: skip
        cluster.create_job(_with_claim())
    assert fake.list("TFJob") == []


def test_it_lists_a_namespaces_claims(fake, cluster):
    fake.add(_claim("datasets"))
    fake.add(_claim("scratch", storage="1Ti", phase="Pending"))
    fake.add(_claim("other", namespace="vision"))
    claims = cluster.claims("maps")
    assert [(c.name, c.capacity, c.access_modes, c.phase) for c in claims] == [
        ("datasets", 500 * GiB, ("ReadOnlyMany",), "Bound"), ("scratch", 1024 * GiB, ("ReadOnlyMany",), "Pending"),
    ]  # fmt: skip


# -- logs and failure detail ---------------------------------------------------------------------------------

def _replica_pod(index, state, *, job_id=12, phase="Running", last=None, **status):
    container = {"name": "tensorflow", "state": state}
    if last:
        container["lastState"] = {"terminated": last}
    labels = {"gangway.io/job-id": str(job_id), "training.kubeflow.org/replica-type": "worker",
              "training.kubeflow.org/replica-index": str(index)}  # fmt: skip
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"resnet-g{job_id}-worker-{index}", "namespace": "maps", "labels": labels},
            "spec": {"nodeName": "n1", "containers": [{"name": "tensorflow", "image": "busybox"}]},
            "status": {"phase": phase, "containerStatuses": [container], **status}}  # fmt: skip


def test_it_reads_each_replicas_log_with_a_bounded_tail(fake, cluster):
    fake.add(_replica_pod(1, {"running": {}}))
    fake.add(_replica_pod(0, {"running": {}}))
    fake.add(_replica_pod(0, {"running": {}}, job_id=13))  # another job's pod
    fake.write_log("maps", "resnet-g12-worker-0", "".join(f"step {n}\n" for n in range(1000)))
    fake.write_log("maps", "resnet-g12-worker-1", "starting\n")

    replicas = cluster.logs("maps", 12, tail=100)

    assert [(r.replica, r.pod, r.phase) for r in replicas] == [
        ("worker-0", "resnet-g12-worker-0", "Running"), ("worker-1", "resnet-g12-worker-1", "Running"),
    ]  # fmt: skip
    assert len(replicas[0].lines) == 100 and replicas[0].lines[-1] == "step 999"
    assert replicas[1].lines == ("starting",) and not replicas[1].failed
    assert [r.replica for r in cluster.logs("maps", 12, replica="worker-1")] == ["worker-1"]
    assert len(cluster.logs("maps", 12, replica="worker-0", tail=None)[0].lines) == 1000


@pytest.mark.parametrize(
    ("pod", "exit_code", "reason"),
    [
        (_replica_pod(0, {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}, phase="Failed"), 137, "OOMKilled"),
        (_replica_pod(0, {"terminated": {"exitCode": 1, "reason": "Error", "message": "boom"}}, phase="Failed"), 1, "Error"),
        (_replica_pod(0, {"running": {}}, last={"exitCode": 137, "reason": "OOMKilled"}), 137, "OOMKilled"),
        (_replica_pod(0, {"waiting": {"reason": "ImagePullBackOff"}}, phase="Pending"), None, "ImagePullBackOff"),
        (_replica_pod(0, {}, phase="Failed", reason="Evicted", message="The node was low on resource: memory."),
         None, "Evicted"),
    ],
    ids=["a worker killed for memory", "a worker that raised", "a worker restarted after an OOM kill",
         "an image that cannot be pulled", "an evicted pod"],
)
def test_it_reads_why_a_replica_failed(fake, cluster, pod, exit_code, reason):
    fake.add(pod)
    fake.write_log("maps", "resnet-g12-worker-0", "Traceback (most recent call last):\n")
    (replica,) = cluster.logs("maps", 12)
    assert (replica.exit_code, replica.reason, replica.failed) == (exit_code, reason, True)
    assert replica.explanation


def test_a_container_that_has_not_started_has_no_lines(fake, cluster):
    fake.add(_replica_pod(0, {"waiting": {"reason": "ContainerCreating"}}, phase="Pending"))
    (replica,) = cluster.logs("maps", 12)
    assert replica.lines == () and not replica.failed


def test_the_failing_replica_is_the_first_to_stop(fake, cluster):
    from scheduling.cluster.base import failing_replica

    fake.add(_replica_pod(0, {"terminated": {"exitCode": 143, "reason": "Error",
                                             "finishedAt": "2026-12-03T10:00:05Z"}}, phase="Failed"))  # fmt: skip
    fake.add(_replica_pod(1, {"terminated": {"exitCode": 137, "reason": "OOMKilled",
                                             "finishedAt": "2026-12-03T10:00:01Z"}}, phase="Failed"))  # fmt: skip
    assert failing_replica(cluster.logs("maps", 12)).replica == "worker-1"


def _with_collector(pod: dict) -> dict:
    """The pod as a Katib trial's: Katib's metrics collector beside the training container, and the
    container statuses sorted by name, as the kubelet writes them (so the collector's comes first)."""
    pod["spec"]["containers"].append({"name": "metrics-logger-and-collector", "image": "katib/file-metrics-collector"})
    pod["status"]["containerStatuses"].insert(
        0, {"name": "metrics-logger-and-collector", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}})
    return pod


def test_a_replica_with_a_sidecar_is_read_from_its_training_container(fake, cluster):
    fake.add(_with_collector(_replica_pod(0, {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}, phase="Failed")))
    fake.write_log("maps", "resnet-g12-worker-0", "step 1\nKilled\n")
    (replica,) = cluster.logs("maps", 12)
    assert replica.lines == ("step 1", "Killed")  # without the container's name the server answers 400
    assert (replica.exit_code, replica.reason, replica.failed) == (137, "OOMKilled", True)
    assert fake.log[-1][1].endswith("/pods/resnet-g12-worker-0/log")


def test_the_default_container_annotation_names_the_container_to_read(fake, cluster):
    pod = _with_collector(_replica_pod(0, {"running": {}}))
    pod["spec"]["containers"][0]["name"] = "trainer"  # a manifest written by hand: any name
    pod["status"]["containerStatuses"][1]["name"] = "trainer"
    pod["metadata"]["annotations"] = {"kubectl.kubernetes.io/default-container": "trainer"}
    fake.add(pod)
    fake.write_log("maps", "resnet-g12-worker-0", "epoch 3\n")
    assert cluster.logs("maps", 12)[0].lines == ("epoch 3",)

def test_a_slow_server_gets_a_bounded_time_for_a_jobs_logs(fake, cluster):
    for index in range(4):
        fake.add(_replica_pod(index, {"running": {}}))
    fake.stall(0.3, path="/log$", times=4)  # each pod's log comes, but slowly
    cluster.logs_deadline = 0.5
    with pytest.raises(ClusterUnavailable, match=r"the cluster took more than 0.5 s for this job's logs"):
        cluster.logs("maps", 12)
    assert len([path for _, path in fake.log if path.endswith("/log")]) == 2  # read two, then gave up


def test_a_pods_log_that_never_comes_costs_its_short_read_timeout(fake, cluster, monkeypatch):
    from scheduling.cluster import kubernetes_logs

    fake.add(_replica_pod(0, {"running": {}}))
    fake.stall(2.0, path="/log$")
    monkeypatch.setattr(kubernetes_logs, "LOG_READ_TIMEOUT", (1.0, 0.3))  # the page's, not the client's (5, 30)
    with pytest.raises(ClusterUnavailable, match="[Rr]ead timed out"):
        cluster.logs("maps", 12)

def test_a_log_read_that_keeps_failing_makes_the_cluster_unavailable(fake, cluster):
    fake.add(_replica_pod(0, {"running": {}}))
    fake.fail(503, path="/log$", times=50)
    with pytest.raises(ClusterUnavailable, match="read log of Pod maps/resnet-g12-worker-0"):
        cluster.logs("maps", 12)


def test_a_failed_jobs_message_names_its_failing_replica(fake, cluster):
    fake.add(_namespace("maps"))
    cluster.create_job(JOB)
    job = _tfjob(fake)
    job["status"] = {"conditions": [{"type": "Failed", "status": "True",
                                     "message": "TFJob maps/resnet-g12 has failed because 1 Worker replica(s) failed."}]}  # fmt: skip
    fake.add(job)
    fake.add(_replica_pod(0, {"terminated": {"exitCode": 143, "reason": "Error", "finishedAt": "2026-12-03T10:00:09Z"}},
                          phase="Failed"))  # fmt: skip
    fake.add(_replica_pod(1, {"terminated": {"exitCode": 137, "reason": "OOMKilled", "finishedAt": "2026-12-03T10:00:01Z"}},
                          phase="Failed"))  # fmt: skip

    [status] = cluster.job_statuses()

    assert status.phase is Phase.FAILED
    assert status.message == (
        "Replica worker-1 exited with code 137 (OOMKilled: it used more memory than its limit and was killed). "
        "TFJob maps/resnet-g12 has failed because 1 Worker replica(s) failed."
    )
