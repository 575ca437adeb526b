"""Each process's service account is granted exactly what that process asks the API server: every verb it
needs, nothing more.

The worker runs every operation of the Cluster port that the loop, reconcile, the tenant sync and doctor
make (create, resume, suspend, delete, statuses, nodes, outside usage, tenant sync with creates, updates and
a recreate, doctor); the web reads a job's logs for the job page and the API, and streams a replica's whole
log for a download. Each process's calls run against the fake API server; each request made is mapped to
the (apiGroup, resource, verb) RBAC checks it against and compared with the rules bound to the account the
process's Deployment runs as. Beat, the notifier and the migrate Job never call the API server.
"""

import dataclasses
import re

import pytest
from kubernetes.client import ApiClient, Configuration

from jobs import kinds
from jobs.models import Job
from jobs.services import job_submit
from jobs.spec import parse_spec
from scheduling.cluster.base import ClusterJob, ReplicaSpec, TenantTeam, Tenants, TenantTier, VolumeMount
from scheduling.cluster.kubernetes import KubernetesCluster
from scheduling.cluster.kubernetes_tenants import required_crds
from scheduling.loop import admission_cycle
from scheduling.reconcile import reconcile
from tests.cluster.busy_cluster import namespace, node, run_admitted
from tests.cluster.fake_apiserver import FakeApiServer
from tests.conftest import spec_data
from tests.deploy.manifests import by_kind, source_objects

OBJECTS = source_objects()
NAMESPACE = "gangway"  # kustomization.yaml

GiB = 2**30
PATH = re.compile(
    r"^/(?:api/v1|apis/(?P<group>[^/]+)/[^/]+)(?:/namespaces/[^/]+(?=/[^/]+))?/(?P<resource>[^/]+)"
    r"(?:/(?P<name>[^/]+))?(?:/(?P<sub>log|status))?$"
)
VERB = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def rbac_check(method: str, path: str) -> tuple[str, str, str]:
    """Returns the (apiGroup, resource, verb) the API server authorizes a request as."""
    match = PATH.match(path)
    assert match, f"unexpected path {path}"
    group, resource, name = match.group("group") or "", match.group("resource"), match.group("name")
    if match.group("sub"):
        resource = f"{resource}/{match.group('sub')}"  # a subresource is granted on its own ("pods/log")
    verb = ("get" if name else "list") if method == "GET" else VERB[method]
    if verb == "delete" and not name:
        verb = "deletecollection"
    return group, resource, verb


def account_of(workload: str) -> str:
    """Returns the service account the Deployment or Job `workload` runs as."""
    objects = {**by_kind(OBJECTS, "Deployment"), **by_kind(OBJECTS, "Job")}
    return objects[workload]["spec"]["template"]["spec"]["serviceAccountName"]


def granted(account: str) -> set[tuple[str, str, str]]:
    """Returns every (apiGroup, resource, verb) the manifests grant the service account `account`, through any
    binding of a ClusterRole or a Role."""
    roles = {**by_kind(OBJECTS, "ClusterRole"), **by_kind(OBJECTS, "Role")}
    bindings = [*by_kind(OBJECTS, "ClusterRoleBinding").values(), *by_kind(OBJECTS, "RoleBinding").values()]
    return {
        (group, resource, verb)
        for binding in bindings
        if any(subject["kind"] == "ServiceAccount" and subject["name"] == account
               and subject.get("namespace", NAMESPACE) == NAMESPACE for subject in binding["subjects"])
        for rule in roles[binding["roleRef"]["name"]]["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }  # fmt: skip


def replica_pod(job_id: int) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"train-g{job_id}-worker-0", "namespace": "maps",
            "labels": {"gangway.io/job-id": str(job_id)}}, "spec": {"containers": [{"name": "tensorflow"}]},
            "status": {"phase": "Running", "containerStatuses": [{"state": {"running": {}}}]}}  # fmt: skip


def job(kind: str, job_id: int) -> ClusterJob:
    return ClusterJob(
        job_id=job_id, name=f"train-g{job_id}", namespace="maps", team="maps", kind=kind, image="busybox",
        command=("python", "train.py"), args=(), env=(),
        replicas=(ReplicaSpec(role="Worker", count=2, gpu=1, cpu=1000, memory=GiB),),
        tier="standard", grace_period=30, max_runtime=600,
        volumes=(VolumeMount(source="claim", name="datasets", path="/data", read_only=True),),
    )  # fmt: skip


def tenants(*, nominal: int, value: int, weight: float) -> Tenants:
    return Tenants(
        teams=(TenantTeam(slug="maps", nominal={"gpu": nominal}, borrowing_limit={"gpu": 4},
                          per_replica_max={"gpu": nominal}, default_request={"cpu": 500}, weight=weight),),
        tiers=(TenantTier("production", 1000, False), TenantTier("standard", value, True)),
    )  # fmt: skip


@pytest.fixture(scope="module")
def worker_used() -> set[tuple[str, str, str]]:
    """Every check the worker's requests needed over all the operations it makes."""
    fake = FakeApiServer().start()
    try:
        cluster = KubernetesCluster(ApiClient(Configuration(host=fake.url)), retry_budget=0.5)
        fake.add({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                  "spec": {}, "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "64", "memory": "256Gi"}}})  # fmt: skip
        # Tenants: created, then changed in place, then a tier's value changes (recreated).
        cluster.sync_tenants(tenants(nominal=8, value=100, weight=1))
        for kind, name in (("Namespace", "maps"), ("PriorityClass", "production")):  # labels removed by hand
            obj = fake.get(kind, name)
            obj["metadata"]["labels"] = {}
            fake.add(obj)
        cluster.sync_tenants(tenants(nominal=6, value=100, weight=2))
        cluster.sync_tenants(tenants(nominal=6, value=200, weight=2))
        fake.add({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                  "metadata": {"name": "datasets", "namespace": "maps"}, "spec": {}})  # fmt: skip
        # Jobs of every registered kind, mounting a claim: created, read back, suspended, resumed, deleted.
        for job_id, kind in enumerate(kinds.all_kinds(), start=1):
            cluster.create_job(job(kind.name, job_id))
            cluster.suspend_job(job(kind.name, job_id))
            cluster.create_job(job(kind.name, job_id))
        cluster.job_statuses()
        cluster.nodes()
        cluster.outside_usage()
        for crd in required_crds():  # so doctor goes on to read the runtimes
            fake.add({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                      "metadata": {"name": crd}})  # fmt: skip
        cluster.doctor(tenants(nominal=6, value=200, weight=2))
        cluster.claims("maps")
        for job_id, kind in enumerate(kinds.all_kinds(), start=1):
            cluster.delete_job("maps", f"train-g{job_id}", kind.name)
        # A job from elsewhere (a Katib trial): listed, its trial read, labelled, admitted, refused.
        fake.add({"apiVersion": "kubeflow.org/v1beta1", "kind": "Trial", "metadata": {
            "name": "tune-x1", "namespace": "maps", "labels": {"katib.kubeflow.org/experiment": "tune"}}})  # fmt: skip
        fake.add({"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {
            "name": "tune-x1", "namespace": "maps", "labels": {"gangway.io/queue": "maps"},
            "ownerReferences": [{"apiVersion": "kubeflow.org/v1beta1", "kind": "Trial", "name": "tune-x1"}]},
            "spec": {"runPolicy": {"suspend": True}, "tfReplicaSpecs": {"Worker": {"replicas": 2, "template": {
                "spec": {"containers": [{"name": "tensorflow", "image": "busybox", "resources": {"limits": {
                    "nvidia.com/gpu": 1, "cpu": "1", "memory": "1Gi"}}}]}}}}}})  # fmt: skip  (what job("TFJob") asks)
        [found] = cluster.outside_jobs().jobs
        cluster.trials("maps")
        cluster.experiments("maps")
        cluster.mark_outside(found, job_id=3)
        cluster.create_job(dataclasses.replace(job("TFJob", 3), name="tune-x1", adopted=True))
        cluster.mark_outside(found, rejected="Refused by Gangway: no tier.")  # annotated and marked Failed
        # One of every kind whose refusal is written in its status too (`JobKind.keeps_written_failure`).
        for kind in kinds.all_kinds():
            if kind.keeps_written_failure and kind.name != "TFJob":
                fake.add({"apiVersion": kind.api_version, "kind": kind.name, "metadata": {
                    "name": "refused", "namespace": "maps", "labels": {"gangway.io/queue": "maps"}},
                    "spec": {"runPolicy": {"suspend": True}, kind.replica_specs: {}}})  # fmt: skip
        for refused in cluster.outside_jobs().jobs:
            if refused.name == "refused":
                cluster.mark_outside(refused, rejected="Refused by Gangway: no tier.")
        return {rbac_check(method, path) for method, path in fake.log}
    finally:
        fake.stop()


@pytest.fixture(scope="module")
def web_used() -> set[tuple[str, str, str]]:
    """Every check the web's requests needed: a job's logs read for its page and the API (`scheduling.logs`),
    with each line's time and on from a position, and a replica's whole log streamed (`scheduling.log_download`)."""
    fake = FakeApiServer().start()
    try:
        cluster = KubernetesCluster(ApiClient(Configuration(host=fake.url)), retry_budget=0.5)
        fake.add(replica_pod(1))
        fake.write_log("maps", "train-g1-worker-0", "step 1\nstep 2\n")
        [replica] = cluster.logs("maps", 1, tail=100, timed=True)
        cluster.logs("maps", 1, tail=100, timed=True, after={replica.replica: replica.position})
        stream = cluster.log_stream("maps", 1, replica="train-g1-worker-0")
        assert stream is not None and b"".join(stream.chunks) == b"step 1\nstep 2\n"
        return {rbac_check(method, path) for method, path in fake.log}
    finally:
        fake.stop()


@pytest.fixture(params=["gangway-worker", "gangway-web"])
def process(request) -> tuple[str, set[tuple[str, str, str]]]:
    """A Deployment that talks to the cluster, and the checks its requests needed."""
    used = request.getfixturevalue({"gangway-worker": "worker_used", "gangway-web": "web_used"}[request.param])
    return request.param, used


def test_the_worker_was_exercised_in_every_way_that_matters(worker_used):
    verbs = {verb for _, _, verb in worker_used}
    assert verbs == {"get", "list", "create", "update", "patch", "delete"}
    assert ("scheduling.k8s.io", "priorityclasses", "delete") in worker_used  # the recreate happened
    for kind in kinds.all_kinds():
        assert {(kind.group, kind.plural, verb) for verb in ("create", "get", "list", "patch", "delete")} <= worker_used


def test_the_web_lists_a_jobs_pods_and_reads_their_logs(web_used):
    assert web_used == {("", "pods", "list"), ("", "pods/log", "get")}


def test_every_request_a_process_makes_is_granted_to_its_account(process):
    workload, used = process
    assert sorted(used - granted(account_of(workload))) == [], f"refused to {workload} ({account_of(workload)})"


def test_nothing_is_granted_to_a_process_that_it_does_not_use(process):
    workload, used = process
    assert sorted(granted(account_of(workload)) - used) == []


def test_the_web_and_the_worker_run_as_accounts_of_their_own():
    assert account_of("gangway-web") != account_of("gangway-worker")


@pytest.mark.parametrize("workload", ["gangway-notifier", "gangway-beat", "gangway-migrate"])
def test_the_processes_that_never_call_the_api_server_have_no_grant_and_no_token(workload):
    objects = {**by_kind(OBJECTS, "Deployment"), **by_kind(OBJECTS, "Job")}
    assert granted(account_of(workload)) == set()
    assert objects[workload]["spec"]["template"]["spec"]["automountServiceAccountToken"] is False


@pytest.mark.django_db
def test_the_worker_reads_no_logs_of_a_job_that_runs_then_fails(maps, owner):
    """The loop and reconcile learn how a job ended from its object and its pods' statuses, never from a log:
    the worker's account has no pods/log."""
    fake = FakeApiServer().start()
    try:
        cluster = KubernetesCluster(ApiClient(Configuration(host=fake.url)), retry_budget=0.5)
        fake.add(node("n1"))
        fake.add(namespace("maps"))
        spec = parse_spec(spec_data(replicas=[{"role": "Worker", "count": 1, "gpu": 8}]))
        job = job_submit(team=maps, owner=owner, spec=spec)[0]
        admission_cycle(cluster=cluster)
        run_admitted(fake, cluster)
        fake.write_log("maps", f"resnet-g{job.pk}-worker-0", "Traceback (most recent call last):\n")
        obj = fake.get("TFJob", f"resnet-g{job.pk}", "maps")
        fake.add({**obj, "status": {"conditions": [{"type": "Failed", "status": "True"}]}})
        reconcile(cluster=cluster)
        admission_cycle(cluster=cluster)
        job.refresh_from_db()
        assert job.state == Job.State.FAILED
        assert [path for _, path in fake.log if path.endswith("/log")] == []
    finally:
        fake.stop()


def test_no_rule_uses_wildcards_or_reaches_secrets():
    for role in by_kind(OBJECTS, "ClusterRole").values():
        for rule in role["rules"]:
            for name in (*rule["apiGroups"], *rule["resources"], *rule["verbs"]):
                assert "*" not in name
            assert not set(rule["resources"]) & {"secrets", "configmaps", "serviceaccounts", "roles", "rolebindings"}
