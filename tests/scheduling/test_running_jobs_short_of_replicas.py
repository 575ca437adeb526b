"""R13 for a running job: a replica lost with its node (drained), made again and taken by no node, leaves the
rest of the gang holding its GPUs. The first pass that sees it says so on the job and its timeline; still
short ADMISSION_TIMEOUT later, the job is evicted and requeued as a stuck admission is; a replica that starts
again in time clears it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from core.durations import clock_time
from jobs.codes import Because
from jobs.models import Job, JobEvent
from scheduling.cluster import simulated, simulated_outside
from scheduling.invariants import check
from scheduling.models import SimJob, SimOutsideJob
from tests.cluster.test_outside_jobs import outside_job
from tests.scheduling.test_simulated_drains import running_wide

pytestmark = pytest.mark.django_db


def _notes(job: Job) -> list[str]:
    return list(job.events.filter(code=Because.SHORT_OF_REPLICAS).order_by("pk").values_list("message", flat=True))


def test_a_running_job_whose_lost_replica_never_starts_is_evicted_after_the_admission_timeout_not_before(
        submit, cycle, cluster, clock, settings):  # fmt: skip
    job = running_wide(submit, cycle)
    assert simulated.drain("node-01") == 1  # worker-0 is evicted; node-02 is full with worker-1: nowhere to go
    cycle()
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING and job.short_since == clock()
    deadline = clock_time(timezone.localtime(clock() + timedelta(seconds=settings.ADMISSION_TIMEOUT)),
                          timezone.localtime(clock()).date())  # fmt: skip
    assert (job.reason_code, job.reason) == (
        Because.SHORT_OF_REPLICAS,
        "Only 1 of 2 replicas running: worker-0 waits to start (its node was drained, and no node that takes pods "
        f"has room for it); evicted and requeued if it has not started by {deadline}.")  # fmt: skip
    assert _notes(job) == [job.reason]

    clock.tick(settings.ADMISSION_TIMEOUT)  # exactly the timeout: not yet
    cycle()
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING and _notes(job) == [job.reason], "said once, while it stays short"
    assert check(cluster, settled=True) == []

    clock.tick(1)
    cycle()
    job.refresh_from_db()
    assert (job.state, job.attempt, job.placement, job.short_since) == (Job.State.QUEUED, 2, [], None)
    assert job.reason_code == Because.BACKOFF and job.reason == "Backing off for 30 s after running short of replicas."
    assert job.not_before == clock() + timedelta(seconds=30)
    evicted = job.events.get(kind=JobEvent.Kind.EVICTED)
    assert (evicted.code, evicted.from_state, evicted.to_state) == (Because.SHORT_OF_REPLICAS, "running", "preempting")
    assert evicted.message == (f"Evicted: only 1 of 2 replicas were running {settings.ADMISSION_TIMEOUT} s after it "
                               "ran short: worker-0 had not started (its node was drained, and no node that takes "
                               "pods has room for it); its other replicas held their GPUs meanwhile.")  # fmt: skip
    requeued = job.events.order_by("pk").last()
    assert (requeued.kind, requeued.code, requeued.message) == (
        JobEvent.Kind.REQUEUED, Because.BACKOFF, "Requeued with its place kept; not admitted again for 30 s.")
    sim = SimJob.objects.get(job_id=job.pk)
    assert sim.suspended and sim.nodes == [] and sim.unplaced == 0  # its GPUs on node-02 are free again
    assert check(cluster, settled=True) == []


def test_a_job_whose_lost_replica_starts_again_in_time_is_not_evicted_and_its_note_is_cleared(
        submit, cycle, cluster, clock, settings, third_node, vision, staff):  # fmt: skip
    job = running_wide(submit, cycle)
    other = submit(name="brief", team=vision, user=staff, simulate={"duration": 300},
                   replicas=[{"role": "Worker", "count": 1, "gpu": 8}])  # fmt: skip
    cycle()
    cycle()
    assert Job.objects.get(pk=other.pk).placement == ["node-03"]
    simulated.drain("node-01")
    cycle()
    job.refresh_from_db()
    assert job.short_since is not None and job.reason_code == Because.SHORT_OF_REPLICAS

    clock.tick(301)  # `brief` ends; worker-0 takes node-03 in the same pass
    cycle()
    job.refresh_from_db()
    assert (job.state, job.short_since, job.reason, job.reason_code) == (Job.State.RUNNING, None, "", "")
    assert SimJob.objects.get(job_id=job.pk).nodes == ["node-03", "node-02"]
    assert _notes(job)[1] == ("All 2 replicas running again, after 301 s short of some; it is no longer to be "
                              "evicted.")  # fmt: skip

    clock.tick(settings.ADMISSION_TIMEOUT + 1)
    cycle()
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING and job.attempt == 1
    assert not job.events.filter(kind=JobEvent.Kind.EVICTED).exists()
    assert check(cluster, settled=True) == []


def test_a_job_short_again_later_counts_its_time_from_then(submit, cycle, clock, settings, third_node, vision, staff):
    job = running_wide(submit, cycle)
    submit(name="brief", team=vision, user=staff, simulate={"duration": 300},
           replicas=[{"role": "Worker", "count": 1, "gpu": 8}])  # fmt: skip
    cycle()
    simulated.drain("node-01")
    cycle()
    clock.tick(301)
    cycle()  # worker-0 back, on node-03
    clock.tick(settings.ADMISSION_TIMEOUT)
    simulated.drain("node-03")  # lost again: short from now, not from the first time
    cycle()
    job.refresh_from_db()
    assert job.short_since == clock() and job.state == Job.State.RUNNING
    clock.tick(settings.ADMISSION_TIMEOUT)
    cycle()
    assert Job.objects.get(pk=job.pk).state == Job.State.RUNNING
    clock.tick(1)
    cycle()
    assert Job.objects.get(pk=job.pk).state == Job.State.QUEUED


def test_an_adopted_job_short_of_replicas_is_suspended_never_deleted(maps, cycle, cluster, clock, settings):
    simulated_outside.add(outside_job(gpu=8, replicas=2), now=clock())
    cycle()
    SimJob.objects.update(duration=7200)  # runs long enough to be evicted first
    cycle()
    job = Job.objects.get()
    assert job.adopted and job.state == Job.State.RUNNING
    simulated.drain("node-01")
    cycle()
    clock.tick(settings.ADMISSION_TIMEOUT + 1)
    cycle()
    job.refresh_from_db()
    assert job.state == Job.State.QUEUED and job.events.filter(code=Because.SHORT_OF_REPLICAS,
                                                               kind=JobEvent.Kind.EVICTED).exists()  # fmt: skip
    assert SimJob.objects.get(job_id=job.pk).suspended
    assert SimOutsideJob.objects.get().manifest["spec"]["runPolicy"]["suspend"] is True


def test_a_running_job_whose_object_is_made_again_and_never_starts_is_evicted_too(submit, cycle, clock, settings):
    job = running_wide(submit, cycle)
    SimJob.objects.filter(job_id=job.pk).delete()  # deleted outside Gangway: reconcile creates it again...
    simulated.cordon("node-01")
    simulated.cordon("node-02")  # ...and no node takes its gang
    cycle()
    cycle()
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING and job.short_since == clock()
    assert job.reason.startswith("None of its 2 replicas running: worker-0 and worker-1 wait to start (each: its "
                                 "gang waits for room on the nodes for every replica at once); evicted and requeued "
                                 "if they have not started by ")  # fmt: skip
    clock.tick(settings.ADMISSION_TIMEOUT + 1)
    cycle()
    job.refresh_from_db()
    assert job.state == Job.State.QUEUED and job.attempt == 2
    assert SimJob.objects.get(job_id=job.pk).suspended


def test_a_job_of_one_replica_says_its_only_replica_is_not_running_then_running_again(
        submit, cycle, clock, settings):  # fmt: skip
    job = submit(name="solo", replicas=[{"role": "Worker", "count": 1, "gpu": 8}], simulate={"duration": 7200})
    cycle()
    cycle()
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING
    [node] = job.placement
    other = "node-02" if node == "node-01" else "node-01"
    simulated.cordon(other)
    simulated.drain(node)
    cycle()
    job.refresh_from_db()
    assert job.reason.startswith("Its only replica is not running: worker-0 waits to start (its node was drained, "
                                 "and no node that takes pods has room for it); evicted and requeued if it has not "
                                 "started by ")  # fmt: skip
    clock.tick(34)
    simulated.cordon(other, schedulable=True)
    cycle()
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING and job.short_since is None
    assert _notes(job)[1] == "Its only replica is running again, after 34 s not running; it is no longer to be evicted."


def test_a_job_of_one_replica_evicted_says_its_only_replica_was_not_running(submit, cycle, clock, settings):
    job = submit(name="solo", replicas=[{"role": "Worker", "count": 1, "gpu": 8}], simulate={"duration": 7200})
    cycle()
    cycle()
    job.refresh_from_db()
    [node] = job.placement
    simulated.cordon("node-02" if node == "node-01" else "node-01")
    simulated.drain(node)
    cycle()
    clock.tick(settings.ADMISSION_TIMEOUT + 1)
    cycle()
    evicted = Job.objects.get(pk=job.pk).events.get(kind=JobEvent.Kind.EVICTED)
    assert evicted.message == (f"Evicted: its only replica was not running {settings.ADMISSION_TIMEOUT} s after it "
                               "ran short: worker-0 had not started (its node was drained, and no node that takes "
                               "pods has room for it).")  # fmt: skip


def test_replicas_that_wait_for_one_reason_are_each_given_it_and_none_running_is_said_so(
        submit, cycle, clock, settings):  # fmt: skip
    job = running_wide(submit, cycle)
    simulated.drain("node-01")
    simulated.drain("node-02")
    cycle()
    job.refresh_from_db()
    assert job.reason.startswith("None of its 2 replicas running: worker-0 and worker-1 wait to start (each: its "
                                 "node was drained, and no node that takes pods has room for it); evicted and "
                                 "requeued if they have not started by ")  # fmt: skip
    clock.tick(settings.ADMISSION_TIMEOUT + 1)
    cycle()
    evicted = Job.objects.get(pk=job.pk).events.get(kind=JobEvent.Kind.EVICTED)
    assert evicted.message == (f"Evicted: none of its 2 replicas was running {settings.ADMISSION_TIMEOUT} s after "
                               "it ran short: worker-0 and worker-1 had not started (each: its node was drained, and "
                               "no node that takes pods has room for it).")  # fmt: skip
