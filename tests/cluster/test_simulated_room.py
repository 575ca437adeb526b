"""The simulated cluster keeps what its running jobs take of each node on the node (`SimNode.gpu_used`,
`cpu_used`, `memory_used`), so that a create or a suspend reads the job and the nodes it may use, never
every running job: with 2,000 running, summing them at each of a cycle's 80 creates and suspends cost it
7 s of CPU (docs/loop-bench.md).

The kept figures must stay the sum of what runs, however jobs start, end, are suspended, resumed or
deleted (by the cluster or by hand) and nodes come, go or are cordoned; and two writers must never both
take a node's last room.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

import pytest
from django.db import connection, transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduling.cluster import simulated_replicas
from scheduling.cluster.base import ClusterJob, Phase, ReplicaSpec
from scheduling.cluster.simulated import SimulatedCluster
from scheduling.models import SimJob, SimNode
from tests.together import run_together

GIB = 1024**3
NODE = {"gpu": 8, "cpu": 64000, "memory": 512 * GIB}


class Clock:
    """A hand-moved clock for the simulated cluster."""

    def __init__(self):
        self.now = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now

    def tick(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def a_job(job_id: int, *, workers: int = 1, gpu: int = 4, cpu: int = 1000, duration: int = 100,
          hint: tuple[str, ...] = ()) -> ClusterJob:  # fmt: skip
    return ClusterJob(
        job_id=job_id, name=f"job-r{job_id}", namespace="maps", team="maps", kind="TFJob", image="busybox",
        command=("true",), args=(), env=(), replicas=(ReplicaSpec("Worker", workers, gpu, cpu, 4 * GIB),),
        tier="standard", grace_period=30, max_runtime=None, sim_duration=duration, placement=hint,
    )  # fmt: skip


def fresh_sum() -> dict[str, list[int]]:
    """What the running simulated jobs take on each node, summed from their rows."""
    running = SimJob.objects.filter(started_at__isnull=False, finished_at__isnull=True)
    return simulated_replicas.taken((job.nodes, simulated_replicas.groups(job)) for job in running)


def kept() -> dict[str, list[int] | None]:
    """The figures each node keeps; None for a node not counted yet."""
    return {name: None if gpu is None else [gpu, cpu, memory] for name, gpu, cpu, memory in
            SimNode.objects.values_list("name", "gpu_used", "cpu_used", "memory_used")}  # fmt: skip


def assert_kept_figures_are_the_sum_of_what_runs() -> None:
    summed = fresh_sum()
    for name, figures in kept().items():
        assert figures is None or figures == summed.get(name, [0, 0, 0]), name


def fits_somewhere(job: SimJob) -> bool:
    """Whether every replica of a waiting job fits at once on the schedulable nodes as they are (its hinted
    node first, then the others by name), counted afresh from the running jobs."""
    summed = fresh_sum()
    free = {node.name: [node.gpu - summed.get(node.name, [0, 0, 0])[0], node.cpu - summed.get(node.name, [0, 0, 0])[1],
                        node.memory - summed.get(node.name, [0, 0, 0])[2]]
            for node in SimNode.objects.filter(schedulable=True)}  # fmt: skip
    for index, need in enumerate(simulated_replicas.needs(job)):
        hinted = [job.hint[index]] if index < len(job.hint) and job.hint[index] in free else []
        for name in hinted + sorted(free):
            if all(have >= want for have, want in zip(free[name], need)):
                free[name] = [have - want for have, want in zip(free[name], need)]
                break
        else:
            return False
    return True


def move_by_hand(job_id: int, node: str, bulk: bool) -> None:
    """Moves every replica of job `job_id`, if it runs, to `node` with a raw write (`QuerySet.update`, or
    `bulk_update` with `bulk`), when they all fit there beside what else runs on it; else changes nothing."""
    job = SimJob.objects.filter(job_id=job_id, started_at__isnull=False, finished_at__isnull=True).first()
    target = SimNode.objects.filter(name=node).first()
    if job is None or target is None:
        return
    taken = fresh_sum().get(node, [0, 0, 0])
    mine = simulated_replicas.taken_by(job).get(node, [0, 0, 0])
    needs = [sum(need[index] for need in simulated_replicas.needs(job)) for index in range(3)]
    room = [target.gpu, target.cpu, target.memory]
    if any(taken[index] - mine[index] + needs[index] > room[index] for index in range(3)):
        return
    job.nodes = [node] * len(job.nodes)
    if bulk:
        SimJob.objects.bulk_update([job], ["nodes"])
    else:
        SimJob.objects.filter(pk=job.pk).update(nodes=job.nodes)


NODE_NAMES = [f"node-{index:02d}" for index in range(1, 5)]
JOB_IDS = st.integers(1, 4)
CREATE = st.tuples(st.just("create"), JOB_IDS, st.integers(1, 3), st.sampled_from([0, 1, 2, 4, 8]),
                   st.sampled_from([500, 16000, 40000]), st.integers(10, 400), st.sampled_from([(), ("node-02",)]))
STEPS = st.one_of(
    CREATE,
    CREATE,  # twice as likely as any other step: most steps then act on a job that exists
    st.tuples(st.just("suspend"), JOB_IDS),
    st.tuples(st.just("resume"), JOB_IDS),
    st.tuples(st.just("delete"), JOB_IDS),
    st.tuples(st.just("delete by hand"), JOB_IDS),
    st.tuples(st.just("tick"), st.floats(0.5, 300)),
    st.tuples(st.just("move by hand"), JOB_IDS, st.sampled_from(NODE_NAMES), st.booleans()),
    st.tuples(st.just("stop by hand"), JOB_IDS),
    st.tuples(st.just("cordon"), st.sampled_from(NODE_NAMES), st.booleans()),
    st.tuples(st.just("add node"), st.sampled_from(NODE_NAMES)),
    st.tuples(st.just("remove node"), st.sampled_from(NODE_NAMES)),
)  # fmt: skip


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])  # fmt: skip
@given(steps=st.lists(STEPS, min_size=4, max_size=25))
def test_the_kept_figures_are_the_sum_of_what_runs_after_any_sequence_of_writes(db, steps):
    """Random creates (some hinted), suspends, resumes, deletes (by the cluster and by hand), running jobs
    moved or stopped by a raw write, the passing of time (jobs end), cordons and nodes added and removed:
    after each, every counted node keeps the sum
    of what runs there, no node holds more than it has, and after each pass no waiting job could start."""
    with transaction.atomic():
        clock = Clock()
        cluster = SimulatedCluster(clock=clock, seed=1, failure_rate=0)
        SimNode.objects.bulk_create(SimNode(name=name, **NODE) for name in NODE_NAMES[:3])
        made: dict[int, ClusterJob] = {}
        for step in steps:
            kind, passed = step[0], True
            if kind == "create":
                job_id, workers, gpu, cpu, duration, hint = step[1:]
                made.setdefault(job_id, a_job(job_id, workers=workers, gpu=gpu, cpu=cpu, duration=duration,
                                              hint=hint * workers))  # fmt: skip
                cluster.create_job(made[job_id])
            elif kind in ("suspend", "resume", "delete", "delete by hand") and step[1] not in made:
                passed = False
            elif kind == "suspend":
                # A job suspended already, or ended, is left as it is: no pass runs.
                passed = SimJob.objects.filter(job_id=step[1], suspended=False, finished_at__isnull=True).exists()
                cluster.suspend_job(made[step[1]])
            elif kind == "resume":
                cluster.create_job(made[step[1]])
            elif kind == "delete":
                job = made[step[1]]
                cluster.delete_job(job.namespace, job.name, job.kind)
            elif kind == "delete by hand":
                SimJob.objects.filter(job_id=step[1]).delete()
                passed = False
            elif kind == "tick":
                clock.tick(step[1])
                cluster.job_statuses()
            elif kind == "move by hand":  # a raw write of where a running job runs (a test's hand, a seed)
                move_by_hand(*step[1:])
                passed = False
            elif kind == "stop by hand":  # its pods never started, as a test says with a raw update
                SimJob.objects.filter(job_id=step[1]).update(started_at=None, nodes=[])
                passed = False
            elif kind == "cordon":
                SimNode.objects.filter(name=step[1]).update(schedulable=step[2])
                passed = False
            elif kind == "add node":
                SimNode.objects.get_or_create(name=step[1], defaults=NODE)
                passed = False
            else:
                SimNode.objects.filter(name=step[1]).delete()
                passed = False
            assert_kept_figures_are_the_sum_of_what_runs()
            summed = fresh_sum()
            for node in SimNode.objects.all():
                taken = summed.get(node.name, [0, 0, 0])
                assert taken[0] <= node.gpu and taken[1] <= node.cpu and taken[2] <= node.memory, node.name
            if passed:  # a pass just ran: it started every waiting job that fits
                waiting = SimJob.objects.filter(started_at__isnull=True, suspended=False, finished_at__isnull=True)
                assert not [job.job_id for job in waiting if fits_somewhere(job)]
        transaction.set_rollback(True)


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def busy(db, clock):
    """40 nodes of 8 GPUs, each running two jobs of 4 GPUs but the last, which runs one: 79 running jobs and
    4 GPUs free, on node-40."""
    SimNode.objects.bulk_create(SimNode(name=f"node-{index:02d}", **NODE) for index in range(1, 41))
    cluster = SimulatedCluster(clock=clock, seed=1, failure_rate=0)
    for job_id in range(1, 80):
        cluster.create_job(a_job(job_id, duration=3600))
    assert SimJob.objects.filter(started_at__isnull=False).count() == 79
    return cluster


class RowsRead:
    """Rows each table returned to SELECTs while it is installed (`connection.execute_wrapper`)."""

    def __init__(self):
        self.rows: dict[str, int] = {}

    def __call__(self, execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if sql.lstrip().upper().startswith("SELECT") and " FROM " in sql:
            table = sql.split(" FROM ", 1)[1].split()[0].strip('"')
            self.rows[table] = self.rows.get(table, 0) + max(context["cursor"].rowcount, 0)
        return result


def test_a_create_and_a_suspend_read_their_job_and_the_nodes_it_may_use_not_every_running_job(busy, clock):
    """Each create and suspend summed every running job's replicas to find the room left: 79 rows here,
    2,000 on a busy cluster. They read the job they change and the nodes with room for it."""
    read = RowsRead()
    with connection.execute_wrapper(read):
        busy.create_job(a_job(100, gpu=4, duration=3600))
    assert read.rows.get("scheduling_simjob", 0) <= 3, read.rows
    assert read.rows.get("scheduling_simnode", 0) <= 1, read.rows  # node-40, the one with 4 GPUs free
    assert SimJob.objects.get(job_id=100).nodes == ["node-40"]
    clock.tick(60)
    read = RowsRead()
    with connection.execute_wrapper(read):
        busy.suspend_job(a_job(100))
    assert read.rows.get("scheduling_simjob", 0) <= 3, read.rows
    assert read.rows.get("scheduling_simnode", 0) <= 1, read.rows
    assert_kept_figures_are_the_sum_of_what_runs()


def test_a_job_ends_at_its_time_to_the_microsecond(busy, clock):
    """The pass finds the jobs whose time is up in the database, with a second to spare; the row decides."""
    busy.create_job(a_job(100, gpu=4, duration=100))
    clock.tick(100 - 1e-6)
    assert {s.job_id: s for s in busy.job_statuses()}[100].phase is Phase.RUNNING
    clock.tick(1e-6)
    assert {s.job_id: s for s in busy.job_statuses()}[100].phase is Phase.SUCCEEDED
    assert_kept_figures_are_the_sum_of_what_runs()


def test_a_running_job_deleted_by_hand_frees_its_room_for_the_next_pass(busy, clock):
    """A job deleted around the cluster (the admin, a test's hand) leaves its nodes to be counted again,
    so the room it held goes to the next job as it would on Kubernetes."""
    SimJob.objects.filter(job_id=79).delete()  # the lone job of node-40
    assert kept()["node-40"] is None
    busy.create_job(a_job(100, gpu=8, duration=3600))
    assert SimJob.objects.get(job_id=100).nodes == ["node-40"]
    assert_kept_figures_are_the_sum_of_what_runs()


@pytest.mark.django_db(transaction=True)
def test_two_creates_at_once_never_both_take_the_last_room(clock, monkeypatch):
    """Two workers create a job of 4 GPUs each at the same moment, with 4 GPUs left: one starts, the other
    waits. Both passes are held at the point where they have read the room and not yet written, for as
    long as the other may need to get there too: one writer at a time means only one ever gets there."""
    SimNode.objects.create(name="node-01", **NODE)
    cluster = SimulatedCluster(clock=clock, seed=1, failure_rate=0)
    cluster.create_job(a_job(1, gpu=4, duration=3600))
    both_read = threading.Barrier(2, timeout=2)
    real_room = simulated_replicas.room

    def room_then_wait(smallest):
        found = real_room(smallest)
        try:
            both_read.wait()
        except threading.BrokenBarrierError:
            pass  # the other waits for this transaction: go on alone
        return found

    monkeypatch.setattr(simulated_replicas, "room", room_then_wait)

    def create(job_id: int):
        def create_it() -> None:
            with transaction.atomic():
                cluster.create_job(a_job(job_id, gpu=4, duration=3600))
        return create_it

    assert run_together(create(2), create(3)) == []
    started = SimJob.objects.filter(job_id__in=[2, 3], started_at__isnull=False)
    assert started.count() == 1
    assert kept()["node-01"] == [8, 2000, 8 * GIB]
    assert_kept_figures_are_the_sum_of_what_runs()
