"""The simulated cluster's training reports the checkpoints its log says it saved, at the moments the log
gives, as a real job's training does with `gangway checkpoint`; reconcile records them (R8, the job page).

The `clock` and `cluster` fixtures come from this folder's conftest: a hand-moved clock drives the cluster.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from jobs.models import Job, JobEvent
from jobs.templatetags.gangway import since
from scheduling.cluster.base import ClusterJob, Phase, ReplicaSpec
from scheduling.cluster.simulated_logs import CHECKPOINT_EVERY, STEP
from scheduling.models import SimJob

EVERY = CHECKPOINT_EVERY * STEP  # seconds of training between two checkpoints
WHOLE_NODE = [{"role": "Worker", "count": 1, "gpu": 8}]


def a_job(job_id: int, *, duration: int = 10_000) -> ClusterJob:
    return ClusterJob(
        job_id=job_id, name=f"job-g{job_id}", namespace="maps", team="maps", kind="TFJob", image="busybox",
        command=("true",), args=(), env=(), replicas=(ReplicaSpec("Worker", 2, 4, 1000, 1024**3),),
        tier="standard", grace_period=30, max_runtime=None, sim_duration=duration,
    )  # fmt: skip


def reported(cluster, job_id: int) -> datetime | None:
    return {status.job_id: status for status in cluster.job_statuses()}[job_id].checkpointed_at


def phase(cluster, job_id: int) -> Phase:
    return {status.job_id: status for status in cluster.job_statuses()}[job_id].phase


def logged(cluster, namespace: str, job_id: int) -> datetime | None:
    """When the job's log last says "checkpoint: saved step N" (the same on every replica), or None."""
    moments = set()
    for replica in cluster.logs(namespace, job_id, tail=None):
        saved = [line for line in replica.lines if " INFO checkpoint: saved step " in line]
        moments.add(datetime.strptime(saved[-1][:19], "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc)
                    if saved else None)  # fmt: skip
    (moment,) = moments
    return moment


def test_a_running_job_reports_the_checkpoint_its_log_shows_and_none_before_its_first(cluster, clock):
    cluster.create_job(a_job(1))
    started = clock()
    clock.tick(EVERY - 1)
    assert reported(cluster, 1) is None and logged(cluster, "maps", 1) is None
    clock.tick(2)
    assert reported(cluster, 1) == logged(cluster, "maps", 1) == started + timedelta(seconds=EVERY)
    clock.tick(EVERY * 2 + 5)
    assert reported(cluster, 1) == logged(cluster, "maps", 1) == started + timedelta(seconds=EVERY * 3)


def test_after_a_suspend_and_resume_the_reported_checkpoint_matches_the_log(cluster, clock):
    cluster.create_job(a_job(1))
    clock.tick(EVERY + 50)
    cluster.suspend_job(a_job(1))
    assert reported(cluster, 1) is None, "a suspended job has no pods to report"
    clock.tick(100)
    cluster.create_job(a_job(1))  # resumed from its checkpoint: the 50 s after it are lost
    resumed = clock()
    # Its log replays the first run up to that checkpoint, which now falls at the resume; it was saved
    # and reported in the first run, so this run reports none before its own.
    assert logged(cluster, "maps", 1) == resumed
    assert reported(cluster, 1) is None
    clock.tick(EVERY - 1)
    assert reported(cluster, 1) is None
    clock.tick(1)
    second = resumed + timedelta(seconds=EVERY)  # step 2 * CHECKPOINT_EVERY: EVERY kept, EVERY run again
    assert reported(cluster, 1) == logged(cluster, "maps", 1) == second


def test_a_suspend_keeps_the_training_up_to_the_last_checkpoint_and_loses_the_rest(cluster, clock):
    """A real job that is preempted restarts from its last checkpoint: the work since is done again."""
    cluster.create_job(a_job(1, duration=3 * EVERY))
    clock.tick(2 * EVERY + 250)  # checkpoints at EVERY and 2 * EVERY; 250 s unsaved
    cluster.suspend_job(a_job(1))
    assert SimJob.objects.get(job_id=1).progress == 2 * EVERY
    clock.tick(1000)
    cluster.create_job(a_job(1))
    clock.tick(EVERY - 1)  # what is left of its 3 * EVERY after the 2 * EVERY it kept
    assert phase(cluster, 1) is Phase.RUNNING
    clock.tick(1)
    assert phase(cluster, 1) is Phase.SUCCEEDED


def test_a_second_suspend_before_a_new_checkpoint_keeps_the_first_one(cluster, clock):
    cluster.create_job(a_job(1))
    clock.tick(EVERY + 50)
    cluster.suspend_job(a_job(1))
    cluster.create_job(a_job(1))
    clock.tick(EVERY - 10)  # this run saves nothing before it is stopped again
    cluster.suspend_job(a_job(1))
    assert SimJob.objects.get(job_id=1).progress == EVERY


def test_a_job_stopped_before_its_first_checkpoint_keeps_nothing(cluster, clock):
    cluster.create_job(a_job(1, duration=EVERY))
    clock.tick(EVERY - 1)
    cluster.suspend_job(a_job(1))
    assert SimJob.objects.get(job_id=1).progress == 0
    cluster.create_job(a_job(1))
    clock.tick(EVERY - 1)
    assert phase(cluster, 1) is Phase.RUNNING
    clock.tick(1)
    assert phase(cluster, 1) is Phase.SUCCEEDED


def test_a_job_resumed_in_the_cluster_keeps_its_recorded_checkpoint_until_it_saves_again(submit, cycle, cluster,
                                                                                           clock):
    """Reconcile resumes a running job found suspended; the log's replay of its first run is not a new report."""
    from scheduling.snapshot import to_cluster_job

    job = submit(simulate={"duration": 10_000})
    cycle()
    cycle()
    started = clock()
    clock.tick(EVERY + 50)
    cycle()
    first = started + timedelta(seconds=EVERY)
    assert Job.objects.get(pk=job.pk).checkpointed_at == first
    cluster.suspend_job(to_cluster_job(job))
    clock.tick(100)
    cycle()  # reconcile resumes it, from its checkpoint
    assert logged(cluster, "maps", job.pk) > first
    assert Job.objects.get(pk=job.pk).checkpointed_at == first
    clock.tick(EVERY - 1)
    cycle()
    assert Job.objects.get(pk=job.pk).checkpointed_at == first
    clock.tick(1)
    cycle()
    assert Job.objects.get(pk=job.pk).checkpointed_at == logged(cluster, "maps", job.pk) == clock()


def test_an_ended_job_reports_nothing(cluster, clock):
    cluster.create_job(a_job(1, duration=EVERY + 50))
    clock.tick(EVERY + 60)
    assert logged(cluster, "maps", 1) is not None
    assert reported(cluster, 1) is None


def test_the_job_page_and_the_api_show_the_checkpoint_the_log_shows(submit, cycle, cluster, clock, login, owner):
    clock.tick(-(EVERY + 150))  # the page reads the wall clock: by now, the job has run EVERY + 150 s
    job = submit(simulate={"duration": 10_000})
    cycle()
    cycle()
    assert Job.objects.get(pk=job.pk).state == "running"
    clock.tick(EVERY + 150)
    cycle()
    saved = logged(cluster, "maps", job.pk)
    assert saved is not None
    client = login(owner)
    api = client.get(f"/api/v1/jobs/{job.pk}/").json()
    assert api["checkpointed_at"] and datetime.fromisoformat(api["checkpointed_at"]) == saved
    body = client.get(f"/jobs/{job.pk}/").content.decode()
    assert f"Last checkpoint {since(saved)} ago: if it is preempted" in body


def test_preemption_takes_the_victim_with_the_least_unsaved_work_from_its_reported_checkpoints(submit, cycle, clock):
    """Both run a whole node at the lowest tier. `late` started 250 s after `early`, so it has the least
    work since its start; `early` saved 10 s ago, `late` 60 s ago, so `early` loses the least."""
    early = submit(name="early", tier="experiment", replicas=WHOLE_NODE, simulate={"duration": 10_000})
    cycle()
    cycle()
    clock.tick(250)
    late = submit(name="late", tier="experiment", replicas=WHOLE_NODE, simulate={"duration": 10_000})
    cycle()
    cycle()
    assert [Job.objects.get(pk=job.pk).state for job in (early, late)] == ["running", "running"]
    clock.tick(3 * EVERY + 10 - 250)  # early saved at 3 * EVERY, late at 250 + 2 * EVERY; both past the thrash guard
    submit(name="high", tier="standard", replicas=WHOLE_NODE)
    assert cycle().preempted == 1
    assert JobEvent.objects.get(kind="preempted").job_id == early.pk
    early.refresh_from_db()
    assert early.checkpointed_at == early.started_at + timedelta(seconds=3 * EVERY)


def test_a_job_the_loop_preempts_resumes_from_the_checkpoint_it_reported(submit, cycle, clock):
    """Through the loop, as on a real cluster: the victim's training since its last reported checkpoint is
    done again once it is admitted back, and it ends that much later."""
    victim = submit(name="early", tier="experiment", replicas=WHOLE_NODE, simulate={"duration": 4 * EVERY})
    submit(name="late", tier="experiment", replicas=WHOLE_NODE, simulate={"duration": 10_000})
    cycle()
    cycle()
    clock.tick(3 * EVERY + 100)  # both saved at 3 * EVERY; 100 s unsaved each, so the older goes first
    cycle()
    submit(name="high", tier="standard", replicas=WHOLE_NODE, simulate={"duration": 600})
    assert cycle().preempted == 1 and JobEvent.objects.get(kind="preempted").job_id == victim.pk
    reported = Job.objects.get(pk=victim.pk)
    assert reported.checkpointed_at == reported.started_at + timedelta(seconds=3 * EVERY)
    cycle()
    assert SimJob.objects.get(job_id=victim.pk).progress == 3 * EVERY
    clock.tick(600)  # the preemptor ends; the victim is admitted again, from its checkpoint
    for _ in range(3):
        cycle()
    sim = SimJob.objects.get(job_id=victim.pk)
    assert Job.objects.get(pk=victim.pk).state == Job.State.RUNNING and sim.started_at == clock()
    clock.tick(EVERY - 1)  # the 100 s after its checkpoint run again, within its last EVERY
    cycle()
    assert Job.objects.get(pk=victim.pk).state == Job.State.RUNNING
    clock.tick(1)
    cycle()
    assert Job.objects.get(pk=victim.pk).state == Job.State.SUCCEEDED
