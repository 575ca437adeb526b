"""/metrics reads its counters and the cycle histogram from indexes, never by scanning every event or
cycle row: Prometheus scrapes it every 15 to 60 s while the events grow with every job ever run (about
ten per job) and a week of cycles (one each 5 s, with its plan's figures) is kept. Checked on the
very SQL a scrape sends, as PostgreSQL plans it once autovacuum has been through (VACUUM ANALYZE:
the visibility map lets an index alone answer a count)."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs.models import Job
from scheduling.models import Cycle
from tenants.models import PriorityTier
from tests.conftest import make_team, make_user

# Committed rows, so that VACUUM (which no transaction may hold) can set the visibility map.
pytestmark = pytest.mark.django_db(transaction=True)

JOBS, EVENTS_PER_JOB, CYCLES = 10_000, 10, 20_000


@pytest.fixture
def history():
    """10,000 ended jobs of two teams with ten events each (submitted, waiting..., admitted, running,
    succeeded; one in 50 preempted on the way, one in 100 rejected) and 20,000 cycles with their
    plans' figures, then VACUUM ANALYZE as autovacuum would."""
    tiers = {name: PriorityTier.objects.create(name=name, value=value) for name, value in
             (("production", 1000), ("standard", 100), ("experiment", 10))}  # fmt: skip
    teams = [make_team(slug, tiers, gpu=8) for slug in ("maps", "vision")]
    owner = make_user("owner", teams=teams)
    first = Job.objects.create(team=teams[0], owner=owner, name="first", image="busybox", gpu_total=1,
                               replicas=[{"role": "Worker", "count": 1, "gpu": 1}], tier=tiers["standard"],
                               queued_at=timezone.now(), state=Job.State.SUCCEEDED)  # fmt: skip
    made = ("id", "name", "team_id")
    kept = ", ".join(f'"{field.column}"' for field in Job._meta.concrete_fields if field.column not in made)
    usage = json.dumps([{"team": slug, "nominal": 8, "used": 4, "within": 4, "borrowed": 0, "lent": 0, "idle": 4,
                         "waiting": 2, "borrowed_from": {}} for slug in ("maps", "vision")])  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(f"""
            INSERT INTO jobs_job ({kept}, name, team_id)
            SELECT {kept}, 'job-' || n, CASE WHEN n %% 3 = 0 THEN %(vision)s ELSE %(maps)s END
            FROM jobs_job, generate_series(1, %(jobs)s) AS n WHERE id = %(first)s
        """, {"jobs": JOBS, "first": first.pk, "maps": teams[0].pk, "vision": teams[1].pk})  # fmt: skip
        cursor.execute("""
            INSERT INTO jobs_jobevent (job_id, at, kind, from_state, to_state, message, code)
            SELECT id, now(), CASE WHEN i = 1 THEN 'submitted' WHEN i = %(last)s THEN 'succeeded'
                                   WHEN i = %(last)s - 1 THEN 'running' WHEN i = %(last)s - 2 THEN 'admitted'
                                   WHEN i = 2 AND id %% 50 = 0 THEN 'preempted'
                                   WHEN i = 2 AND id %% 100 = 1 THEN 'rejected' ELSE 'waiting' END,
                   '', '', 'Waiting for quota: needs 8 GPUs; 3 free in team maps.', 'quota'
            FROM jobs_job, generate_series(1, %(last)s) AS i
        """, {"last": EVENTS_PER_JOB})  # fmt: skip
        cursor.execute("""
            INSERT INTO scheduling_cycle (started_at, duration, admitted, preempted, rejected, waiting,
                                          cluster_reachable, failed, error, gpu_usage, changed)
            SELECT now() - n * interval '5 seconds', 0.05 + (n %% 40) / 10.0, 0, 0, 0, 3, true, n %% 997 = 0, '',
                   %(usage)s::jsonb, n %% 50 = 0
            FROM generate_series(1, %(cycles)s) AS n
        """, {"usage": usage, "cycles": CYCLES})  # fmt: skip
        cursor.execute("VACUUM ANALYZE jobs_job, jobs_jobevent, scheduling_cycle")
    assert Cycle.objects.count() == CYCLES


def plan_of(sql: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql)
        return "\n".join(row[0] for row in cursor.fetchall())


def scrape_plans(client) -> list[tuple[str, str]]:
    """(SQL, its plan) of each SELECT a scrape of /metrics sends."""
    with CaptureQueriesContext(connection) as queries:
        response = client.get("/metrics")
    assert response.status_code == 200
    # The captured SQL has its parameters inlined: EXPLAIN it as it was sent.
    return [(query["sql"], plan_of(query["sql"])) for query in queries if query["sql"].startswith("SELECT")]


def test_a_scrape_counts_decisions_from_their_index_without_reading_the_events(history, client):
    plans = [(sql, plan) for sql, plan in scrape_plans(client) if '"jobs_jobevent"' in sql]
    assert len(plans) == 3, [sql[:200] for sql, _ in plans]  # admissions, preemptions, rejections
    for sql, plan in plans:
        assert "Index Only Scan using jobevent_decisions on jobs_jobevent" in plan, f"{sql}\n{plan}"
        assert "Seq Scan on jobs_jobevent" not in plan, f"{sql}\n{plan}"


def test_a_scrape_reads_the_cycle_histogram_and_failures_from_their_indexes(history, client):
    plans = [(sql, plan) for sql, plan in scrape_plans(client) if '"scheduling_cycle"' in sql]
    assert plans
    for sql, plan in plans:
        assert "Seq Scan on scheduling_cycle" not in plan, f"{sql}\n{plan}"
    shown = "\n".join(plan for _, plan in plans)
    assert "Index Only Scan using cycle_durations on scheduling_cycle" in shown, shown
    assert "Index Only Scan using cycle_failures on scheduling_cycle" in shown, shown


def test_a_scrape_counts_jobs_by_state_without_reading_every_job(history, client):
    plans = [(sql, plan) for sql, plan in scrape_plans(client) if '"jobs_job"' in sql and '"jobs_jobevent"' not in sql]
    assert plans
    for sql, plan in plans:
        assert "Seq Scan on jobs_job" not in plan, f"{sql}\n{plan}"
