"""Nobody is preempted for a job the cluster would refuse to create.

Before it preempts anyone, the loop asks the API server for a dry run of the preemptor's create
(`dryRun=All`: admission webhooks, the namespace's quota and validation answer, nothing is stored).
A job the cluster would refuse backs off and the plan is made again without it. Before, its victims
were suspended at every try, losing their unsaved work each time, and the job was never created.

Over real HTTP to the fake API server, through the adapter and the loop.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.codes import Because
from jobs.models import Job
from jobs.services import job_submit
from jobs.spec import parse_spec
from scheduling.cluster.base import ClusterError
from scheduling.loop import admission_cycle
from scheduling.reconcile import reconcile
from scheduling.refusals import REFUSALS_BEFORE_FAILING
from scheduling.snapshot import to_cluster_job
from tests.cluster.test_loop_on_apiserver import WEBHOOK_DOWN, four_teams  # noqa: F401 (fixture)
from tests.cluster.test_outside_jobs import outside_job, world  # noqa: F401 (fixture)
from tests.conftest import make_team, spec_data

DENIED = ('admission webhook "validate.gatekeeper.sh" denied the request: [images-from-our-registry] '
          'image "tensorflow/tensorflow:2.12.0-gpu" is not from registry.example.com')
NO_DRY_RUN = 'admission webhook "audit.example.com" does not support dry run'
GAMMA_CREATES = "/apis/kubeflow.org/v1/namespaces/gamma/tfjobs"


@pytest.fixture
def reclaim(fake, cluster, four_teams):
    """alpha fills node n1, 4 of its GPUs borrowed, and beta runs 4 on n2; then gamma, within its nominal,
    queues an 8-GPU job that can only start by reclaiming alpha's node. Returns (alpha, gamma)."""
    alpha = four_teams("alpha", 8)
    four_teams("beta", 4)
    admission_cycle(cluster=cluster)
    reconcile(cluster=cluster)
    fake.dry_runs.clear()
    return alpha, four_teams("gamma", 8)


def _suspended(fake, namespace: str) -> bool:
    return any(f"/namespaces/{namespace}/" in path and "runPolicy" in (patch.get("spec") or {})
               for path, patch in fake.patches)  # fmt: skip


def _tfjobs(fake) -> list[str]:
    return sorted(o["metadata"]["namespace"] for o in fake.list("TFJob"))


def test_a_preemptor_the_cluster_would_refuse_preempts_nobody(fake, cluster, reclaim):
    alpha, gamma = reclaim
    fake.fail(403, method="POST", path=GAMMA_CREATES, times=10**6, message=DENIED)

    result = admission_cycle(cluster=cluster)

    alpha.refresh_from_db(), gamma.refresh_from_db()
    assert alpha.state == Job.State.ADMITTED and not _suspended(fake, "alpha"), "alpha keeps its work"
    assert result.preempted == 0 and _tfjobs(fake) == ["alpha", "beta"]
    assert fake.dry_runs == [("POST", GAMMA_CREATES)]
    assert gamma.state == Job.State.QUEUED and gamma.reason_code == Because.CLUSTER_REFUSED
    assert gamma.not_before is not None and gamma.position is None
    assert gamma.reason == (
        f"The cluster would refuse to create it: try to create TFJob gamma/train-g{gamma.pk}: 403 Forbidden: {DENIED}. "
        "Asked before preempting anyone for it, so nobody was; tried again in 30 s, with its place kept.")
    assert gamma.events.last().message == gamma.reason  # an event a person can read


def test_the_plan_is_made_again_without_it_and_the_next_preemptor_is_tried_too(fake, cluster, reclaim, tiers, owner):
    alpha, gamma = reclaim
    epsilon_team = make_team("epsilon", tiers, gpu=8, borrowing_limit=0)
    fake.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "epsilon"}})
    spec = parse_spec(spec_data(team="epsilon", name="train", replicas=[{"role": "Worker", "count": 1, "gpu": 8}]))
    [epsilon] = job_submit(team=epsilon_team, owner=owner, spec=spec)[:1]
    fake.fail(403, method="POST", path=GAMMA_CREATES, times=10**6, message=DENIED)

    result = admission_cycle(cluster=cluster)

    alpha.refresh_from_db(), gamma.refresh_from_db(), epsilon.refresh_from_db()
    assert fake.dry_runs == [("POST", GAMMA_CREATES), ("POST", "/apis/kubeflow.org/v1/namespaces/epsilon/tfjobs")]
    assert gamma.state == Job.State.QUEUED and gamma.reason_code == Because.CLUSTER_REFUSED
    assert epsilon.state == Job.State.ADMITTED and alpha.state == Job.State.PREEMPTING  # the room went to epsilon
    assert result.admitted == 1 and result.preempted == 1
    assert _tfjobs(fake) == ["alpha", "beta", "epsilon"]


def test_the_fifth_refusal_in_a_row_rejects_it_and_nobody_was_ever_preempted(fake, cluster, reclaim):
    alpha, gamma = reclaim
    fake.fail(403, method="POST", path=GAMMA_CREATES, times=10**6, message=DENIED)
    for _ in range(REFUSALS_BEFORE_FAILING):
        Job.objects.filter(pk=gamma.pk).update(not_before=None)
        admission_cycle(cluster=cluster)

    alpha.refresh_from_db(), gamma.refresh_from_db()
    assert gamma.state == Job.State.REJECTED and gamma.finished_at is not None
    assert gamma.reason.startswith(f"Rejected: the cluster refused to create it {REFUSALS_BEFORE_FAILING} times in "
                                   "a row, the last time (tried before preempting anyone for it): try to create")
    assert gamma.reason.endswith("Change the job and submit it again.")
    waits = list(gamma.events.filter(code=Because.CLUSTER_REFUSED).values_list("message", flat=True))
    assert [w.split(":")[0] for w in waits] == ["The cluster would refuse to create it"] * 4 + ["Rejected"]
    assert "tried again in 240 s" in waits[3]  # the backoff doubled at each try
    assert alpha.state == Job.State.ADMITTED and not _suspended(fake, "alpha")
    assert len(fake.dry_runs) == REFUSALS_BEFORE_FAILING


def test_a_webhook_that_cannot_be_called_backs_it_off_without_rejecting_it(fake, cluster, reclaim):
    """A 500 ("failed calling webhook") is no verdict on the job: nobody is preempted while it lasts,
    the job is never rejected for it, and once the webhook is mended the reclaim goes through."""
    alpha, gamma = reclaim
    fake.fail(500, method="POST", path=GAMMA_CREATES, times=10**6, message=WEBHOOK_DOWN)
    for _ in range(REFUSALS_BEFORE_FAILING + 2):
        Job.objects.filter(pk=gamma.pk).update(not_before=None)
        admission_cycle(cluster=cluster)

    alpha.refresh_from_db(), gamma.refresh_from_db()
    assert gamma.state == Job.State.QUEUED and gamma.reason_code == Because.CLUSTER_FAILING
    assert gamma.reason.startswith("The cluster failed to try creating it (a server error, no verdict on the job)")
    assert alpha.state == Job.State.ADMITTED and not _suspended(fake, "alpha")

    fake.heal()
    Job.objects.filter(pk=gamma.pk).update(not_before=None)
    admission_cycle(cluster=cluster)
    alpha.refresh_from_db(), gamma.refresh_from_db()
    assert gamma.state == Job.State.ADMITTED and alpha.state == Job.State.PREEMPTING
    assert _suspended(fake, "alpha") and "gamma" in _tfjobs(fake)


def test_a_webhook_that_cannot_be_dry_run_lets_the_preemption_go_ahead(fake, cluster, reclaim):
    """A webhook with side effects makes the API server refuse every dry run (400): that proves nothing
    against the create, so the loop preempts and creates as it would without the check."""
    alpha, gamma = reclaim
    fake.fail(400, method="POST", path=GAMMA_CREATES, times=1, message=NO_DRY_RUN)

    admission_cycle(cluster=cluster)

    alpha.refresh_from_db(), gamma.refresh_from_db()
    assert gamma.state == Job.State.ADMITTED and alpha.state == Job.State.PREEMPTING
    assert "gamma" in _tfjobs(fake) and _suspended(fake, "alpha")


def test_a_dry_run_the_cluster_cannot_answer_leaves_the_plan_as_made(fake, cluster, reclaim):
    """An outage proves nothing against the create: the plan goes ahead, as it did before the check, and
    the apply phase meets the outage as usual (the job is created once the cluster answers)."""
    alpha, gamma = reclaim
    fake.fail(503, method="POST", path=GAMMA_CREATES, times=10**6)

    result = admission_cycle(cluster=cluster)

    alpha.refresh_from_db(), gamma.refresh_from_db()
    assert alpha.state == Job.State.PREEMPTING and gamma.state == Job.State.ADMITTED
    assert gamma.reason_code == Because.CREATE_PENDING and result.error.startswith("create TFJob gamma/")
    fake.heal()
    reconcile(cluster=cluster)
    assert "gamma" in _tfjobs(fake)


def test_a_refusal_before_an_outage_in_one_round_still_leaves_the_plan(fake, cluster, four_teams, tiers):
    """Two preemptors in one plan: gamma's dry run is refused, then delta's meets an outage. The plan
    goes ahead for delta, as made without a check, but never for gamma, which was refused."""
    omega = make_team("omega", tiers, gpu=4, borrowing_limit=12)
    fake.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "omega"}})
    spec = parse_spec(spec_data(team="omega", name="wide", replicas=[{"role": "Worker", "count": 1, "gpu": 8}]))
    job_submit(team=omega, spec=spec), job_submit(team=omega, spec=spec)
    admission_cycle(cluster=cluster)  # omega fills both nodes, 12 GPUs borrowed
    gamma, delta = four_teams("gamma", 8), four_teams("delta", 4)  # each reclaims one of omega's nodes
    fake.fail(403, method="POST", path=GAMMA_CREATES, times=10**6, message=DENIED)
    fake.fail(503, method="POST", path="/apis/kubeflow.org/v1/namespaces/delta/tfjobs", times=10**6)

    result = admission_cycle(cluster=cluster)

    gamma.refresh_from_db(), delta.refresh_from_db()
    assert len(fake.dry_runs) >= 2 and fake.dry_runs[0] == ("POST", GAMMA_CREATES)
    assert gamma.state == Job.State.QUEUED and gamma.reason_code == Because.CLUSTER_REFUSED
    assert delta.state == Job.State.ADMITTED and result.preempted == 1
    assert Job.objects.filter(team=omega, state=Job.State.PREEMPTING).count() == 1


def test_an_admission_that_preempts_nobody_is_not_dry_run(fake, cluster, four_teams):
    four_teams("alpha", 4)
    admission_cycle(cluster=cluster)
    assert fake.dry_runs == [] and _tfjobs(fake) == ["alpha"]


def test_a_dry_run_stores_nothing(fake, cluster, reclaim):
    _, gamma = reclaim
    before = _tfjobs(fake)
    cluster.check_create(to_cluster_job(gamma))
    assert _tfjobs(fake) == before and fake.dry_runs == [("POST", GAMMA_CREATES)]


def test_an_adopted_preemptor_whose_admission_the_cluster_would_refuse_preempts_nobody(fake, cluster, world):
    """A job from elsewhere is admitted by a patch of its own object, not a create: that patch is dry-run."""
    spec = parse_spec(spec_data(team="maps", name="explore", tier="experiment",
                                replicas=[{"role": "Worker", "count": 1, "gpu": 8}]))  # fmt: skip
    [explore] = job_submit(team=world["maps"], spec=spec)[:1]
    admission_cycle(cluster=cluster)
    fake.add(outside_job(replicas=1, gpu=8, labels={"gangway.io/tier": "production"}))
    reconcile(cluster=cluster)  # adopted: production work of maps, which may preempt maps' experiment
    fake.dry_runs.clear()
    path = "/apis/kubeflow.org/v1/namespaces/maps/tfjobs/bert-kubectl"
    fake.fail(403, method="PATCH", path=path, times=10**6, message=DENIED)

    admission_cycle(cluster=cluster, now=timezone.now() + timedelta(hours=1))  # past the thrash guard

    explore.refresh_from_db()
    adopted = Job.objects.exclude(pk=explore.pk).get()
    assert fake.dry_runs == [("PATCH", path)]
    assert explore.state == Job.State.ADMITTED and not _suspended(fake, "maps")
    assert adopted.state == Job.State.QUEUED and adopted.reason_code == Because.CLUSTER_REFUSED
    assert fake.get("TFJob", "bert-kubectl", "maps")["spec"]["runPolicy"]["suspend"] is True


def test_the_dry_run_of_a_suspended_jobs_readmission_tries_its_resume_and_changes_nothing(fake, cluster, reclaim):
    """A job preempted before keeps its suspended object: admitting it again resumes that object, so the dry
    run tries the resume (the create answers 409, it exists) and a webhook refusing it is heard."""
    alpha, _ = reclaim
    cluster.suspend_job(to_cluster_job(alpha))
    path = f"/apis/kubeflow.org/v1/namespaces/alpha/tfjobs/train-g{alpha.pk}"
    before = fake.get("TFJob", f"train-g{alpha.pk}", "alpha")
    fake.dry_runs.clear()

    cluster.check_create(to_cluster_job(alpha))

    assert fake.dry_runs == [("POST", "/apis/kubeflow.org/v1/namespaces/alpha/tfjobs"), ("PATCH", path)]
    assert fake.get("TFJob", f"train-g{alpha.pk}", "alpha") == before  # still suspended, unchanged
    fake.fail(403, method="PATCH", path=path, message=DENIED)
    with pytest.raises(ClusterError, match=r"^try to resume TFJob alpha/train-g\d+: 403 Forbidden: admission webhook"):
        cluster.check_create(to_cluster_job(alpha))
