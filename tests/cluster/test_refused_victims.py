"""A job with victims starts once they have stopped: never while a victim the cluster will not let stop runs.

Gangway never deletes a job from elsewhere, so an adopted victim whose suspend the API server refuses (an
admission webhook's 403 or 422) keeps its room. Before it preempts anyone, the loop asks for a dry run of
each adopted victim's suspend, as it does of the preemptor's create: refused, nobody is preempted and the
job waits, saying which job could not be asked to stop. When the real suspend is refused all the same (a
webhook that cannot be dry-run, or one that changed its mind), the job is not created: it is requeued with
a backoff, and its victim stays preempting, asked to stop again at every reconcile. After a crash between the
cycle's commit and its apply, reconcile (which stops the victims first) requeues the job the same way.

Over real HTTP to the fake API server, through the adapter and the loop.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from core.durations import clock_time
from jobs.codes import Because
from jobs.models import Job
from jobs.services import job_submit
from jobs.spec import parse_spec
from scheduling import loop
from scheduling.cluster.faulty import Killed
from scheduling.loop import admission_cycle
from scheduling.reconcile import reconcile
from scheduling.refusals import REFUSALS_BEFORE_FAILING
from tests.cluster import busy_cluster as busy
from tests.cluster.test_outside_jobs import _deletes, outside_job, world  # noqa: F401 (world: a fixture)
from tests.conftest import make_team, spec_data

VICTIM_PATCHES = "/tfjobs/bert-kubectl$"
DENIED = ('admission webhook "protect.example.com" denied the request: jobs labelled '
          "example.com/protected may not be suspended")
NO_DRY_RUN = 'admission webhook "protect.example.com" does not support dry run'


@pytest.fixture
def victim(world, fake, cluster):
    """Team maps' kubectl TFJob at tier experiment, adopted, admitted and running on n1's 8 GPUs."""
    fake.add(outside_job(labels={"gangway.io/tier": "experiment"}))
    reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)
    job = Job.objects.get()
    busy.run(fake, job)
    reconcile(cluster=cluster)
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING
    fake.dry_runs.clear()
    return job


def _urgent(team, name="urgent") -> Job:
    spec = parse_spec(spec_data(team=team.slug, name=name, tier="production",
                                replicas=[{"role": "Worker", "count": 1, "gpu": 8}]))  # fmt: skip
    return job_submit(team=team, spec=spec)[0]


def _created(fake, namespace: str) -> list[str]:
    """The jobs really created in `namespace` (not dry runs)."""
    return [path for method, path, query in fake.requests if method == "POST" and "dryRun" not in query
            and path.endswith(f"/namespaces/{namespace}/tfjobs")]  # fmt: skip


def _suspended(fake) -> bool:
    return fake.get("TFJob", "bert-kubectl", "maps")["spec"]["runPolicy"]["suspend"] is True


def test_an_adopted_victim_the_cluster_would_not_let_stop_is_not_preempted_and_the_job_waits_saying_so(
        world, fake, cluster, victim):  # fmt: skip
    fake.fail(403, method="PATCH", path=VICTIM_PATCHES, times=10**6, message=DENIED)
    urgent = _urgent(world["maps"])
    later = timezone.now() + timedelta(hours=1)  # past the thrash guard

    result = admission_cycle(cluster=cluster, now=later)

    victim.refresh_from_db(), urgent.refresh_from_db()
    assert result.preempted == 0 and result.admitted == 0
    assert victim.state == Job.State.RUNNING and not _suspended(fake), "it keeps its work"
    assert _created(fake, "maps") == []
    assert ("PATCH", "/apis/kubeflow.org/v1/namespaces/maps/tfjobs/bert-kubectl") in fake.dry_runs
    assert urgent.state == Job.State.QUEUED and urgent.reason_code == Because.VICTIM_REFUSED
    assert urgent.not_before == later + timedelta(seconds=30)
    assert urgent.reason == (
        f"Waiting: it would preempt job bert-kubectl (#{victim.pk}), but the cluster would refuse to suspend it "
        f"(try to suspend TFJob maps/bert-kubectl: 403 Forbidden: {DENIED}), and Gangway never deletes a job from "
        "elsewhere, so it could not make room. Nobody was preempted for it; tried again in 30 s, with its place kept.")
    assert urgent.events.last().message == urgent.reason  # an event its owner reads
    assert _deletes(fake) == []


def test_another_teams_victim_is_named_by_its_team_alone(world, fake, cluster, victim):
    """The preemptor's owner may not see team maps' jobs: neither the job nor the refusal naming its object."""
    vision = world["vision"]
    world["maps"].quotas.filter(resource="gpu").update(nominal=0)  # maps' 8 GPUs are borrowed from vision now
    fake.fail(403, method="PATCH", path=VICTIM_PATCHES, times=10**6, message=DENIED)
    reclaim = _urgent(vision, name="reclaim")

    admission_cycle(cluster=cluster, now=timezone.now() + timedelta(hours=1))

    reclaim.refresh_from_db(), victim.refresh_from_db()
    assert victim.state == Job.State.RUNNING and reclaim.reason_code == Because.VICTIM_REFUSED
    assert reclaim.reason.startswith("Waiting: it would preempt a job of team maps, but the cluster would refuse "
                                     "to suspend it, and Gangway never deletes a job from elsewhere")  # fmt: skip
    assert "bert-kubectl" not in reclaim.reason and "webhook" not in reclaim.reason


def test_waiting_on_a_victim_backs_off_longer_each_time_and_never_fails_the_job(world, fake, cluster, victim):
    fake.fail(403, method="PATCH", path=VICTIM_PATCHES, times=10**6, message=DENIED)
    urgent = _urgent(world["maps"])
    now = timezone.now() + timedelta(hours=1)
    waits = []
    for _ in range(REFUSALS_BEFORE_FAILING + 1):
        admission_cycle(cluster=cluster, now=now)
        urgent.refresh_from_db()
        waits.append(int((urgent.not_before - now).total_seconds()))
        now = urgent.not_before + timedelta(seconds=1)

    assert urgent.state == Job.State.QUEUED and urgent.reason_code == Because.VICTIM_REFUSED
    assert waits == [30, 60, 120, 240, 480, 960]
    victim.refresh_from_db()
    assert victim.state == Job.State.RUNNING and victim.preemption_count == 0


def test_a_victim_whose_suspend_is_refused_after_its_dry_run_passed_keeps_the_preemptor_from_starting(
        world, fake, cluster, victim):  # fmt: skip
    # The webhook cannot be dry-run (the loop then goes ahead), and denies the suspend itself.
    fake.fail(400, method="PATCH", path=VICTIM_PATCHES, times=1, message=NO_DRY_RUN)
    fake.fail(403, method="PATCH", path=VICTIM_PATCHES, times=10**6, message=DENIED)
    urgent = _urgent(world["maps"])
    later = timezone.now() + timedelta(hours=1)

    result = admission_cycle(cluster=cluster, now=later)

    victim.refresh_from_db(), urgent.refresh_from_db()
    assert result.preempted == 1 and result.admitted == 0 and result.error == ""
    assert _created(fake, "maps") == [], "never created while its victim runs"
    assert victim.state == Job.State.PREEMPTING and not _suspended(fake)
    refusal = f"suspend TFJob maps/bert-kubectl: 403 Forbidden: {DENIED}"
    until = clock_time(timezone.localtime(later + timedelta(seconds=600)), timezone.localtime(later).date())
    assert victim.events.get(code=Because.STOP_REFUSED).message == (
        f"The cluster refused to stop it ({refusal}); Gangway tries again at every reconcile until {until}, 600 s "
        "after its first refusal; refused then, its preemption is given up and it runs on, counted in the quota of "
        "team maps.")  # fmt: skip
    assert urgent.state == Job.State.QUEUED and urgent.placement == [] and urgent.admitted_at is None
    assert urgent.not_before == later + timedelta(seconds=30) and urgent.reason_code == Because.VICTIM_REFUSED
    assert urgent.reason == (
        f"Not started: job bert-kubectl (#{victim.pk}), preempted for it, could not be stopped: the cluster refused "
        f"to stop it ({refusal}). A job with victims starts once they have stopped; requeued with its place kept, "
        "tried again in 30 s.")  # fmt: skip
    assert urgent.events.filter(kind="requeued").last().message == urgent.reason

    reconcile(cluster=cluster, now=later)  # asks the victim to stop again; says so once; creates nothing

    victim.refresh_from_db()
    assert victim.state == Job.State.PREEMPTING and victim.events.filter(code=Because.STOP_REFUSED).count() == 1
    assert _created(fake, "maps") == [] and _deletes(fake) == []


def test_once_the_victim_may_stop_the_job_starts_after_its_backoff(world, fake, cluster, victim):
    fake.fail(400, method="PATCH", path=VICTIM_PATCHES, times=1, message=NO_DRY_RUN)
    fake.fail(403, method="PATCH", path=VICTIM_PATCHES, times=1, message=DENIED)
    urgent = _urgent(world["maps"])
    later = timezone.now() + timedelta(hours=1)
    admission_cycle(cluster=cluster, now=later)

    reconcile(cluster=cluster, now=later)  # the webhook lets it stop now: suspended

    assert _suspended(fake)
    for key in [key for key in fake.objects if key[1] == "pods"]:  # the operator stops its pods
        fake.objects.pop(key)
    reconcile(cluster=cluster, now=later)
    victim.refresh_from_db()
    assert victim.state == Job.State.QUEUED
    admission_cycle(cluster=cluster, now=later + timedelta(seconds=31))
    urgent.refresh_from_db()
    assert urgent.state == Job.State.ADMITTED and _created(fake, "maps") != []


def test_after_a_crash_between_the_commit_and_the_apply_reconcile_does_not_start_the_job_either(
        world, fake, cluster, victim, monkeypatch):  # fmt: skip
    fake.fail(400, method="PATCH", path=VICTIM_PATCHES, times=1, message=NO_DRY_RUN)
    fake.fail(403, method="PATCH", path=VICTIM_PATCHES, times=10**6, message=DENIED)
    urgent = _urgent(world["maps"])
    later = timezone.now() + timedelta(hours=1)

    def killed(*args):
        raise Killed("the worker died after the commit")

    monkeypatch.setattr(loop, "_apply", killed)
    with pytest.raises(Killed):
        admission_cycle(cluster=cluster, now=later)
    monkeypatch.undo()
    urgent.refresh_from_db()
    assert urgent.state == Job.State.ADMITTED  # committed, never applied

    reconcile(cluster=cluster, now=later)

    victim.refresh_from_db(), urgent.refresh_from_db()
    assert _created(fake, "maps") == [], "never created while its victim runs"
    assert victim.state == Job.State.PREEMPTING and not _suspended(fake)
    assert urgent.state == Job.State.QUEUED and urgent.reason_code == Because.VICTIM_REFUSED
    assert urgent.reason.startswith(f"Not started: job bert-kubectl (#{victim.pk}), preempted for it, could not be "
                                    "stopped: the cluster refused to stop it (suspend TFJob maps/bert-kubectl: 403")  # fmt: skip
