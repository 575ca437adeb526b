"""The ClusterRole grants exactly what the Kubernetes adapter uses: every verb it needs, nothing more.

The adapter runs every operation of the Cluster port (create, resume,
suspend, delete, statuses, nodes, outside usage, tenant sync with creates,
updates and a recreate, doctor) against the fake API server; each request it
made is mapped to the (apiGroup, resource, verb) RBAC checks it against.
"""

import dataclasses
import re

import pytest
from kubernetes.client import ApiClient, Configuration

from jobs import kinds
from scheduling.cluster.base import ClusterJob, ReplicaSpec, TenantTeam, Tenants, TenantTier, VolumeMount
from scheduling.cluster.kubernetes import KubernetesCluster
from scheduling.cluster.kubernetes_tenants import required_crds
from tests.cluster.fake_apiserver import FakeApiServer
from tests.deploy.manifests import by_kind, source_objects

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


def granted() -> set[tuple[str, str, str]]:
    role = by_kind(source_objects(), "ClusterRole")["gangway-scheduler"]
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


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
def used() -> set[tuple[str, str, str]]:
    """Every check the adapter's requests needed over all its operations."""
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
        fake.add({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train-g1-worker-0", "namespace": "maps",
                  "labels": {"gangway.io/job-id": "1"}}, "spec": {"containers": [{"name": "tensorflow"}]},
                  "status": {"phase": "Running", "containerStatuses": [{"state": {"running": {}}}]}})  # fmt: skip
        cluster.logs("maps", 1)
        for job_id, kind in enumerate(kinds.all_kinds(), start=1):
            cluster.delete_job("maps", f"train-g{job_id}", kind.name)
        # A job from elsewhere (a Katib trial): listed, its trial read, labelled, admitted, refused.
        fake.add({"apiVersion": "kubeflow.org/v1beta1", "kind": "Trial", "metadata": {
            "name": "tune-x1", "namespace": "maps", "labels": {"katib.kubeflow.org/experiment": "tune"}}})  # fmt: skip
        fake.add({"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {
            "name": "tune-x1", "namespace": "maps", "labels": {"gangway.io/queue": "maps"},
            "ownerReferences": [{"apiVersion": "kubeflow.org/v1beta1", "kind": "Trial", "name": "tune-x1"}]},
            "spec": {"runPolicy": {"suspend": True}, "tfReplicaSpecs": {}}})  # fmt: skip
        [found] = cluster.outside_jobs().jobs
        cluster.trials("maps")
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


def test_the_adapter_was_exercised_in_every_way_that_matters(used):
    verbs = {verb for _, _, verb in used}
    assert verbs == {"get", "list", "create", "update", "patch", "delete"}
    assert ("scheduling.k8s.io", "priorityclasses", "delete") in used  # the recreate happened
    for kind in kinds.all_kinds():
        assert {(kind.group, kind.plural, verb) for verb in ("create", "get", "list", "patch", "delete")} <= used


def test_every_request_the_adapter_makes_is_granted(used):
    assert sorted(used - granted()) == []


def test_nothing_is_granted_that_the_adapter_does_not_use(used):
    assert sorted(granted() - used) == []


def test_no_rule_uses_wildcards_or_reaches_secrets():
    for group, resource, verb in granted():
        assert "*" not in (group, resource, verb)
        assert resource not in ("secrets", "configmaps", "serviceaccounts", "roles", "rolebindings")
