"""The simulated cluster behaves like Volcano with the Training Operator, in miniature.

The `clock` and `cluster` fixtures come from this folder's conftest: a hand-moved clock drives the cluster.
"""

from __future__ import annotations

from scheduling.cluster.base import ClusterJob, Phase, ReplicaSpec
from scheduling.models import SimJob


def a_job(job_id: int, *, workers: int = 2, gpu: int = 4, duration: int = 100, fail: bool = False,
          max_runtime: int | None = None) -> ClusterJob:  # fmt: skip
    return ClusterJob(
        job_id=job_id, name=f"job-g{job_id}", namespace="maps", team="maps", kind="TFJob", image="busybox",
        command=("true",), args=(), env=(), replicas=(ReplicaSpec("Worker", workers, gpu, 1000, 1024**3),),
        tier="standard", grace_period=30, max_runtime=max_runtime, sim_duration=duration, sim_fail=fail,
    )  # fmt: skip


def phase(cluster, job_id: int) -> Phase:
    return {s.job_id: s for s in cluster.job_statuses()}[job_id].phase


def test_a_created_job_starts_when_every_replica_fits(cluster):
    cluster.create_job(a_job(1))
    status = cluster.job_statuses()[0]
    assert status.phase is Phase.RUNNING and status.running_pods == 2


def test_a_second_create_changes_nothing(cluster):
    cluster.create_job(a_job(1))
    cluster.create_job(a_job(1))
    assert SimJob.objects.count() == 1


def test_a_create_racing_another_workers_create_finds_its_job(cluster, monkeypatch):
    """Two workers create the same job at once (a reconcile and a cycle): the one whose lookup came too
    early collides with the other's row and takes it, as a 409 on the real API server is success."""
    from django.db.models.query import QuerySet

    cluster.create_job(a_job(1))  # the other worker's create
    real_fetch, missed = QuerySet._fetch_all, []

    def first_lookup_misses(self):
        if self.model is SimJob and not missed:
            missed.append(self)
            self._result_cache = []  # it looked before the other worker's row was committed
            return
        real_fetch(self)

    monkeypatch.setattr(QuerySet, "_fetch_all", first_lookup_misses)
    cluster.create_job(a_job(1))
    monkeypatch.undo()
    assert missed and SimJob.objects.count() == 1


def test_a_gang_that_does_not_fit_starts_no_replica(cluster):
    cluster.create_job(a_job(1, workers=3, gpu=8))  # 24 GPUs on 16
    status = cluster.job_statuses()[0]
    assert status.phase is Phase.CREATED and status.running_pods == 0


def test_it_succeeds_after_its_duration_or_fails_when_told(cluster, clock):
    cluster.create_job(a_job(1, duration=100))
    cluster.create_job(a_job(2, workers=1, duration=50, fail=True))
    clock.tick(99)
    assert phase(cluster, 1) is Phase.RUNNING
    clock.tick(1)
    assert phase(cluster, 1) is Phase.SUCCEEDED
    assert phase(cluster, 2) is Phase.FAILED


def test_suspending_frees_the_gpus_at_once_and_a_job_that_saved_nothing_starts_over(cluster, clock):
    cluster.create_job(a_job(1, workers=2, gpu=8, duration=100))
    cluster.create_job(a_job(2, workers=1, gpu=8, duration=100))
    assert phase(cluster, 2) is Phase.CREATED  # both nodes taken by job 1
    clock.tick(60)
    cluster.suspend_job(a_job(1))
    assert phase(cluster, 1) is Phase.SUSPENDED
    assert phase(cluster, 2) is Phase.RUNNING
    clock.tick(100)  # job 2 ends
    cluster.create_job(a_job(1))  # resume
    assert phase(cluster, 1) is Phase.RUNNING
    clock.tick(99)  # its 60 s before the suspend were never checkpointed: all 100 s again
    assert phase(cluster, 1) is Phase.RUNNING
    clock.tick(1)
    assert phase(cluster, 1) is Phase.SUCCEEDED


def test_a_job_past_its_max_runtime_fails_as_the_operator_fails_it_past_its_deadline(cluster, clock):
    cluster.create_job(a_job(1, duration=136, max_runtime=3))
    cluster.create_job(a_job(2, duration=100, max_runtime=3600))
    clock.tick(2)
    assert phase(cluster, 1) is Phase.RUNNING
    clock.tick(10)  # no pass for a while: it ended at its deadline, not when the pass came
    status = {s.job_id: s for s in cluster.job_statuses()}[1]
    assert status.phase is Phase.FAILED and status.running_pods == 0
    assert status.message == ("DeadlineExceeded: TFJob maps/job-g1 was active longer than its activeDeadlineSeconds "
                              "(3 s, its max runtime); its replicas were stopped.")  # fmt: skip
    sim = SimJob.objects.get(job_id=1)
    assert (sim.finished_at - sim.started_at).total_seconds() == 3
    replicas = cluster.logs("maps", 1)
    assert [(r.exit_code, r.reason, r.phase) for r in replicas] == [(143, "DeadlineExceeded", "Failed")] * 2
    assert replicas[0].lines[-1].endswith("WARNING gangway: stopping: the job passed its max runtime (3 s)")
    assert "Traceback (most recent call last):" not in replicas[0].lines
    clock.tick(88)
    assert phase(cluster, 2) is Phase.SUCCEEDED  # within its max runtime: it ends as it would without one


def test_a_stall_counts_toward_the_deadline_as_wall_time(cluster, clock):
    from scheduling.cluster.simulated import drain

    cluster.create_job(a_job(1, workers=1, gpu=8, duration=100, max_runtime=120))
    cluster.create_job(a_job(2, workers=1, gpu=8, duration=10**6))  # takes the other node
    node = SimJob.objects.get(job_id=1).nodes[0]
    clock.tick(50)
    drain(node)  # job 1's replica waits for a node, its training stalled at 50 s of 100
    assert phase(cluster, 1) is Phase.RUNNING
    clock.tick(70)
    assert phase(cluster, 1) is Phase.FAILED  # 120 s since it started, though it trained 50


def test_a_resumed_job_counts_its_deadline_from_its_latest_start(cluster, clock):
    """The operator keeps the start it counts activeDeadlineSeconds from in the job's status, and resets it when a
    suspended job resumes: a job suspended after 60 s of a deadline of 100 s has 100 s again once it runs."""
    cluster.create_job(a_job(1, workers=1, duration=500, max_runtime=100))
    clock.tick(60)
    cluster.suspend_job(a_job(1))
    clock.tick(300)
    cluster.create_job(a_job(1, workers=1, max_runtime=100))  # resumed
    clock.tick(99)
    assert phase(cluster, 1) is Phase.RUNNING
    clock.tick(1)
    assert phase(cluster, 1) is Phase.FAILED


def test_a_job_stored_before_its_replicas_were_kept_runs_as_before_and_keeps_them(cluster, clock):
    """A row written without its replicas (before the column, or by seed_demo's history) is read from its
    manifest, and the next pass keeps them on the row."""
    cluster.create_job(a_job(1, workers=2, gpu=8, duration=100))
    SimJob.objects.update(replicas=None)
    cluster.create_job(a_job(2, workers=1, gpu=8))
    statuses = {status.job_id: status for status in cluster.job_statuses()}
    assert [pod.gpu for pod in statuses[1].pods] == [8, 8] and statuses[2].phase is Phase.CREATED
    assert SimJob.objects.get(job_id=1).replicas == [
        {"role": "Worker", "count": 2, "need": [8, 1000, 1024**3], "terms": []}]
    assert [replica.replica for replica in cluster.logs("maps", 1)] == ["worker-0", "worker-1"]


def test_deleting_a_missing_job_is_success(cluster):
    cluster.delete_job("maps", "nothing-g9", "TFJob")


def test_deleting_deletes_only_the_kind_it_names(cluster):
    cluster.create_job(a_job(1))
    cluster.delete_job("maps", "job-g1", "PyTorchJob")
    assert [(s.name, s.kind) for s in cluster.job_statuses()] == [("job-g1", "TFJob")]
    cluster.delete_job("maps", "job-g1", "TFJob")
    assert cluster.job_statuses() == []


def test_it_follows_the_placement_hint(cluster):
    cluster.create_job(a_job(1, workers=1, gpu=1))
    hinted = a_job(2, workers=1, gpu=1)
    hinted = ClusterJob(**{f: getattr(hinted, f) for f in hinted.__slots__ if f != "placement"}, placement=("node-02",))
    cluster.create_job(hinted)
    assert {s.job_id: s.nodes for s in cluster.job_statuses()}[2] == ("node-02",)


def test_a_job_mounting_a_missing_claim_is_refused_and_creates_nothing(cluster):
    import dataclasses

    import pytest

    from scheduling.cluster.base import ClusterError, VolumeMount
    from scheduling.models import SimClaim

    SimClaim.objects.create(namespace="vision", name="datasets")
    job = dataclasses.replace(a_job(1), volumes=(VolumeMount("claim", "datasets", "/data", True),))
    with pytest.raises(ClusterError, match="which namespace maps does not have"):
        cluster.create_job(job)
    assert SimJob.objects.count() == 0
    SimClaim.objects.create(namespace="maps", name="datasets")
    cluster.create_job(job)
    assert phase(cluster, 1) is Phase.RUNNING


def test_a_running_replica_writes_a_line_per_training_step(cluster, clock):
    cluster.create_job(a_job(1, duration=1000))
    clock.tick(95)
    replicas = cluster.logs("maps", 1)
    assert [r.replica for r in replicas] == ["worker-0", "worker-1"]
    assert all(r.phase == "Running" and r.exit_code is None and not r.failed for r in replicas)
    assert "replica worker-0 (1 of 2) started" in replicas[0].lines[0]
    assert len(replicas[0].lines) == 2 + 9 and "step 9 loss=" in replicas[0].lines[-1]
    clock.tick(1000)
    assert len(cluster.logs("maps", 1, tail=20)[0].lines) == 20


def test_a_failed_job_has_one_replica_with_a_traceback_and_the_rest_stopped_after_it(cluster, clock):
    from scheduling.cluster.base import failing_replica

    cluster.create_job(a_job(1, duration=60, fail=True))
    clock.tick(100)
    replicas = cluster.logs("maps", 1)
    failure = failing_replica(replicas)
    assert (failure.exit_code, failure.reason, failure.phase) == (1, "Error", "Failed")
    assert "Traceback (most recent call last):" in failure.lines and failure.lines[-1] == failure.message
    (other,) = [r for r in replicas if r is not failure]
    assert other.exit_code == 143 and f"replica {failure.replica} failed" in other.lines[-1]
    status = cluster.job_statuses()[0]
    assert status.message == f"Replica {failure.replica} exited with code 1 (Error): {failure.message}"


def test_the_whole_log_of_a_long_job_stays_within_the_byte_limit(cluster, clock):
    from scheduling.cluster.base import LOG_LIMIT_BYTES

    cluster.create_job(a_job(1, duration=10**6))
    clock.tick(10**6 - 1)
    (replica,) = cluster.logs("maps", 1, replica="worker-1", tail=None)
    assert sum(len(line) + 1 for line in replica.lines) <= LOG_LIMIT_BYTES


def test_a_job_not_started_or_suspended_has_no_pods(cluster, clock):
    cluster.create_job(a_job(1, workers=3, gpu=8))  # does not fit
    assert cluster.logs("maps", 1) == [] and cluster.logs("maps", 99) == []
