"""Two transactions writing to the simulated cluster at once wait for each other, never deadlock (real PostgreSQL).

The simulated cluster's writes run in the caller's transaction, so their row locks last until it commits: a
cycle preempting one job while a reconcile suspends another both hold their job's row, then `advance` locks
every unfinished job. Each write takes those locks first, in one order, so the second waits for the first.
"""

from __future__ import annotations

import threading

import pytest
from django.db import transaction

from scheduling.cluster.simulated import SimulatedCluster
from scheduling.models import SimJob
from tests.scheduling.test_simulated_cluster import a_job
from tests.together import run_together


@pytest.mark.django_db(transaction=True)
def test_two_transactions_suspending_two_jobs_at_once_both_go_through(nodes, clock, monkeypatch):
    cluster = SimulatedCluster(clock=clock, seed=1, failure_rate=0)
    cluster.create_job(a_job(1, workers=1, duration=3600))
    cluster.create_job(a_job(2, workers=1, duration=3600))
    # Each suspend has taken what it locks before `advance`; both then advance together, as far as they can.
    both_locked = threading.Barrier(2, timeout=3)
    real_advance = SimulatedCluster.advance

    def advance_together(self):
        try:
            both_locked.wait()
        except threading.BrokenBarrierError:
            pass  # the other waits for this transaction's locks: go on alone
        real_advance(self)

    monkeypatch.setattr(SimulatedCluster, "advance", advance_together)

    def suspend(job_id: int):
        def suspend_it() -> None:
            with transaction.atomic():
                cluster.suspend_job(a_job(job_id, workers=1, duration=3600))
        return suspend_it

    assert run_together(suspend(1), suspend(2)) == []
    assert sorted(SimJob.objects.filter(suspended=True).values_list("job_id", flat=True)) == [1, 2]


@pytest.mark.django_db(transaction=True)
def test_deleting_an_adopted_job_while_a_suspend_patches_it_waits_never_deadlocks(maps, nodes, clock, cycle,
                                                                                 monkeypatch):
    """`kubectl delete` of an adopted job while a preemption suspends it: the suspend holds the outside
    object's row, then locks the simulated cluster's jobs; the delete takes them in the same order."""
    from jobs.models import Job
    from scheduling.cluster import simulated, simulated_outside
    from scheduling.snapshot import to_cluster_job
    from tests.cluster.test_outside_jobs import outside_job

    simulated_outside.add(outside_job(gpu=2), now=clock())
    cycle()
    job = Job.objects.get()
    assert job.state == Job.State.ADMITTED and SimJob.objects.filter(name="bert-kubectl").exists()
    cluster = SimulatedCluster(clock=clock, seed=1, failure_rate=0)
    patched, deleted = threading.Event(), threading.Event()
    real_lock = simulated._lock_unfinished

    def lock_after_the_delete_tried():
        if threading.current_thread().name == "suspend":
            patched.set()  # it holds the outside object's row
            deleted.wait(timeout=3)  # the delete waits for this transaction: go on alone
        return real_lock()

    monkeypatch.setattr(simulated, "_lock_unfinished", lock_after_the_delete_tried)

    def suspend() -> None:
        with transaction.atomic():
            cluster.suspend_job(to_cluster_job(job))

    def delete() -> None:
        patched.wait(timeout=10)
        with transaction.atomic():
            simulated_outside.remove("maps", "bert-kubectl")
        deleted.set()

    assert run_together(suspend, delete) == []
    assert not SimJob.objects.filter(name="bert-kubectl").exists()
