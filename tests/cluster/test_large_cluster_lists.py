"""The adapter's lists on a large, busy cluster, over real HTTP against the fake API server: each list of
the whole cluster is read in pages from one snapshot, read again from its first page when the server
forgets that snapshot, and outside pods that hold nothing (ended, or bound to no node) stay on the server."""

from __future__ import annotations

import dataclasses

import pytest

from jobs.models import Job
from scheduling import records
from scheduling.cluster.base import ClusterUnavailable
from scheduling.cluster.kubernetes_api import LIST_ATTEMPTS, PAGE_SIZE
from scheduling.loop import admission_cycle
from tests.cluster.test_kubernetes_adapter import JOB, TENANTS, _healthy, _namespace, _node, _pod
from tests.cluster.test_loop_on_apiserver import world  # noqa: F401 (a fixture)
from tests.cluster.test_outside_jobs import outside_job

PODS = "^/api/v1/pods$"


def _pages(fake, path: str) -> list[str]:
    """The pages asked of the list on `path`, in order: "first" or "next" (asked by a continue token)."""
    return ["next" if query.get("continue") else "first" for listed, query in fake.lists() if listed == path]


def _names(pods) -> list[str]:
    return sorted(pod.name for pod in pods)


def test_outside_usage_asks_the_server_only_for_pods_bound_to_a_node_and_not_ended(fake, cluster):
    fake.add(_pod("notebook", "research", node="n1"))
    fake.add(_pod("starting", "research", node="n2", phase="Pending"))
    fake.add(_pod("unscheduled", "research", node=None, phase="Pending"))
    fake.add(_pod("cron-28311040-x2x9q", "research", phase="Succeeded"))
    fake.add(_pod("backup-7zk2p", "research", phase="Failed"))
    fake.add(_pod("resnet-g12-worker-0", "maps", labels={"gangway.io/job-id": "12"}))

    assert _names(cluster.outside_usage()) == ["notebook", "starting"]
    assert fake.lists() == [("/api/v1/pods", {
        "labelSelector": "!gangway.io/job-id", "limit": str(PAGE_SIZE),
        "fieldSelector": "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed",
    })]  # fmt: skip
    assert fake.listed == [("/api/v1/pods", ("research/notebook", "research/starting"))]


def test_every_list_of_the_whole_cluster_is_read_in_pages(fake, cluster):
    cluster.api.page_size = 2
    fake.add(_namespace("maps"))
    for n in range(5):
        fake.add(_node(f"n{n}"))
        fake.add(_pod(f"notebook-{n}", "research", node=f"n{n}"))
        fake.add(outside_job(name=f"bert-{n}"))
    for job_id in (12, 13, 14):
        cluster.create_job(dataclasses.replace(JOB, job_id=job_id, name=f"resnet-g{job_id}"))
        fake.add(_pod(f"resnet-g{job_id}-worker-0", "maps", labels={"gangway.io/job-id": str(job_id)}))

    assert len(cluster.nodes()) == 5
    assert _names(cluster.outside_usage()) == [f"notebook-{n}" for n in range(5)]
    assert [(status.job_id, status.running_pods) for status in cluster.job_statuses()] == [(12, 1), (13, 1), (14, 1)]
    assert [job.name for job in cluster.outside_jobs().jobs] == [f"bert-{n}" for n in range(5)]

    assert {query.get("limit") for _, query in fake.lists()} == {"2"}
    assert _pages(fake, "/api/v1/nodes") == ["first", "next", "next"]
    assert _pages(fake, "/apis/kubeflow.org/v1/tfjobs") == [
        "first", "next",  # three Gangway jobs, read by job statuses
        "first", "next", "next",  # five labelled with the queue, read as jobs from elsewhere
    ]  # fmt: skip


def test_doctor_reads_its_lists_in_pages(fake, cluster):
    cluster.api.page_size = 2
    _healthy(fake)

    assert cluster.doctor(TENANTS) == []
    assert {query.get("limit") for _, query in fake.lists()} == {"2"}
    assert _pages(fake, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions") == ["first", "next", "next"]


def test_a_list_whose_snapshot_is_forgotten_is_read_again_from_its_first_page(fake, cluster):
    """Its first page was read before a pod was deleted and another started: pages of the two snapshots
    would count the deleted pod and the new one both; the list read again counts what runs now."""
    cluster.api.page_size = 2
    for n in range(1, 6):
        fake.add(_pod(f"p{n}", "research"))

    def meanwhile():
        del fake.objects[("api/v1", "pods", "research", "p1")]
        fake.add(_pod("p6", "research"))
        fake.expire_continue_tokens()

    fake.between_pages(meanwhile, path=PODS)

    assert _names(cluster.outside_usage()) == ["p2", "p3", "p4", "p5", "p6"]
    assert _pages(fake, "/api/v1/pods") == ["first", "next", "first", "next", "next"]


def test_a_list_whose_snapshot_keeps_being_forgotten_leaves_the_cluster_unavailable(fake, cluster):
    cluster.api.page_size = 2
    for n in range(5):
        fake.add(_pod(f"p{n}", "research"))
    fake.between_pages(fake.expire_continue_tokens, path=PODS, times=LIST_ATTEMPTS)

    with pytest.raises(ClusterUnavailable, match=r"^list Pod \*: .*410 Gone") as error:
        cluster.outside_usage()

    assert error.value.status == 410
    assert _pages(fake, "/api/v1/pods") == ["first", "next"] * LIST_ATTEMPTS


def test_a_cycle_whose_list_keeps_being_forgotten_waits_as_on_an_unreachable_cluster(fake, cluster, world):
    """Not as a refused read: the next pass reads it again, and admits."""
    cluster.api.page_size = 2
    for n in range(3):
        fake.add(_pod(f"exporter-{n}", "monitoring", node=f"n{n % 2 + 1}"))
    world(2)
    fake.between_pages(fake.expire_continue_tokens, path=PODS, times=LIST_ATTEMPTS)

    result = admission_cycle(cluster=cluster)

    assert result.error.startswith("list Pod *: the cluster changed faster than its 2-item pages could be read")
    assert set(Job.objects.values_list("state", "reason")) == {(Job.State.QUEUED, records.UNREACHABLE_REASON)}
    assert fake.list("TFJob") == []
    admission_cycle(cluster=cluster)
    assert set(Job.objects.values_list("state", flat=True)) == {Job.State.ADMITTED}
