"""Four processes running cycles at once never over-admit and never create a job twice (real PostgreSQL)."""

from __future__ import annotations

import multiprocessing
from collections import Counter, defaultdict

import pytest
from django.db import connections

from jobs.models import Job, JobEvent
from jobs.services import job_submit
from jobs.spec import parse_spec
from scheduling.models import SimJob, SimNode
from tests.conftest import make_team, make_user, spec_data

PROCESSES = 4
CYCLES = 6


def check_invariants() -> list[str]:
    """Broken promises in the database right now: node capacity, team quota, duplicate cluster jobs."""
    problems = []
    capacity = dict(SimNode.objects.values_list("name", "gpu"))
    used: Counter = Counter()
    by_team: Counter = Counter()
    for job in Job.objects.filter(state__in=Job.ACTIVE_STATES).select_related("team"):
        gpus = [g["gpu"] for g in job.replicas for _ in range(g["count"])]
        for node, gpu in zip(job.placement, gpus):
            used[node] += gpu
        by_team[job.team.slug] += job.gpu_total
    problems += [f"{node} holds {gpu} > {capacity[node]}" for node, gpu in used.items() if gpu > capacity[node]]
    problems += [f"{team} uses {gpu} > 12" for team, gpu in by_team.items() if gpu > 12]
    duplicates = [job for job, n in Counter(SimJob.objects.values_list("job_id", flat=True)).items() if n > 1]
    problems += [f"job {job} created twice" for job in duplicates]
    return problems


def run_cycles(worker: int, queue) -> None:
    connections.close_all()  # never share the parent's socket
    import time

    from scheduling import loop
    from scheduling.cluster.simulated import SimulatedCluster
    from scheduling.loop import admission_cycle
    from scheduling.reconcile import reconcile

    real_plan = loop.make_plan

    def slow_plan(snapshot, **kwargs):
        """Plan, then linger: every cycle overlaps the others' between reading and writing."""
        plan = real_plan(snapshot, **kwargs)
        time.sleep(0.2)
        return plan

    loop.make_plan = slow_plan

    outcome = defaultdict(int)
    try:
        cluster = SimulatedCluster(seed=worker, failure_rate=0)
        from tenants.models import Team

        user = Job.objects.first().owner
        for index in range(CYCLES):
            # Each process brings its own new job, so the processes plan from different snapshots.
            team = Team.objects.get(slug=("maps", "vision", "speech")[(worker + index) % 3])
            spec = parse_spec(spec_data(team=team.slug, name=f"w{worker}-{index}", simulate={"duration": 3600},
                                        replicas=[{"role": "Worker", "count": 1, "gpu": 2}]))  # fmt: skip
            job_submit(team=team, spec=spec, owner=user)
            reconcile(cluster=cluster)
            result = admission_cycle(cluster=cluster)
            outcome["skipped" if result.skipped else "ran"] += 1
            outcome["admitted"] += result.admitted
            for problem in check_invariants():
                outcome[f"broken: {problem}"] += 1
    except Exception as error:  # report to the parent rather than die silently
        outcome[f"error: {error!r}"] += 1
    finally:
        connections.close_all()
        queue.put(dict(outcome))


@pytest.mark.django_db(transaction=True)
def test_four_processes_running_cycles_never_over_admit_or_double_create(tiers):
    for index in range(1, 4):
        SimNode.objects.create(name=f"node-{index:02d}", gpu=8, cpu=64000, memory=512 * 1024**3)
    teams = [make_team(slug, tiers, gpu=8, borrowing_limit=4) for slug in ("maps", "vision", "speech")]
    user = make_user("ci", teams=teams)
    for index in range(6):
        team = teams[index % 3]
        spec = parse_spec(spec_data(team=team.slug, name=f"job-{index}", simulate={"duration": 3600},
                                    replicas=[{"role": "Worker", "count": 1 + index % 3, "gpu": 2}]))  # fmt: skip
        job_submit(team=team, spec=spec, owner=user)
    connections.close_all()

    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    workers = [context.Process(target=run_cycles, args=(n, queue)) for n in range(PROCESSES)]
    for process in workers:
        process.start()
    outcomes = [queue.get(timeout=120) for _ in workers]
    for process in workers:
        process.join(timeout=30)

    problems = [key for outcome in outcomes for key in outcome if key.startswith(("broken", "error"))]
    assert problems == []
    assert sum(o.get("ran", 0) for o in outcomes) > 0, "cycles ran"
    admitted = sum(o.get("admitted", 0) for o in outcomes)
    assert admitted == JobEvent.objects.filter(kind="admitted").count() > 0, "every admission counted once"
    assert check_invariants() == []
    # Preempted jobs keep a suspended object in the cluster for their resume; the rest match one to one.
    assert SimJob.objects.filter(suspended=False).count() == Job.objects.filter(state__in=Job.ACTIVE_STATES).count()


@pytest.mark.django_db(transaction=True)
def test_a_cycle_is_skipped_while_another_holds_the_lock(tiers, nodes):
    """Single flight: while one transaction holds the cycle lock, a cycle elsewhere does nothing."""
    import threading

    from django.db import transaction

    from scheduling.cluster.simulated import SimulatedCluster
    from scheduling.locks import try_transaction_lock
    from scheduling.loop import CYCLE_LOCK, admission_cycle

    team = make_team("maps", tiers, gpu=8)
    job_submit(team=team, spec=parse_spec(spec_data()), owner=make_user("u", teams=[team]))
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with transaction.atomic():
            assert try_transaction_lock(CYCLE_LOCK)
            held.set()
            release.wait(timeout=30)
        connections.close_all()

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(timeout=30)
    try:
        assert admission_cycle(cluster=SimulatedCluster()).skipped
        assert Job.objects.get().state == "queued"
    finally:
        release.set()
        holder.join()
    assert admission_cycle(cluster=SimulatedCluster()).admitted == 1
