"""One object the API server keeps failing on, while it answers every read: a webhook of one namespace that
answers 500, or one so slow that the request is not answered in time. That object waits; every other job's
correction goes on, in reconcile and in the admission cycle's apply phase, over real HTTP to the fake API server."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from jobs.codes import Because
from jobs.models import Job
from scheduling.cluster.manifests import JOB_ID_LABEL, MANAGED_BY
from scheduling.loop import admission_cycle
from scheduling.reconcile import ReconcileResult, reconcile
from tests.cluster.busy_cluster import run_admitted
from tests.cluster.fake_apiserver import FakeApiServer, status
from tests.cluster.test_outside_jobs import outside_job

WEBHOOK = 'Internal error occurred: failed calling webhook "validate.tfjobs": context deadline exceeded'


def succeed(fake, job: Job) -> None:
    obj = fake.get("TFJob", f"{job.name}-g{job.pk}", job.team.slug)
    fake.add({**obj, "status": {"conditions": [{"type": "Succeeded", "status": "True", "message": "done"}]}})


def slow(fake, cluster, verb: str, path: str, *, applied: bool = False) -> None:
    """`verb` requests on `path` are answered after the client has given up: a slow webhook. `applied`: the
    server applies them all the same."""
    cluster.api.timeout = (1.0, 0.3)
    served = FakeApiServer.answer.__get__(fake)
    fake.slowed = []  # the paths of the requests slowed, as they came

    def answer(method, raw_path, headers, body):
        if method == verb and path in raw_path and "dryRun" not in raw_path:
            fake.slowed.append(raw_path)
            time.sleep(0.6)
            return served(method, raw_path, headers, body) if applied else (500, status(500, WEBHOOK), {})
        return served(method, raw_path, headers, body)
    fake.answer = answer


def test_a_failing_label_on_an_outside_job_leaves_every_other_correction_to_go_on(fake, cluster, four_teams):
    beta = four_teams("beta", 4)
    admission_cycle(cluster=cluster)
    run_admitted(fake, cluster)
    fake.add(outside_job("TFJob", name="bert-kubectl", namespace="alpha", gpu=1, replicas=1))
    fake.fail(500, method="PATCH", path="/namespaces/alpha/tfjobs/", times=10**6, message=WEBHOOK)
    succeed(fake, beta)
    result = reconcile(cluster=cluster)
    beta.refresh_from_db()
    assert not result.error and beta.state == Job.State.SUCCEEDED


@pytest.mark.parametrize("fault", ["500", "no answer"])
def test_a_victims_failing_suspend_leaves_every_other_correction_to_go_on(fake, cluster, four_teams, fault):
    big = four_teams("alpha", 8, "big")
    beta = four_teams("beta", 4)
    four_teams("delta", 4)
    admission_cycle(cluster=cluster)
    run_admitted(fake, cluster)
    if fault == "500":
        fake.fail(500, method="PATCH", path="/namespaces/alpha/tfjobs/", times=10**6, message=WEBHOOK)
    else:
        slow(fake, cluster, "PATCH", "/namespaces/alpha/tfjobs/")
    gamma = four_teams("gamma", 8)  # reclaims the 4 GPUs alpha borrowed: alpha's job is its victim
    cycle = admission_cycle(cluster=cluster)
    gamma.refresh_from_db()
    # The suspend failed: the victim's object is deleted instead, and the job it was preempted for created.
    assert not cycle.error and gamma.state == Job.State.ADMITTED
    assert fake.get("TFJob", f"big-g{big.pk}", "alpha") is None
    assert fake.get("TFJob", f"train-g{gamma.pk}", "gamma") is not None
    succeed(fake, beta)
    result = reconcile(cluster=cluster)
    beta.refresh_from_db()
    assert not result.error and beta.state == Job.State.SUCCEEDED


@pytest.mark.parametrize("applied", [False, True], ids=["not applied", "applied"])
def test_a_create_not_answered_in_time_stays_admitted_and_the_others_are_created(fake, cluster, four_teams, applied):
    alpha, beta = four_teams("alpha", 4), four_teams("beta", 4)
    slow(fake, cluster, "POST", "/namespaces/alpha/tfjobs", applied=applied)
    cycle = admission_cycle(cluster=cluster)
    alpha.refresh_from_db(), beta.refresh_from_db()
    # It may have been created: it keeps its admission and its nodes, saying so, and no backoff starts.
    assert not cycle.error
    assert alpha.state == Job.State.ADMITTED and alpha.reason_code == "create_pending" and alpha.not_before is None
    assert fake.get("TFJob", f"train-g{beta.pk}", "beta") is not None
    # Once the server answers, reconcile creates it, or finds it created: one object either way. (Its pass builds
    # its own client, which has not met the namespace's slow creates.)
    del fake.answer
    cluster.api.unanswered.clear()
    result = reconcile(cluster=cluster)
    alpha.refresh_from_db()
    assert not result.error and alpha.state == Job.State.ADMITTED and alpha.reason_code != "create_pending"
    assert [o["metadata"]["name"] for o in fake.list("TFJob") if o["metadata"]["namespace"] == "alpha"] == [
        f"train-g{alpha.pk}"]


def test_reconcile_leaves_a_create_not_answered_in_time_for_its_next_pass(fake, cluster, four_teams):
    alpha, beta = four_teams("alpha", 4), four_teams("beta", 4)
    fake.fail(503, method="POST", path="/namespaces/", times=10**6)  # the cycle's creates meet an outage
    admission_cycle(cluster=cluster)
    fake.heal()
    slow(fake, cluster, "POST", "/namespaces/alpha/tfjobs")
    result = reconcile(cluster=cluster)
    alpha.refresh_from_db()
    assert not result.error and result.created == 1  # beta's; alpha's waits for the next pass, still admitted
    assert alpha.state == Job.State.ADMITTED and fake.get("TFJob", f"train-g{beta.pk}", "beta") is not None


def test_a_create_never_answered_in_time_is_requeued_once_r13s_timeout_has_passed(fake, cluster, four_teams, settings):
    alpha = four_teams("alpha", 4)
    slow(fake, cluster, "POST", "/namespaces/alpha/tfjobs")
    admission_cycle(cluster=cluster)
    alpha.refresh_from_db()
    assert alpha.reason == ("Admitted; the cluster did not answer its create in time. Reconcile finds it created, "
                            "or creates it, on the nodes already set aside for it.")
    reconcile(cluster=cluster)  # within ADMISSION_TIMEOUT: still admitted, asked again at the next pass
    alpha.refresh_from_db()
    assert alpha.state == Job.State.ADMITTED
    later = alpha.admitted_at + timedelta(seconds=settings.ADMISSION_TIMEOUT + 1)
    reconcile(cluster=cluster, now=later)
    alpha.refresh_from_db()
    # Its nodes go back to the queue; a server failure, never counted toward failing the job.
    assert alpha.state == Job.State.QUEUED and alpha.reason_code == Because.CLUSTER_FAILING and not alpha.placement


def test_after_one_create_not_answered_in_time_a_pass_sends_no_other_create_to_its_namespace(fake, cluster,
                                                                                              four_teams):  # fmt: skip
    # Each would cost a whole read timeout (30 s by default): a few, and the pass outlasts the task's time limit.
    alpha = [four_teams("alpha", 1, f"a{n}") for n in range(4)]
    beta = four_teams("beta", 1)
    slow(fake, cluster, "POST", "/namespaces/alpha/tfjobs")
    assert not admission_cycle(cluster=cluster).error
    assert len(fake.slowed) == 1
    for job in alpha:
        job.refresh_from_db()
        assert job.state == Job.State.ADMITTED and job.reason_code == Because.CREATE_PENDING
    assert fake.get("TFJob", f"train-g{beta.pk}", "beta") is not None
    # Another operation on the namespace is still sent (its webhook may answer that one): a victim's delete after
    # its suspend went unanswered, in test_a_victims_failing_suspend_leaves_every_other_correction_to_go_on.


def test_a_resume_the_server_fails_is_told_as_a_failure_not_a_refusal(fake, cluster, four_teams):
    beta = four_teams("beta", 4)
    admission_cycle(cluster=cluster)
    run_admitted(fake, cluster)
    name = f"{beta.name}-g{beta.pk}"
    obj = fake.get("TFJob", name, "beta")  # suspended by a person with kubectl: Gangway resumes a job it created
    obj["spec"]["runPolicy"]["suspend"] = True
    fake.add({**obj, "status": {"conditions": [{"type": "Suspended", "status": "True"}]}})
    fake.fail(500, method="PATCH", path=f"/{name}$", times=10**6)

    reconcile(cluster=cluster)

    beta.refresh_from_db()
    last = beta.events.order_by("pk").last().message
    assert beta.state == Job.State.RUNNING
    assert last.startswith("The cluster failed to resume it (a server error, no refusal)"), last


def test_a_failing_delete_of_one_leftover_leaves_the_others_to_be_deleted(fake, cluster, four_teams):
    for job_id, namespace in ((998, "alpha"), (999, "gamma")):  # objects of jobs Gangway no longer has
        fake.add({"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {
            "name": f"old-g{job_id}", "namespace": namespace, "labels": {JOB_ID_LABEL: str(job_id), **MANAGED_BY}},
            "spec": {}})  # fmt: skip
    fake.fail(500, method="DELETE", path="/namespaces/alpha/tfjobs/", times=10**6, message="etcdserver: request timed out")
    result = reconcile(cluster=cluster)
    assert not result.error
    assert fake.get("TFJob", "old-g999", "gamma") is None and fake.get("TFJob", "old-g998", "alpha") is not None


def test_an_outage_partway_says_what_the_pass_did_before_it():
    stopped = ReconcileResult(changed=2, deleted=1, error="list Pod: cannot reach the API server")
    assert stopped.summary == ("Cluster unreachable (list Pod: cannot reach the API server); the pass stopped there. "
                               "Before that: Moved 2 jobs, created 0, suspended 0, deleted 1 cluster objects.")
    assert ReconcileResult(error="down").summary == "Cluster unreachable (down); nothing changed."
