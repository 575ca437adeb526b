"""The job lists read a page of jobs newest first from an index, never by sorting every job of a
team or a person: the team page's polled list, My jobs and the API list, as PostgreSQL plans the
very SQL each one sends, on enough jobs (and fresh statistics) for the plan to be the one it
picks on a busy cluster."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from jobs.models import Job
from tenants.models import PriorityTier
from tenants.tokens import token_create
from tests.conftest import make_team, make_user

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}
NEWEST_FIRST = 'ORDER BY "jobs_job"."submitted_at" DESC, "jobs_job"."id" DESC'


@pytest.fixture(scope="module")
def history(django_db_setup, django_db_blocker):
    """30,000 jobs of nine teams, submitted in turns one a minute over the past weeks, most ended,
    some waiting or running: 12,000 of `owner` and 2,000 of `member` in maps, 2,000 of one person
    in each other team, but none of team-6's in the last 10 days (a quiet team); then ANALYZE, as
    autovacuum does after such a load. Written once for the module, in a transaction rolled back
    after it. Returns who reads what."""
    with django_db_blocker.unblock(), transaction.atomic():
        tiers = {name: PriorityTier.objects.create(name=name, value=value) for name, value in
                 (("production", 1000), ("standard", 100), ("experiment", 10))}  # fmt: skip
        teams = [make_team(slug, tiers, gpu=8) for slug in ("maps", "vision", *(f"team-{i}" for i in range(7)))]
        owner, member = make_user("owner", teams=teams[:1]), make_user("member", teams=teams[:1])
        people = [(owner, 6), (member, 1), *((make_user(f"{team.slug}-owner", teams=[team]), 1) for team in teams[1:])]
        now = timezone.now()
        firsts = Job.objects.bulk_create(
            Job(team=person.teams.get(), owner=person, name="first", image="busybox", gpu_total=1,
                replicas=[{"role": "Worker", "count": 1, "gpu": 1}], tier=tiers["standard"], queued_at=now)
            for person, shares in people for _ in range(shares)
        )  # fmt: skip
        _copy(firsts, 1999, now)
        Job.objects.filter(team=teams[-1], submitted_at__gt=now - timedelta(days=10)).delete()
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE jobs_job, tenants_membership, tenants_team, auth_user")
        _, token = token_create(name="ci-vision", team=teams[1])
        yield {"owner": owner, "quiet": people[-1][0], "vision_token": token,
               "two_teams": make_user("two-teams", teams=teams[:2])}
        transaction.set_rollback(True)


def _copy(firsts: list[Job], copies: int, now) -> None:
    """`copies` more jobs like each of `firsts`, in turns, one a minute back from `now`, the oldest
    written first (one in 20 waiting, one running, one failed, the others succeeded): one INSERT,
    not 30,000 objects."""
    made = ("id", "name", "state", "submitted_at", "queued_at")
    kept = ", ".join(f'"{field.column}"' for field in Job._meta.concrete_fields if field.column not in made)
    with connection.cursor() as cursor:
        cursor.execute(f"""
            INSERT INTO jobs_job ({kept}, name, state, submitted_at, queued_at)
            SELECT {kept}, 'job-' || n,
                   CASE mod(n, 20) WHEN 0 THEN 'queued' WHEN 1 THEN 'running' WHEN 2 THEN 'failed' ELSE 'succeeded' END,
                   at, at
            FROM (SELECT *, row_number() OVER (ORDER BY id) AS turn FROM jobs_job WHERE id = ANY(%(ids)s)) AS first,
                 generate_series(1, %(copies)s) AS n,
                 LATERAL (SELECT %(now)s - (n * %(people)s + turn) * interval '1 minute' AS at) AS moment
            ORDER BY n DESC, turn DESC
        """, {"now": now, "people": len(firsts), "ids": [job.pk for job in firsts], "copies": copies})  # fmt: skip


def plan_of(sql: str) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql)
        return [row[0] for row in cursor.fetchall()]


def newest_first_read(client, path: str, **headers) -> str:
    """The SQL of the page of jobs, newest first, that a request of `path` reads."""
    with CaptureQueriesContext(connection) as queries:
        response = client.get(path, **headers)
    assert response.status_code == 200, response.content[:300]
    reads = [query["sql"] for query in queries if NEWEST_FIRST in query["sql"] and "LIMIT" in query["sql"]]
    assert len(reads) == 1, [query["sql"][:200] for query in queries]
    return reads[0]


# (what is read, who reads it, the path, headers, the index its page of jobs comes from)
READS = [
    ("a team page's polled list of its jobs", "owner", "/teams/maps/", HX, "job_team_newest"),
    ("its tenth page", "owner", "/teams/maps/?page=10", HX, "job_team_newest"),
    ("the polled list of a team quiet for ten days", "quiet", "/teams/team-6/", HX, "job_team_newest"),
    ("My jobs", "owner", "/jobs/?state=", HX, "job_owner_newest"),
    ("My jobs that ended", "owner", "/jobs/?state=ended", HX, "job_owner_newest"),
    ("the API list of a team's token", "vision_token", "/api/v1/jobs/", {}, "job_team_newest"),
    ("the API list of a person in one team", "owner", "/api/v1/jobs/", {}, "job_team_newest"),
    ("the API list of a person asking for one of their teams", "two_teams", "/api/v1/jobs/?team=vision", {},
     "job_team_newest"),
]


@pytest.mark.parametrize("read, who, path, headers, index", READS, ids=[read[0] for read in READS])
def test_a_job_list_reads_its_page_from_its_index_without_sorting(history, throttle_cache, read, who, path, headers,
                                                                  index):  # fmt: skip
    client = APIClient()
    if who.endswith("_token"):
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {history[who]}")
    else:
        client.force_login(history[who])
    plan = plan_of(newest_first_read(client, path, **headers))
    shown = "\n".join(plan)
    assert f"Index Scan using {index} on jobs_job" in shown, shown
    assert not any(re.match(r"\s*(->\s+)?(Incremental )?Sort\b", line) for line in plan), shown
    assert "Seq Scan on jobs_job" not in shown


def test_an_outsiders_count_of_a_teams_open_jobs_reads_only_its_open_jobs(history, throttle_cache):
    """An outsider's polled list of a team is its open jobs counted per tier: read from an index by
    the open states (the team's, or the queue's across teams: open jobs either way), never by reading
    every job the team ever ran and dropping the ended ones (14,000 here, for the 1,400 that are open)."""
    client = APIClient()
    client.force_login(history["quiet"])
    with CaptureQueriesContext(connection) as queries:
        response = client.get("/teams/maps/", **HX)
    assert response.status_code == 200, response.content[:300]
    counts = [query["sql"] for query in queries if '"waiting_gpus"' in query["sql"]]
    assert len(counts) == 1, [query["sql"][:200] for query in queries]
    shown = "\n".join(plan_of(counts[0]))
    open_states = r"\(state\)::text = ANY \('\{queued,admitted,running,preempting,cancelling\}'"
    assert re.search(r"Index Cond: .*" + open_states, shown), shown
    assert "<> ALL" not in shown and "Seq Scan on jobs_job" not in shown, shown


MERGED = [
    ("the API list of a person in two teams", "two_teams", "/api/v1/jobs/", 2),
    ("its second page", "two_teams", "/api/v1/jobs/?page=2", 2),
    ("staff's list of every job", "staff", "/api/v1/jobs/", 9),
]


@pytest.mark.parametrize("read, who, path, teams", MERGED, ids=[read[0] for read in MERGED])
def test_a_list_of_several_teams_merges_each_teams_page_from_its_index(history, throttle_cache, read, who, path,
                                                                       teams):  # fmt: skip
    """Each team's newest jobs come from its index (their times and ids alone), up to the page's end, and
    PostgreSQL merges them as they come: no sort of every job of the teams, however many they ran. The
    page's jobs are then read by id."""
    client = APIClient()
    client.force_login(history[who] if who in history else make_user("staff", staff=True))
    with CaptureQueriesContext(connection) as queries:
        response = client.get(path)
    assert response.status_code == 200, response.content[:300]
    reads = [query["sql"] for query in queries if "UNION ALL" in query["sql"]]
    assert len(reads) == 1, [query["sql"][:200] for query in queries]
    shown = "\n".join(plan_of(reads[0]))
    assert "Merge Append" in shown, shown
    assert len(re.findall(r"Index (Only )?Scan using job_team_newest on jobs_job", shown)) == teams, shown
    assert not re.search(r"^\s*(->\s+)?(Incremental )?Sort  \(", shown, re.MULTILINE), shown
    assert "Seq Scan on jobs_job" not in shown
