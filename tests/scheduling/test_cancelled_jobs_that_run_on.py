"""A cancelled job whose stop the cluster refuses, or fails, holds its team's quota until its stop goes through.

Its pods run on meanwhile: the cycles count it as a running job of its team (`snapshot.UNSTOPPED`), in its quota as
well as its room, never as a victim, however long that lasts (a person asked it to stop: Gangway never gives up),
and a job of its team waiting for quota is told why. A victim the cluster refused to stop keeps counting once
cancelled; one whose stop went through does not count again. A cycle between a cancel and the reconcile that stops
the job counts it too, so no admission counts on its GPUs, and none is held back for it.

On PostgreSQL and the simulated cluster, behind a webhook that refuses (or, failing, cannot answer for) the objects
it protects.
"""

from __future__ import annotations

from datetime import timedelta
from importlib import import_module

from jobs.codes import Because
from jobs.models import Job, JobEvent
from jobs.services import job_cancel
from jobs.transitions import note, transition
from scheduling.cluster.base import ClusterUnavailable
from scheduling.cluster.faulty import Fault
from scheduling.loop import admission_cycle
from scheduling.models import SimJob
from scheduling.reconcile import reconcile
from scheduling.snapshot import to_cluster_job
from tests.scheduling.test_unstopped_victims_held_everywhere import FailingWebhook
from tests.scheduling.test_victims_that_run_on import (  # noqa: F401 (low, refused: fixtures)
    DENIED, WHOLE_NODE, _object_name, _promises, low, refused,
)


def _maps_used(result) -> int:
    return next(team for team in result.gpu_usage if team["team"] == "maps")["used"]


def test_a_cancelled_job_whose_stop_the_server_fails_holds_its_team_s_quota_until_the_stop_goes_through(
        low, submit, cluster, clock):  # fmt: skip
    """maps (8 GPUs, no borrowing) runs `low` on one node of two; it is cancelled while the API server answers 500
    to its delete. The next job of maps is not created on the other, free node (maps would hold 16 GPUs of its 8)
    for as long as the 500s last, well past ADMISSION_TIMEOUT; once the delete goes through, it is."""
    webhook = FailingWebhook(cluster, protected={_object_name(low)})
    job_cancel(job=low, via="the test")
    reconcile(cluster=webhook, now=clock())
    low.refresh_from_db()
    assert low.state == Job.State.CANCELLING and low.stop_failed_at == clock()
    assert low.events.last().message.startswith("The cluster failed to stop it (a server error, no refusal) (delete ")
    after = submit(name="after", replicas=WHOLE_NODE, simulate={"duration": 600})

    for _ in range(8):  # 800 s of 500s
        result = admission_cycle(cluster=webhook, now=clock())
        assert _maps_used(result) == 8 and not SimJob.objects.filter(job_id=after.pk).exists()
        assert not SimJob.objects.get(job_id=low.pk).suspended, "its pods run on"
        assert _promises(cluster) == []
        clock.tick(100)
        reconcile(cluster=webhook, now=clock())

    low.refresh_from_db(), after.refresh_from_db()
    assert low.state == Job.State.CANCELLING, "never given up: a person asked for it"
    assert low.stop_failed_at == clock() - timedelta(seconds=800), "kept from the first failure"
    assert after.state == Job.State.QUEUED and after.reason_code == "borrowing_limit"
    assert after.reason.endswith(f"Job low (#{low.pk}), being cancelled, still holds 8 GPUs of the team's quota: the "
                                 "cluster refused or failed to stop it when last asked; Gangway asks again at every "
                                 "reconcile.")  # fmt: skip

    webhook.failing = False  # the webhook answers again, and refuses: still held
    reconcile(cluster=webhook, now=clock())
    result = admission_cycle(cluster=webhook, now=clock())
    low.refresh_from_db()
    assert low.state == Job.State.CANCELLING and _maps_used(result) == 8
    assert low.events.last().message.startswith(
        f"The cluster refused to stop it (delete TFJob maps/{_object_name(low)}: 403 Forbidden: {DENIED}); Gangway "
        "tries again at every reconcile.")  # fmt: skip

    webhook.protected.clear()  # and lets it go
    clock.tick(10)
    reconcile(cluster=webhook, now=clock())
    admission_cycle(cluster=webhook, now=clock())
    low.refresh_from_db(), after.refresh_from_db()
    assert low.state == Job.State.CANCELLED and not SimJob.objects.filter(job_id=low.pk).exists()
    assert after.state == Job.State.ADMITTED and SimJob.objects.filter(job_id=after.pk).exists()
    assert _promises(cluster) == []


def test_a_victim_the_cluster_refuses_to_stop_keeps_counting_once_cancelled(refused, low, cluster, clock):
    """Cancelled before the next reconcile: the cycle in between still counts it (the mark of its refused stop is
    carried over), and, refused still, it never runs on, as a victim would after ADMISSION_TIMEOUT."""
    webhook, urgent = refused
    job_cancel(job=low, via="the test")
    low.refresh_from_db()
    assert low.state == Job.State.CANCELLING and low.stop_failed_at == low.not_before == clock()

    for _ in range(8):  # past the job's backoff, and past ADMISSION_TIMEOUT
        clock.tick(100)
        result = admission_cycle(cluster=webhook, now=clock())
        assert _maps_used(result) == 8 and not SimJob.objects.filter(job_id=urgent.pk).exists()
        assert _promises(cluster) == []
        reconcile(cluster=webhook, now=clock())

    low.refresh_from_db(), urgent.refresh_from_db()
    assert low.state == Job.State.CANCELLING and not low.events.filter(code=Because.RUNS_ON).exists()
    assert urgent.state == Job.State.QUEUED

    webhook.protected.clear()
    reconcile(cluster=webhook, now=clock())
    admission_cycle(cluster=webhook, now=clock())
    low.refresh_from_db(), urgent.refresh_from_db()
    assert low.state == Job.State.CANCELLED and urgent.state == Job.State.ADMITTED


def test_a_cycle_between_a_cancel_and_reconcile_does_not_give_the_quota_away(low, submit, cluster, clock):
    """Its pods run until reconcile deletes its object: the next job of maps waits for it, saying so, then starts."""
    job_cancel(job=low, via="the test")
    after = submit(name="after", replicas=WHOLE_NODE, simulate={"duration": 600})

    result = admission_cycle(cluster=cluster, now=clock())

    after.refresh_from_db()
    assert _maps_used(result) == 8 and after.state == Job.State.QUEUED
    assert after.reason.endswith(f"Job low (#{low.pk}), being cancelled, still holds 8 GPUs of the team's quota: its "
                                 "pods may still run; Gangway stops them at its next reconcile.")  # fmt: skip
    assert _promises(cluster) == []
    reconcile(cluster=cluster, now=clock())
    admission_cycle(cluster=cluster, now=clock())
    low.refresh_from_db(), after.refresh_from_db()
    assert low.state == Job.State.CANCELLED and after.state == Job.State.ADMITTED


def test_a_victim_whose_stop_went_through_holds_nothing_once_cancelled(low, vision, staff, submit, cluster, clock):
    """Its room is the job's it was preempted for: counted again, the node would hold 16 GPUs of its 8. So it is
    not, even while the cluster refuses to delete its object, which stays suspended."""
    urgent = submit(name="urgent", tier="production", replicas=WHOLE_NODE, simulate={"duration": 72000})
    admission_cycle(cluster=cluster, now=clock())
    low.refresh_from_db(), urgent.refresh_from_db()
    assert low.state == Job.State.PREEMPTING and SimJob.objects.get(job_id=low.pk).suspended
    assert urgent.state == Job.State.ADMITTED and urgent.placement == low.placement

    job_cancel(job=low, via="the test")
    webhook = FailingWebhook(cluster, protected={_object_name(low)}, failing=False)
    for _ in range(3):
        clock.tick(100)
        reconcile(cluster=webhook, now=clock())
        result = admission_cycle(cluster=webhook, now=clock())
        assert _maps_used(result) == 8 and _promises(cluster) == []

    low.refresh_from_db(), urgent.refresh_from_db()
    assert low.state == Job.State.CANCELLING and not low.held_until_stopped
    assert low.stop_failed_at is not None, "its refusal is still kept and said"
    assert urgent.state == Job.State.RUNNING

    # Nor does it hold back a job admitted since whose create did not reach the cluster, as a victim would.
    other = submit(name="other", team=vision, user=staff, replicas=WHOLE_NODE, simulate={"duration": 600})
    webhook.faults.append(Fault("create_job", "before", ClusterUnavailable))
    admission_cycle(cluster=webhook, now=clock())
    other.refresh_from_db()
    assert other.state == Job.State.ADMITTED and not SimJob.objects.filter(job_id=other.pk).exists()
    reconcile(cluster=webhook, now=clock())
    other.refresh_from_db()
    assert other.state == Job.State.ADMITTED and SimJob.objects.filter(job_id=other.pk).exists()
    assert _promises(cluster) == []


def test_a_job_cancelled_while_it_ran_holds_back_no_admission(low, vision, staff, submit, cluster, clock):
    """A job of vision admitted after the cancel, whose create never reached the cluster, was admitted by a cycle
    that counted `low` as running: it is created at the next reconcile, however long the cluster refuses to
    delete `low` (a victim would hold it back)."""
    job_cancel(job=low, via="the test")
    other = submit(name="other", team=vision, user=staff, replicas=WHOLE_NODE, simulate={"duration": 600})
    webhook = FailingWebhook(cluster, protected=set(), faults=[Fault("create_job", "before", ClusterUnavailable)])
    admission_cycle(cluster=webhook, now=clock())
    other.refresh_from_db()
    assert other.state == Job.State.ADMITTED and not SimJob.objects.filter(job_id=other.pk).exists()

    webhook.protected.add(_object_name(low))
    webhook.failing = False  # refused
    reconcile(cluster=webhook, now=clock())

    low.refresh_from_db(), other.refresh_from_db()
    assert low.state == Job.State.CANCELLING and low.held_until_stopped
    assert other.state == Job.State.ADMITTED and SimJob.objects.filter(job_id=other.pk).exists()
    assert _promises(cluster) == []


def test_a_job_cancelled_before_it_started_holds_its_quota_too(maps, submit, cluster, clock):
    """Admitted and created, its pods not all running yet: they may start before reconcile deletes its object."""
    maps.quotas.filter(resource="gpu").update(borrowing_limit=0)
    first = submit(name="first", replicas=WHOLE_NODE, simulate={"duration": 600})
    admission_cycle(cluster=cluster, now=clock())
    first.refresh_from_db()
    assert first.state == Job.State.ADMITTED

    job_cancel(job=first, via="the test")
    after = submit(name="after", replicas=WHOLE_NODE, simulate={"duration": 600})
    result = admission_cycle(cluster=cluster, now=clock())

    first.refresh_from_db(), after.refresh_from_db()
    assert first.held_until_stopped and _maps_used(result) == 8 and after.state == Job.State.QUEUED


def test_the_promises_see_a_team_over_its_limits_in_the_cluster_that_the_database_counts_within(
        low, submit, cluster, clock):  # fmt: skip
    """What the database counts as stopped must be stopped in the cluster: a job being cancelled that holds
    nothing while its pods run is a broken promise once its quota is given away (here by hand, the job marked
    as stopped though it was cancelled while it ran: `held_until_stopped` keeps such a job counted)."""
    Job.objects.filter(pk=low.pk).update(state=Job.State.CANCELLING)  # not held: counted as stopped
    after = submit(name="after", replicas=WHOLE_NODE, simulate={"duration": 600})
    Job.objects.filter(pk=after.pk).update(state=Job.State.ADMITTED, placement=["node-02"])
    cluster.create_job(to_cluster_job(Job.objects.get(pk=after.pk)))
    assert not SimJob.objects.get(job_id=low.pk).suspended

    assert _promises(cluster) == ["cluster jobs of team maps not suspended ask for 16 GPUs, above 8 + 0"]
    cluster.suspend_job(to_cluster_job(low))
    assert _promises(cluster) == []


def test_the_upgrade_marks_the_jobs_being_cancelled_as_a_cancel_now_does(low, submit, clock):
    """Rows being cancelled as migration jobs/0015 runs: cancelled while running, held (a note after its cancel
    changes nothing); a victim whose stop went through, not; one whose stop the cluster refused, or failed,
    held, with that refusal kept."""
    from django.apps import apps

    upgrade = import_module("jobs.migrations.0015_cancelled_jobs_held_until_stopped")
    stopped, refused, failed = (submit(name=name, replicas=WHOLE_NODE) for name in ("stopped", "refused", "failed"))
    for job in (low, stopped, refused, failed):
        Job.objects.filter(pk=job.pk).update(state=Job.State.RUNNING if job is low else Job.State.PREEMPTING)
        job.refresh_from_db()
        transition(job, Job.State.CANCELLING, message="Cancel requested by the test.")
    note(low, JobEvent.Kind.NOTE, "The cluster refused to stop it.", code=Because.STOP_REFUSED)
    Job.objects.filter(pk=refused.pk).update(not_before=clock())
    Job.objects.filter(pk=failed.pk).update(stop_failed_at=clock() - timedelta(seconds=5))
    Job.objects.filter(pk=low.pk).update(not_before=clock())  # left from an old backoff: no refusal of a stop
    Job.objects.update(held_until_stopped=False)  # as the column is added

    upgrade.mark_the_jobs_being_cancelled(apps, None)

    held = dict(Job.objects.values_list("name", "held_until_stopped"))
    assert held == {"low": True, "stopped": False, "refused": True, "failed": True}
    marks = dict(Job.objects.values_list("name", "stop_failed_at"))
    assert marks == {"low": None, "stopped": None, "refused": clock(), "failed": clock() - timedelta(seconds=5)}


def test_a_job_cancelled_while_it_ran_stays_held_whatever_its_object_shows(low, cluster, clock):
    """An object being resumed reads as suspended until its operator clears the condition, its pods starting
    meanwhile: the refusal of its delete never lets its quota go."""
    SimJob.objects.filter(job_id=low.pk).update(suspended=True)
    job_cancel(job=low, via="the test")
    webhook = FailingWebhook(cluster, protected={_object_name(low)}, failing=False)

    reconcile(cluster=webhook, now=clock())

    low.refresh_from_db()
    assert low.state == Job.State.CANCELLING and low.held_until_stopped and low.stop_failed_at == clock()
