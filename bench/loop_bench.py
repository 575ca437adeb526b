"""The admission loop on a full queue: 100 teams, 500 nodes, 10,000 jobs of which 3,000 wait.

Seeds a scratch PostgreSQL database (created, then dropped) with the pages bench's
world (`bench.pages_bench.seed`: every node full with 2,000 running jobs) and makes
the simulated cluster agree with it: its nodes are the mirrored nodes, each running
job runs there on its placement, each ended one is kept there ended (as for
ENDED_JOB_RETENTION). Then, on a virtual clock that moves only when a case says so,
it runs the real loop (`loop.admission_cycle`, `reconcile.reconcile`) and prints,
per case, the median CPU and wall time, the queries, the rows written (inserted,
updated or deleted) and what the cycle decided, with a digest of every decision so far
(`decisions_digest`: two runs that print the same digests decided alike):

- a steady queue: nothing changed since the last cycle (rows written should be ~0);
- right after a batch of submissions (`--batch`, spread over the teams and tiers);
- after some jobs ended: the clock moves a minute, reconcile ends them, the cycle
  admits into the room they left;
- a reconcile pass on a steady cluster.

Each cycle is broken into its phases (read the cluster, build the world, plan, commit,
record waits, apply, record), with the CPU time and queries of each, and the plan of
the steady cycle's snapshot is timed without and with estimated starts. Times are CPU
seconds of this process (the database's work shows in wall time only); queries are the
statements sent, not counting the BEGIN and COMMIT Django logs around each transaction.

    .venv/bin/python -m bench.loop_bench [--runs 5] [--batch 50] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import random
import statistics
import time
from collections import deque
from contextlib import contextmanager
from datetime import datetime, timedelta

from bench.pages_bench import PG, create_database, drop_database

# Gangway's modules are imported inside the functions that use them: this script sets up
# Django itself, on a database it picks at run time, before any of them may load.

DB = f"gangway_loop_bench_{os.getpid()}"
WRITES = ("INSERT", "UPDATE", "DELETE")
# The cycle's phases, as `admission_cycle` calls them: (name, module, function). Commit includes
# recording the waits; its own figure below has them taken out.
PHASES = (
    ("read", "scheduling.loop", "_read"),
    ("build world", "scheduling.loop", "build_world"),
    ("plan", "scheduling.loop", "make_plan"),
    ("commit", "scheduling.loop", "_commit"),
    ("record waits", "scheduling.loop", "record_waits"),
    ("apply", "scheduling.loop", "_apply"),
    ("record nodes", "scheduling.records", "nodes_seen"),
    ("record cycle", "scheduling.records", "cycle_done"),
    ("usage sample", "scheduling.records", "usage_sample"),
    ("prune", "scheduling.records", "prune_cycles"),
)


class Clock:
    """Virtual time shared by the simulated cluster and the loop; `start` is the seeded world's moment."""

    def __init__(self, now: datetime):
        self.start = self.now = now

    def __call__(self) -> datetime:
        return self.now

    def tick(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="Timed runs of each case (default 5).")
    parser.add_argument("--batch", type=int, default=50, help="Jobs submitted before each cycle of that case (default 50).")
    parser.add_argument("--profile", action="store_true", help="Also print the 25 costliest calls of a steady "
                        "cycle and of a reconcile pass (cProfile, cumulative).")  # fmt: skip
    options = parser.parse_args()
    os.environ["DATABASE_URL"] = f"{PG}/{DB}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.test_settings")
    os.environ["CELERY_BROKER_URL"] = "memory://"  # the tasks a cycle asks for go nowhere: no worker runs here
    import django

    django.setup()
    import logging

    from django.db import connection

    logging.getLogger("gangway").setLevel(logging.WARNING)  # a line per decision would drown the figures
    logging.getLogger("kombu").setLevel(logging.ERROR)
    create_database(DB)
    try:
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        started = time.monotonic()
        clock = seed()
        print(f"Seeded 100 teams, 500 nodes, 10,000 jobs (3,000 waiting, 2,000 running) and the simulated "
              f"cluster in {time.monotonic() - started:.1f} s.\n")  # fmt: skip
        measure(clock, options)
    finally:
        connection.close()
        drop_database(DB)


def seed() -> Clock:
    """The pages bench's world, and the simulated cluster agreeing with it; returns the clock at its moment.

    The simulated cluster keeps what the product would have left in it: a node for each mirrored
    node, each running job running on its placement (to end within the next 100 minutes, about 20
    a minute), and each job that ran and ended kept there ended, as ENDED_JOB_RETENTION keeps it.
    Jobs that succeeded get the start their runtime gives, so R14 learns estimates from them.
    """
    from django.db import connection
    from django.db.models import Prefetch

    from bench.pages_bench import JOBS
    from bench.pages_bench import seed as seed_pages
    from jobs.models import Job
    from scheduling.cluster.job_manifests import job_manifest
    from scheduling.cluster.simulated_replicas import from_manifest
    from scheduling.models import ClusterNode, Cycle, SimJob, SimNode
    from scheduling.snapshot import to_cluster_job
    from tenants.models import Quota

    seed_pages(JOBS)
    rng, now = random.Random(11), Cycle.objects.get().started_at
    SimNode.objects.bulk_create(SimNode(name=node.name, gpu=node.gpu, cpu=node.cpu, memory=node.memory)
                                for node in ClusterNode.objects.all())  # fmt: skip
    quotas = Prefetch("team__quotas", queryset=Quota.objects.order_by("resource"))
    ran = (Job.objects.filter(state__in=[Job.State.RUNNING, Job.State.SUCCEEDED, Job.State.FAILED])
           .select_related("team", "tier").prefetch_related(quotas).order_by("id"))  # fmt: skip
    sims, started = [], []
    for job in ran:
        cluster_job = to_cluster_job(job)
        manifest = job_manifest(cluster_job)
        common = dict(job_id=job.pk, namespace=cluster_job.namespace, name=cluster_job.name, kind=job.kind,
                      manifest=manifest, replicas=from_manifest(manifest))  # fmt: skip
        if job.state == Job.State.RUNNING:
            sims.append(SimJob(**common, nodes=list(job.placement), hint=list(job.placement), created_at=now,
                               started_at=now, duration=rng.randint(60, 6000)))  # fmt: skip
            continue
        runtime = rng.randint(600, 7200)
        job.started_at = job.admitted_at = job.finished_at - timedelta(seconds=runtime)
        started.append(job)
        succeeded = job.state == Job.State.SUCCEEDED
        sims.append(SimJob(**common, created_at=job.started_at, started_at=job.started_at, duration=runtime,
                           fail=not succeeded, finished_at=job.finished_at, succeeded=succeeded,
                           message="Completed." if succeeded else "Worker 0 exited with code 1."))  # fmt: skip
    SimJob.objects.bulk_create(sims, batch_size=1000)
    Job.objects.bulk_update(started, ["started_at", "admitted_at"], batch_size=1000)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return Clock(now + timedelta(seconds=5))


class Tally:
    """Queries and rows written while it is installed (`connection.execute_wrapper`)."""

    def __init__(self):
        self.queries = self.rows = 0
        self.tables: dict[str, int] = {}

    def __call__(self, execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        self.queries += 1
        verb = sql.lstrip().split(" ", 1)[0].upper()
        if verb in WRITES:
            rows = max(context["cursor"].rowcount, 0)
            self.rows += rows
            table = sql.split('"')[1] if '"' in sql else "?"
            self.tables[f"{verb} {table}"] = self.tables.get(f"{verb} {table}", 0) + rows
        return result


@contextmanager
def phases(spent: dict[str, list[float]]):
    """Times each phase of PHASES as the cycle calls it, adding [cpu, wall, queries] to `spent`."""
    import importlib

    from django.db import connection

    originals = []

    def timed(name, function):
        def run(*args, **kwargs):
            cpu, wall, queries = time.process_time(), time.perf_counter(), len(connection.queries_log)
            try:
                return function(*args, **kwargs)
            finally:
                into = spent.setdefault(name, [0.0, 0.0, 0])
                into[0] += time.process_time() - cpu
                into[1] += time.perf_counter() - wall
                into[2] += sum(1 for q in list(connection.queries_log)[queries:] if q["sql"] not in ("BEGIN", "COMMIT"))

        return run

    for name, module_name, attribute in PHASES:
        module = importlib.import_module(module_name)
        originals.append((module, attribute, getattr(module, attribute)))
        setattr(module, attribute, timed(name, getattr(module, attribute)))
    try:
        yield
    finally:
        for module, attribute, function in originals:
            setattr(module, attribute, function)


def run(what, *, cluster, clock, spent: dict | None = None) -> dict:
    """Runs the cycle or reconcile once; returns its figures."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    tally = Tally()
    spent = {} if spent is None else spent
    connection.queries_log = deque(maxlen=1_000_000)  # a busy cycle makes more than Django's 9,000
    with CaptureQueriesContext(connection) as captured, connection.execute_wrapper(tally), phases(spent):
        cpu, wall = time.process_time(), time.perf_counter()
        result = what(cluster=cluster, now=clock())
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    # Django logs BEGIN and COMMIT too; psycopg sends neither for a transaction that ran no statement.
    queries = [q for q in captured.captured_queries if q["sql"] not in ("BEGIN", "COMMIT", "ROLLBACK")]
    return {"cpu": cpu, "wall": wall, "queries": len(queries), "rows": tally.rows,
            "tables": tally.tables, "result": result, "phases": spent}  # fmt: skip


def submit_batch(batch: int, clock: Clock, rng: random.Random, counter: list[int]) -> None:
    """Submits `batch` jobs through the submission service, over random teams and tiers, queued at the clock."""
    from jobs.models import Job
    from jobs.services import job_submit
    from jobs.spec import parse_spec
    from tenants.models import Team

    teams = list(Team.objects.order_by("slug"))
    owner = Job.objects.filter(team=teams[0]).values_list("owner", flat=True).first()
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.get(pk=owner)
    made = []
    for _ in range(batch):
        counter[0] += 1
        team = rng.choice(teams)
        gpus, count = rng.choice(((1, 1), (2, 1), (4, 1), (8, 1), (8, 2)))
        spec = parse_spec({"team": team.slug, "name": f"burst-{counter[0]}", "kind": "TFJob", "image": "busybox",
                           "command": ["python", "train.py"], "tier": rng.choice(("production", "standard", "experiment")),
                           "replicas": [{"role": "Worker", "count": count, "gpu": gpus}]})  # fmt: skip
        made.append(job_submit(team=team, spec=spec, owner=user, via="bench", queue_cap=False)[0].pk)
    Job.objects.filter(pk__in=made).update(submitted_at=clock(), queued_at=clock())


def measure(clock: Clock, options) -> None:
    from scheduling.cluster.simulated import SimulatedCluster
    from scheduling.loop import admission_cycle
    from scheduling.reconcile import reconcile

    cluster = SimulatedCluster(clock=clock, seed=1, failure_rate=0)
    rng, counter = random.Random(3), [0]

    def settle() -> None:
        for _ in range(5):  # until a cycle decides and writes nothing
            reconcile(cluster=cluster, now=clock())
            result = admission_cycle(cluster=cluster, now=clock())
            if not (result.admitted or result.preempted or result.rejected or result.written):
                return

    first = run(admission_cycle, cluster=cluster, clock=clock)
    report("first cycle on the seeded world", [first], clock)
    settle()
    steady = [run(admission_cycle, cluster=cluster, clock=clock) for _ in range(options.runs)]
    report("cycle, steady queue", steady, clock)
    plan_split(cluster, clock)
    passes = [run(reconcile, cluster=cluster, clock=clock) for _ in range(options.runs)]
    report("reconcile, steady", passes, clock)
    after_submit = []
    for _ in range(options.runs):
        submit_batch(options.batch, clock, rng, counter)
        after_submit.append(run(admission_cycle, cluster=cluster, clock=clock))
        settle()
    report(f"cycle after {options.batch} submissions", after_submit, clock)
    ends, after_ends = [], []
    for _ in range(options.runs):
        clock.tick(60)
        ends.append(run(reconcile, cluster=cluster, clock=clock))
        after_ends.append(run(admission_cycle, cluster=cluster, clock=clock))
        settle()
    report("reconcile after a minute of jobs ending", ends, clock)
    report("cycle after those jobs ended", after_ends, clock)
    if options.profile:
        profile("steady cycle", lambda: admission_cycle(cluster=cluster, now=clock()))
        profile("steady reconcile", lambda: reconcile(cluster=cluster, now=clock()))


def plan_split(cluster, clock: Clock) -> None:
    """CPU time of the plan of the current world, without and with estimated starts, as the loop builds it."""
    from django.db import transaction

    from scheduling.loop import _read
    from scheduling.policy import plan
    from scheduling.snapshot import build_world

    with transaction.atomic():  # rolled back: reading the simulated cluster moves it on
        reading = _read(cluster)
        world = build_world(now=clock(), nodes=reading.nodes, outside=reading.outside, statuses=reading.statuses,
                            claims=reading.claims)  # fmt: skip
        transaction.set_rollback(True)
    figures = []
    for with_eta in (False, True):
        times = []
        for _ in range(3):
            cpu = time.process_time()
            plan(world.snapshot, with_eta=with_eta)
            times.append(time.process_time() - cpu)
        figures.append(statistics.median(times))
    print(f"  plan of that snapshot ({len(world.snapshot.pending):,} pending, {len(world.snapshot.running):,} running): "
          f"{figures[0]:.3f} s CPU without estimated starts, {figures[1]:.3f} s with\n")  # fmt: skip


def report(name: str, runs: list[dict], clock: Clock) -> None:
    def median(key):
        return statistics.median(r[key] for r in runs)

    result = runs[-1]["result"]
    said = getattr(result, "summary", "")
    print(f"{name}: {len(runs)} run(s), median {median('cpu'):.3f} s CPU, {median('wall'):.3f} s wall, "
          f"{median('queries'):.0f} queries, {median('rows'):.0f} rows written (max {max(r['rows'] for r in runs)})")  # fmt: skip
    print(f"  last: {said}")
    tables = runs[-1]["tables"]
    if tables:
        print("  rows written by the last run: " + ", ".join(f"{k} {v}" for k, v in sorted(tables.items()) if v))
    spent = runs[-1]["phases"]
    if any(spent.get(name) for name, *_ in PHASES):
        record_waits = spent.get("record waits", [0.0, 0.0, 0])
        parts = []
        for phase, *_ in PHASES:
            if phase not in spent:
                continue
            cpu, wall, queries = spent[phase]
            if phase == "commit":  # its own share, the waits apart
                cpu, wall, queries = cpu - record_waits[0], wall - record_waits[1], queries - record_waits[2]
            parts.append(f"{phase} {cpu:.3f}/{wall:.3f} s {queries}q")
        print("  phases of the last run (CPU/wall, queries): " + "; ".join(parts))
    print(f"  decisions so far: {decisions_digest(clock.start)}")
    print()


def decisions_digest(start: datetime) -> str:
    """Returns a digest of what the loop and the simulated cluster decided so far: each job's state and
    placement, and each simulated job's nodes, start, end, outcome and suspension (times as seconds from
    the seeded moment `start`, so that runs on other days compare). Not timed: it is printed after a case."""
    import hashlib

    from jobs.models import Job
    from scheduling.models import SimJob

    def since(at: datetime | None) -> float | None:
        return None if at is None else round((at - start).total_seconds(), 6)

    digest = hashlib.sha256()
    for row in Job.objects.order_by("pk").values_list("pk", "state", "placement"):
        digest.update(repr(row).encode())
    sims = SimJob.objects.order_by("job_id").values_list("job_id", "nodes", "started_at", "finished_at", "suspended",
                                                          "succeeded")  # fmt: skip
    for job_id, nodes, started, finished, suspended, succeeded in sims:
        digest.update(repr((job_id, nodes, since(started), since(finished), suspended, succeeded)).encode())
    return digest.hexdigest()[:16]


def profile(name: str, call) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    call()
    profiler.disable()
    print(f"--- {name}: 25 costliest calls (cumulative)")
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)


if __name__ == "__main__":
    main()
