"""The admission loop through the Kubernetes adapter, over real HTTP to the fake API server, with faults.

The fake has no operator and no kubelet: created TFJobs stay Created and
start no pods, which is the hardest case for the loop, since nothing in the
cluster shows where a job's replicas will land.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from django.db import DatabaseError

from jobs.codes import Because
from jobs.models import Job
from jobs.services import job_cancel, job_submit
from jobs.spec import parse_spec
from scheduling import records
from scheduling.cluster.base import ClusterUnavailable
from scheduling.cluster.faulty import Fault, FaultyCluster, Killed
from scheduling.cluster.manifests import JOB_ID_LABEL, MANAGED_BY
from scheduling.invariants import broken_promises, check
from scheduling.loop import admission_cycle
from scheduling.reconcile import reconcile
from scheduling.refusals import REFUSALS_BEFORE_FAILING
from tests.cluster.fake_apiserver import kind_path
from tests.conftest import make_team, spec_data

WHOLE_NODE = [{"role": "Worker", "count": 1, "gpu": 8}]


def _node(name):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {},
            "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "8"}}}


@pytest.fixture
def world(fake, tiers, owner):
    """Two nodes of 8 GPUs; team big may use 64 (more than the cluster), so only room limits it."""
    for name in ("n1", "n2"):
        fake.add(_node(name))
    team = make_team("big", tiers, gpu=64, borrowing_limit=0)
    fake.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "big"}})

    def submit(n: int):
        for k in range(n):
            job_submit(team=team, owner=owner, spec=parse_spec(spec_data(team="big", name=f"j{k}", replicas=WHOLE_NODE)))

    return submit


def test_cycles_that_fail_after_creating_never_over_admit(world, cluster, monkeypatch):
    """Every cycle raises in its record phase, after the creates: four rounds, still 16 GPUs asked of 16."""
    monkeypatch.setattr(records, "usage_sample", lambda now: (_ for _ in ()).throw(DatabaseError("out of range")))
    world(8)
    for _ in range(4):
        reconcile(cluster=cluster)
        with pytest.raises(DatabaseError):
            admission_cycle(cluster=cluster)
    statuses = cluster.job_statuses()
    assert len(statuses) == 2
    assert broken_promises(cluster.nodes(), statuses) == []


@pytest.mark.parametrize("fault", [
    Fault("create_job", "after", Killed), Fault("create_job", "after", ClusterUnavailable),
    Fault("create_job", "before", ClusterUnavailable), Fault("job_statuses", "before", ClusterUnavailable),
    Fault("create_job", "after", Killed, nth=2),
], ids=str)
def test_a_fault_while_creating_is_finished_by_reconcile_with_no_duplicate(world, cluster, fault):
    world(3)
    faulty = FaultyCluster(cluster, faults=[fault])
    try:
        admission_cycle(cluster=faulty)
    except (Killed, ClusterUnavailable):
        pass
    assert broken_promises(cluster.nodes(), cluster.job_statuses()) == []
    for _ in range(2):
        reconcile(cluster=cluster)
        admission_cycle(cluster=cluster)
    assert check(cluster, settled=True) == []
    assert len(cluster.job_statuses()) == 2


def test_a_flaky_api_server_never_leads_to_over_admission(world, cluster, fake):
    """Every call may fail with a 503 (the adapter retries, then gives up): the promises hold throughout."""
    world(6)
    for round_ in range(6):
        fake.fail(503, times=2)
        for run in (reconcile, admission_cycle):
            run(cluster=cluster)
        assert broken_promises(cluster.nodes(), cluster.job_statuses()) == [], f"round {round_}"
    assert check(cluster, settled=True) == []


WEBHOOK_DOWN = ('Internal error occurred: failed calling webhook "validator.tfjob.training-operator.kubeflow.org": '
                "failed to call webhook: context deadline exceeded")


@pytest.fixture
def two_teams(fake, tiers, owner):
    """Teams alpha and gamma, one 1-GPU job each, on one node of 8 GPUs; alpha's namespace comes first."""
    fake.add(_node("n1"))
    jobs = []
    for slug in ("alpha", "gamma"):
        team = make_team(slug, tiers, gpu=8, borrowing_limit=0)
        fake.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": slug}})
        spec = parse_spec(spec_data(team=slug, name="train", replicas=[{"role": "Worker", "count": 1, "gpu": 1}]))
        jobs.append(job_submit(team=team, owner=owner, spec=spec)[0])
    return jobs


def test_a_namespace_whose_writes_fail_holds_up_only_its_own_job_in_a_cycle(fake, cluster, two_teams):
    alpha, gamma = two_teams
    fake.fail(500, method="POST", path="/namespaces/alpha/", times=10**6, message=WEBHOOK_DOWN)
    admission_cycle(cluster=cluster)
    alpha.refresh_from_db(), gamma.refresh_from_db()
    assert [o["metadata"]["namespace"] for o in fake.list("TFJob")] == ["gamma"]
    assert gamma.state == Job.State.ADMITTED and gamma.reason_code != Because.CREATE_PENDING
    assert alpha.state == Job.State.QUEUED and alpha.reason_code == Because.CLUSTER_FAILING  # requeued, not failed for it
    assert "failed calling webhook" in alpha.events.last().message


def _tries(cluster, job: Job, count: int) -> list[str]:
    """Runs `count` cycles, each past the job's backoff; returns the codes its refusals were given."""
    for _ in range(count):
        Job.objects.filter(pk=job.pk).update(not_before=None)
        admission_cycle(cluster=cluster)
    return list(job.events.filter(code__in=(Because.CLUSTER_FAILING, Because.CLUSTER_REFUSED))
                .values_list("code", flat=True))  # fmt: skip


def test_a_webhook_that_keeps_failing_never_fails_the_job_its_outage_holds_up(fake, cluster, two_teams):
    """A 500 ("failed calling webhook") is no verdict on the job: however long the webhook is down, the job
    waits with a growing backoff and runs once it is mended, instead of failing at the fifth try."""
    alpha, gamma = two_teams
    fake.fail(500, method="POST", path="/namespaces/alpha/", times=10**6, message=WEBHOOK_DOWN)
    codes = _tries(cluster, alpha, REFUSALS_BEFORE_FAILING + 2)
    alpha.refresh_from_db()
    assert codes == [Because.CLUSTER_FAILING] * (REFUSALS_BEFORE_FAILING + 2)
    assert alpha.state == Job.State.QUEUED and alpha.reason.startswith(
        "The cluster failed to create it (a server error, no verdict on the job): create TFJob alpha/")
    assert alpha.reason.endswith(f"tried again in {30 * 2 ** (REFUSALS_BEFORE_FAILING + 1)} s.")  # backed off alike
    fake.heal()
    _tries(cluster, alpha, 1)
    alpha.refresh_from_db()
    assert alpha.state == Job.State.ADMITTED and [o["metadata"]["namespace"] for o in fake.list("TFJob")] == [
        "gamma", "alpha"]


def test_a_create_the_namespace_refuses_fails_the_job_at_the_last_refusal(fake, cluster, two_teams):
    alpha, gamma = two_teams
    fake.fail(403, method="POST", path="/namespaces/alpha/", times=10**6,
              message='tfjobs.kubeflow.org "train" is forbidden: exceeded quota: gpus')  # fmt: skip
    codes = _tries(cluster, alpha, REFUSALS_BEFORE_FAILING)
    alpha.refresh_from_db()
    assert codes == [Because.CLUSTER_REFUSED] * REFUSALS_BEFORE_FAILING
    assert alpha.state == Job.State.FAILED and alpha.reason.startswith(
        f"Failed: the cluster refused to create it {REFUSALS_BEFORE_FAILING} times in a row, the last time: ")


def test_a_read_the_cluster_refuses_leaves_every_job_queued_saying_so(fake, cluster, two_teams):
    """A permission taken away (an RBAC change): the cycle cannot plan, as when the cluster is unreachable,
    and the queued jobs say why instead of keeping their last reasons and estimates."""
    fake.fail(403, method="GET", path="/pods$", times=10**6,
              message='pods is forbidden: User "system:serviceaccount:gangway:gangway-scheduler" cannot list '
                      'resource "pods" in API group "" at the cluster scope')  # fmt: skip

    result = admission_cycle(cluster=cluster)

    assert result.error.startswith("The cluster refused the cycle's read: list Pod *: 403 Forbidden")
    jobs = list(Job.objects.order_by("id"))
    assert {job.state for job in jobs} == {Job.State.QUEUED} and fake.list("TFJob") == []
    assert {job.reason for job in jobs} == {records.READ_REFUSED_REASON}
    assert [job.events.filter(message=records.READ_REFUSED_REASON).count() for job in jobs] == [1, 1]
    admission_cycle(cluster=cluster)  # said once
    assert [job.events.filter(message=records.READ_REFUSED_REASON).count() for job in jobs] == [1, 1]
    fake.heal()
    admission_cycle(cluster=cluster)
    assert {job.state for job in Job.objects.all()} == {Job.State.ADMITTED}


def test_a_namespace_whose_writes_fail_holds_up_only_its_own_job_in_reconcile(fake, cluster, two_teams):
    alpha, gamma = two_teams
    admission_cycle(cluster=cluster)
    for obj in fake.list("TFJob"):  # alpha's object deleted by hand (reconcile creates it again); gamma's succeeded
        if obj["metadata"]["namespace"] == "alpha":
            del fake.objects[(*kind_path("TFJob"), "alpha", obj["metadata"]["name"])]
        else:
            obj["status"] = {"conditions": [{"type": "Succeeded", "status": "True", "message": "TFJob succeeded."}]}
            fake.add(obj)
    fake.fail(500, method="POST", path="/namespaces/alpha/", times=10**6, message=WEBHOOK_DOWN)
    result = reconcile(cluster=cluster)
    alpha.refresh_from_db(), gamma.refresh_from_db()
    assert not result.error
    assert gamma.state == Job.State.SUCCEEDED  # before, the pass stopped at alpha: "Cluster unreachable"
    assert alpha.state == Job.State.QUEUED and alpha.reason_code == Because.CLUSTER_FAILING


def test_an_outage_still_stops_the_pass(fake, cluster, two_teams):
    admission_cycle(cluster=cluster)
    for obj in fake.list("TFJob"):
        del fake.objects[(*kind_path("TFJob"), obj["metadata"]["namespace"], obj["metadata"]["name"])]
    fake.fail(503, times=10**6)  # every call: the API server is down
    result = reconcile(cluster=cluster)
    assert result.error.startswith("list ")
    fake.heal()
    fake.fail(500, method="POST", times=10**6, message="etcdserver: request timed out")
    fake.fail(500, path="/nodes$", times=10**6)  # writes fail, and so does the read that tells an outage
    fake.log.clear()
    result = reconcile(cluster=cluster)
    assert "500" in result.error
    assert ("GET", "/api/v1/nodes") in fake.log  # the read was made, and failed
    assert set(Job.objects.values_list("state", flat=True)) == {Job.State.ADMITTED}  # nothing requeued


def test_a_stuck_job_whose_suspend_its_namespace_refuses_stays_admitted_and_says_so(fake, cluster, two_teams):
    """R13 evicts a stuck admission by suspending it; a 500 there is a failure to stop it (a server error), said
    as such, never a refused create counted toward failing the job, whose object exists and still runs."""
    alpha, gamma = two_teams
    admission_cycle(cluster=cluster)
    Job.objects.filter(pk=alpha.pk).update(admitted_at=timezone.now() - timedelta(hours=1))
    fake.fail(500, method="PATCH", path="/namespaces/alpha/", times=10**6, message=WEBHOOK_DOWN)
    result = reconcile(cluster=cluster)
    alpha.refresh_from_db()
    assert not result.error
    assert alpha.state == Job.State.ADMITTED and alpha.reason_code != Because.CLUSTER_REFUSED
    assert alpha.events.last().message.startswith(
        "The cluster failed to stop it (a server error, no refusal) (suspend TFJob alpha/")


@pytest.fixture
def four_teams(fake, tiers, owner):
    """Two nodes of 8 GPUs; alpha (4 nominal, may borrow 4), beta (4), gamma (8) and delta (4) each
    with a namespace; `submit(team, gpus)` queues a one-replica job."""
    for name in ("n1", "n2"):
        fake.add(_node(name))
    teams = {}
    for slug, gpu, borrow in (("alpha", 4, 4), ("beta", 4, 0), ("gamma", 8, 0), ("delta", 4, 0)):
        teams[slug] = make_team(slug, tiers, gpu=gpu, borrowing_limit=borrow)
        fake.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": slug}})

    def submit(slug: str, gpus: int) -> Job:
        spec = parse_spec(spec_data(team=slug, name="train", replicas=[{"role": "Worker", "count": 1, "gpu": gpus}]))
        return job_submit(team=teams[slug], owner=owner, spec=spec)[0]

    return submit


def test_a_victim_its_namespace_will_not_let_stop_holds_up_no_other_admission(fake, cluster, four_teams):
    four_teams("alpha", 8), four_teams("beta", 4)  # alpha fills a node, 4 of its GPUs borrowed
    admission_cycle(cluster=cluster)
    four_teams("gamma", 8)  # gamma reclaims alpha's node...
    delta = four_teams("delta", 2)  # ...and delta fits beside beta
    for method in ("PATCH", "DELETE"):
        fake.fail(500, method=method, path="/namespaces/alpha/", times=10**6, message=WEBHOOK_DOWN)
    result = admission_cycle(cluster=cluster)
    assert not result.error
    delta.refresh_from_db()
    assert delta.state == Job.State.ADMITTED and delta.reason_code != Because.CREATE_PENDING
    assert "delta" in {o["metadata"]["namespace"] for o in fake.list("TFJob")}


def _crd(name: str) -> dict:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": name}}


def test_a_spurious_404_on_listing_an_installed_kind_is_an_outage_not_an_empty_list(fake, cluster, two_teams):
    """Read as "no TFJobs", every admitted job would look deleted and be created again; a victim being
    suspended would be requeued while its pods still run."""
    fake.add(_crd("tfjobs.kubeflow.org"))
    admission_cycle(cluster=cluster)
    fake.fail(404, method="GET", path="/apis/kubeflow.org/v1/tfjobs$",  # the statuses' list, which adoption reads too
              message="the server could not find the requested resource")
    fake.log.clear()
    result = reconcile(cluster=cluster)
    assert result.error.startswith("list TFJob *: 404 Not Found, though its CustomResourceDefinition is installed")
    assert [method for method, _ in fake.log].count("POST") == 0  # nothing created again
    assert reconcile(cluster=cluster).error == ""  # the next pass reads it


def test_a_create_answered_by_a_kinds_404_for_a_moment_is_an_outage_never_a_refusal(fake, cluster, two_teams):
    # The API server answers a custom resource's generic NotFound now and then (an aggregated API reloading):
    # counted as the cluster refusing the create, it failed the job at the fifth, "change the job and submit it".
    alpha, _ = two_teams
    fake.add(_crd("tfjobs.kubeflow.org"))  # installed: the 404 is a moment's
    fake.fail(404, method="POST", path="/namespaces/alpha/tfjobs$", times=10**6,
              message="the server could not find the requested resource")
    assert admission_cycle(cluster=cluster).error.startswith("create TFJob alpha/train-g")
    for _ in range(REFUSALS_BEFORE_FAILING + 1):
        assert reconcile(cluster=cluster).error.startswith("create TFJob alpha/train-g")
        alpha.refresh_from_db()
        assert alpha.state == Job.State.ADMITTED and alpha.reason_code == Because.CREATE_PENDING
    fake.heal()
    reconcile(cluster=cluster)  # the kind served again: created where it was placed
    alpha.refresh_from_db()
    assert alpha.state == Job.State.ADMITTED and alpha.reason_code != Because.CREATE_PENDING
    assert fake.get("TFJob", f"train-g{alpha.pk}", "alpha") is not None


@pytest.mark.parametrize("labels", [{}, {JOB_ID_LABEL: "999", **MANAGED_BY}], ids=["unlabelled", "another job's"])
def test_an_object_of_the_jobs_name_that_is_not_its_own_is_a_refusal_not_the_job(fake, cluster, two_teams, labels):
    # Taken for the job's own object, it held the job's admission and its node for good while nothing ran.
    alpha, _ = two_teams
    name = f"train-g{alpha.pk}"
    fake.add({"apiVersion": "kubeflow.org/v1", "kind": "TFJob",
              "metadata": {"name": name, "namespace": "alpha", "labels": labels}, "spec": {"runPolicy": {}}})
    assert not admission_cycle(cluster=cluster).error
    alpha.refresh_from_db()
    assert alpha.state == Job.State.QUEUED and alpha.reason_code == Because.CLUSTER_REFUSED
    assert f"a TFJob of that name exists already, not Gangway's for job {alpha.pk}" in alpha.reason
    assert fake.get("TFJob", name, "alpha")["metadata"].get("labels") == labels  # left as it was


@pytest.mark.parametrize("outside", ["deleted", "suspended"])
def test_a_running_jobs_object_deleted_or_suspended_outside_gangway_comes_back_saying_so(fake, cluster, two_teams,
                                                                                          outside):  # fmt: skip
    alpha, _ = two_teams
    admission_cycle(cluster=cluster)
    Job.objects.filter(pk=alpha.pk).update(state=Job.State.RUNNING, started_at=timezone.now())
    key = (*kind_path("TFJob"), "alpha", f"train-g{alpha.pk}")
    if outside == "deleted":
        del fake.objects[key]
    else:
        fake.objects[key]["spec"]["runPolicy"]["suspend"] = True
    assert reconcile(cluster=cluster).created == 1
    assert fake.objects[key]["spec"]["runPolicy"].get("suspend") in (None, False)
    what = ("was gone from the cluster (deleted outside Gangway): created again" if outside == "deleted"
            else "was suspended outside Gangway: resumed")
    assert alpha.events.get(code=Because.CREATED_AGAIN).message == (
        f"Its TFJob {what} on its nodes; its pods start over, from its last checkpoint if it saves them.")


def test_a_create_of_a_kind_the_cluster_has_not_installed_is_refused_and_the_others_go_on(fake, cluster, tiers, owner):
    # A cluster with the Training Operator and without Kubeflow Trainer answers a TrainJob's create with the
    # generic NotFound: the cluster's word on that job, not an outage that would stop every other create.
    fake.add(_node("n1"))
    fake.add(_crd("tfjobs.kubeflow.org"))
    fake.fail(404, method="POST", path="/trainjobs", times=10**6, message="the server could not find the requested resource")
    teams = {slug: make_team(slug, tiers, gpu=8, borrowing_limit=0) for slug in ("alpha", "gamma")}
    for slug in teams:
        fake.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": slug}})
    train = job_submit(team=teams["alpha"], owner=owner, spec=parse_spec(spec_data(
        team="alpha", name="llama", kind="TrainJob", runtime="torch-distributed", replicas=None, num_nodes=1,
        resources_per_node={"gpu": 1})))[0]  # fmt: skip
    tf = job_submit(team=teams["gamma"], owner=owner, spec=parse_spec(spec_data(
        team="gamma", name="train", replicas=[{"role": "Worker", "count": 1, "gpu": 1}])))[0]  # fmt: skip
    assert not admission_cycle(cluster=cluster).error
    train.refresh_from_db(), tf.refresh_from_db()
    assert train.state == Job.State.QUEUED and train.reason_code == Because.CLUSTER_REFUSED
    assert "the cluster has no TrainJob (its CustomResourceDefinition trainjobs.trainer.kubeflow.org" in train.reason
    assert tf.state == Job.State.ADMITTED and len(fake.list("TFJob")) == 1


def test_a_create_in_a_namespace_that_is_gone_is_refused(fake, cluster, two_teams):
    # A 404 that names what is missing is the cluster's word: the job is requeued, counted as refused.
    alpha, _ = two_teams
    del fake.objects[("api/v1", "namespaces", None, "alpha")]
    assert not admission_cycle(cluster=cluster).error
    alpha.refresh_from_db()
    assert alpha.state == Job.State.QUEUED and alpha.reason_code == Because.CLUSTER_REFUSED
    assert 'namespaces "alpha" not found' in alpha.reason


def test_a_kind_whose_definition_is_not_installed_has_no_jobs(fake, cluster, two_teams):
    fake.add(_crd("tfjobs.kubeflow.org"))  # the Training Operator, without Kubeflow Trainer's TrainJob
    admission_cycle(cluster=cluster)
    assert reconcile(cluster=cluster).error == ""
    assert len(cluster.job_statuses()) == 2


def _their_pytorchjob(namespace: str, name: str) -> dict:
    """A person's own PyTorchJob (no Gangway labels) that happens to share a Gangway job's name."""
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": namespace}, "spec": {}}  # fmt: skip


def _deletes(fake) -> list[str]:
    return [path for method, path in fake.log if method == "DELETE"]


def test_a_cancel_deletes_its_tfjob_and_leaves_a_pytorchjob_of_the_same_name(fake, cluster, two_teams, owner):
    alpha, _ = two_teams
    admission_cycle(cluster=cluster)
    [name] = [o["metadata"]["name"] for o in fake.list("TFJob") if o["metadata"]["namespace"] == "alpha"]
    fake.add(_their_pytorchjob("alpha", name))
    job_cancel(job=alpha, actor=owner)
    fake.log.clear()
    result = reconcile(cluster=cluster)
    alpha.refresh_from_db()
    assert not result.error and alpha.state == Job.State.CANCELLED
    assert fake.get("TFJob", name, "alpha") is None
    assert fake.get("PyTorchJob", name, "alpha") is not None
    assert _deletes(fake) == [f"/apis/kubeflow.org/v1/namespaces/alpha/tfjobs/{name}"]


def test_an_orphan_tfjob_is_deleted_and_a_pytorchjob_of_the_same_name_left(fake, cluster, two_teams):
    labels = {JOB_ID_LABEL: "999", **MANAGED_BY}  # made by Gangway for a job it no longer has
    fake.add({"apiVersion": "kubeflow.org/v1", "kind": "TFJob",
              "metadata": {"name": "train-g999", "namespace": "alpha", "labels": labels}, "spec": {}})  # fmt: skip
    fake.add(_their_pytorchjob("alpha", "train-g999"))
    fake.log.clear()
    result = reconcile(cluster=cluster)
    assert not result.error and result.deleted == 1
    assert fake.get("TFJob", "train-g999", "alpha") is None
    assert fake.get("PyTorchJob", "train-g999", "alpha") is not None
    assert _deletes(fake) == ["/apis/kubeflow.org/v1/namespaces/alpha/tfjobs/train-g999"]
