"""Server time of the pages at scale: 100 teams, 500 nodes, 10,000 jobs of which 3,000 wait.

Seeds a scratch PostgreSQL database (created, then dropped), then renders the
dashboard, each of its polled parts (tiles, team bars, node map, queue) both
rendered and answered 304 (the poll already holds that version), a job page
and a team page with the Django test client as a staff user, and the API's
job list as staff and as a person in three teams, and prints the median and
p95 time, the query count and the size of each. Target: p95 under 50 ms for
every polled request. `--jobs` sets how many jobs there are in all (the ones
past the running and waiting ones have ended), to see how lists grow with history.

    .venv/bin/python -m bench.pages_bench [--runs 40] [--jobs 10000]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from contextlib import contextmanager, nullcontext
from datetime import timedelta

# Gangway's modules are imported inside the functions that use them: this script sets up
# Django itself, on a database it picks at run time, before any of them may load.

PG = "postgres://postgres@127.0.0.1:5432"
DB = f"gangway_pages_bench_{os.getpid()}"
TEAMS, NODES, GPUS_PER_NODE, JOBS, WAITING = 100, 500, 8, 10_000, 3_000
TARGET_MS = 50
HX = {"HTTP_HX_REQUEST": "true"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="Timed requests per page (default 40).")
    parser.add_argument("--jobs", type=int, default=JOBS,
                        help=f"Jobs in all, at least {WAITING + NODES * GPUS_PER_NODE // 2:,} (default {JOBS:,}).")
    args = parser.parse_args()
    if args.jobs < WAITING + NODES * GPUS_PER_NODE // 2:
        parser.error(f"--jobs must be at least {WAITING + NODES * GPUS_PER_NODE // 2:,}: the waiting and running jobs.")
    runs, jobs = args.runs, args.jobs
    os.environ["DATABASE_URL"] = f"{PG}/{DB}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.test_settings")
    import django

    django.setup()
    from django.conf import settings
    from django.db import connection

    settings.ALLOWED_HOSTS = ["testserver"]
    create_database(DB)
    try:
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        started = time.monotonic()
        ids = seed(jobs)
        print(f"Seeded {TEAMS} teams, {NODES} nodes, {jobs:,} jobs ({WAITING:,} waiting) "
              f"in {time.monotonic() - started:.1f} s.\n")  # fmt: skip
        measure(ids, runs)
    finally:
        connection.close()
        drop_database(DB)


def _admin_connection():
    import psycopg

    return psycopg.connect(f"{PG}/postgres", autocommit=True)


def create_database(name: str) -> None:
    """A new empty scratch database `name` (one left by a run that was killed is dropped first)."""
    with _admin_connection() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')


def drop_database(name: str) -> None:
    """Drops scratch database `name`, connections and all."""
    with _admin_connection() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def seed(count: int) -> dict:
    """The world, written with bulk inserts; returns the ids the pages are measured on."""
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from jobs.models import Job, JobEvent
    from scheduling.models import ClusterNode, Cycle, UsageSample
    from tenants.models import Membership, PriorityTier, Quota, Team

    rng, now = random.Random(7), timezone.now()
    tiers = [PriorityTier.objects.create(name=name, value=value) for name, value in
             (("production", 1000), ("standard", 100), ("experiment", 10))]  # fmt: skip
    teams = Team.objects.bulk_create(Team(slug=f"team-{i:03d}", name=f"Team {i}", default_tier=tiers[1]) for i in range(TEAMS))
    for team in teams:
        team.tiers.set(tiers)
    capacity = NODES * GPUS_PER_NODE
    Quota.objects.bulk_create(Quota(team=team, resource="gpu", nominal=capacity // TEAMS, borrowing_limit=capacity // TEAMS,
                                    max_per_replica=8) for team in teams)  # fmt: skip
    ClusterNode.objects.bulk_create(ClusterNode(name=f"node-{i:03d}", position=i, gpu=GPUS_PER_NODE, cpu=64000,
                                                memory=512 * 1024**3, seen_at=now) for i in range(NODES))  # fmt: skip
    User = get_user_model()
    staff = User.objects.create_user("bench-staff", password="x", is_staff=True)
    owner = User.objects.create_user("bench-owner", password="x")
    Membership.objects.create(user=owner, team=teams[0], role=Membership.Role.LEAD)
    Membership.objects.bulk_create(Membership(user=owner, team=team, role=Membership.Role.MEMBER) for team in teams[1:3])

    running = capacity // 2  # jobs of 2 GPUs (one replica) fill the cluster
    jobs, node_index = [], 0
    for index in range(count):
        team = teams[index % TEAMS]
        if index < WAITING:
            state, extra = Job.State.QUEUED, {"position": index + 1, "team_position": index // TEAMS + 1,
                                              "reason": f"Waiting for quota: needs 2 GPUs; team {team.slug} uses 40 of 40 nominal.",
                                              "reason_code": "quota", "eta": now + timedelta(minutes=index % 600)}  # fmt: skip
        elif index < WAITING + running:
            state, extra = Job.State.RUNNING, {"placement": [f"node-{node_index // 4:03d}"], "started_at": now}
            node_index += 1
        else:
            state, extra = rng.choice([Job.State.SUCCEEDED, Job.State.FAILED, Job.State.CANCELLED]), {"finished_at": now}
        jobs.append(Job(team=team, owner=owner if team is teams[0] else staff, name=f"job-{index}", image="busybox",
                        command=["python", "train.py"], replicas=[{"role": "Worker", "count": 1, "gpu": 2, "cpu": 0, "memory": 0}],
                        gpu_total=2, tier=tiers[index % 3], state=state, queued_at=now - timedelta(seconds=count - index),
                        **extra))  # fmt: skip
    jobs = Job.objects.bulk_create(jobs, batch_size=2000)
    JobEvent.objects.bulk_create((JobEvent(job=job, kind=kind, message=f"{kind} event of {job.name}.")
                                  for job in jobs for kind in ("submitted", "waiting")), batch_size=5000)  # fmt: skip
    UsageSample.objects.bulk_create((UsageSample(team=team, at=now - timedelta(minutes=m), gpu_used=rng.randint(0, 80),
                                                 gpu_nominal=40) for team in teams for m in range(0, 1440, 1)),
                                    batch_size=10_000)  # fmt: skip
    Cycle.objects.create(started_at=now, duration=0.5, waiting=WAITING)
    from django.db import connection

    with connection.cursor() as cursor:  # what autovacuum does after a bulk load: the planner sees 10,000 jobs, not 0
        cursor.execute("ANALYZE")
    return {"staff": staff, "owner": owner, "job": jobs[0].pk, "team": teams[0].slug}


def measure(ids: dict, runs: int) -> None:
    from django.test import Client

    client = Client()
    client.force_login(ids["staff"])
    # (name, path, headers, send back the last ETag as a polling page does)
    cases = [("dashboard", "/", {}, False), ("dashboard live block", "/", HX, False)]
    for part in ("tiles", "teams", "nodes", "queue"):
        cases += [(f"poll {part}", f"/?part={part}", HX, False), (f"poll {part}, unchanged", f"/?part={part}", HX, True)]
    # Unchanged polls while another connection holds a write transaction open (a reconcile pass, a
    # submission): an ETag read meanwhile is remembered unsettled until that write ends (portal.live).
    cases += [("poll nodes, write open", "/?part=nodes", HX, True), ("poll queue, write open", "/?part=queue", HX, True)]
    job = f"/jobs/{ids['job']}/"
    cases += [("job page", job, {}, False), ("poll job, unchanged", job, HX, True),
              ("team page", f"/teams/{ids['team']}/", {}, False)]  # fmt: skip
    print(f"{'page':<26}{'median ms':>11}{'p95 ms':>9}{'queries':>9}{'KiB':>8}   target p95 < {TARGET_MS} ms for polls")
    for name, path, headers, conditional in cases:
        with _write_open() if name.endswith("write open") else nullcontext():
            _measure(client, name, path, headers, conditional, runs)
    _measure(client, "API jobs, staff", "/api/v1/jobs/", {}, False, runs)
    person = Client()
    person.force_login(ids["owner"])  # a member of three teams, listing without ?team=
    _measure(person, "API jobs, 3 teams", "/api/v1/jobs/", {}, False, runs)


@contextmanager
def _write_open():
    """A transaction of another connection that has written (it holds a transaction id), open for the block.
    The ETags remembered before it began are forgotten: they are settled, and the part must be read while it
    is open."""
    import psycopg
    from django.core.cache import cache

    with psycopg.connect(f"{PG}/{DB}") as other:
        other.execute("SELECT pg_current_xact_id()")
        cache.clear()
        yield
        other.rollback()


def _measure(client, name: str, path: str, headers: dict, conditional: bool, runs: int) -> None:
    """Prints the median and p95 time, queries and size of `runs` requests of `path`."""
    from django.db import connection, reset_queries
    from django.test.utils import CaptureQueriesContext

    held = {}
    for _ in range(3):  # warm caches: templates, connections, the remembered ETags
        held = {"HTTP_IF_NONE_MATCH": client.get(path, **headers, **held).get("ETag", "")} if conditional else {}
    times, fresh = [], 0
    for _ in range(runs):
        reset_queries()
        start = time.perf_counter()
        response = client.get(path, **headers, **held)
        times.append((time.perf_counter() - start) * 1000)
        assert response.status_code in (200, 304), (path, response.status_code)
        if conditional and response.status_code == 200:  # the minute turned: relative times moved on
            fresh += 1
            held = {"HTTP_IF_NONE_MATCH": response["ETag"]}
    with CaptureQueriesContext(connection) as queries:
        response = client.get(path, **headers, **held)
    times.sort()
    p95 = times[min(len(times) - 1, int(len(times) * 0.95))]
    verdict = ("ok" if p95 < TARGET_MS else "SLOW") if headers.get("HTTP_HX_REQUEST") else ""
    note = f" ({fresh} of {runs} answered 200)" if fresh else ""
    print(f"{name:<26}{statistics.median(times):>11.1f}{p95:>9.1f}{len(queries):>9}{len(response.content) / 1024:>8.0f}   {verdict}{note}")


if __name__ == "__main__":
    main()
