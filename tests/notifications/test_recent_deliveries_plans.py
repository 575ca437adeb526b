"""The notification settings page reads its latest deliveries from indexes, never by reading every delivery
and every job and sorting them: asked as one filter (the person's OR a led team's webhook, through the job's
team), PostgreSQL could use no index, and the page took 60-130 ms at 205,000 jobs and 50,000 deliveries.
Checked on the very SQL the page sends, as PostgreSQL plans it once autovacuum has been through."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs.models import Job
from notifications.models import Delivery
from tenants.models import Membership, PriorityTier
from tests.conftest import make_team, make_user

# Committed rows, so that VACUUM (which no transaction may hold) can set the visibility map.
pytestmark = pytest.mark.django_db(transaction=True)

JOBS, DELIVERIES = 40_000, 10_000


@pytest.fixture
def history():
    """40,000 jobs of three teams owned by 40 members, the latest 10,000 with a failure told: one in five to
    its team's webhook, the rest by e-mail to its owner, over 30 days; then VACUUM ANALYZE as autovacuum
    would. Returns the people who read the page: a member who leads nothing, the lead of maps, staff and
    the lead of a team with no jobs."""
    tiers = {name: PriorityTier.objects.create(name=name, value=value) for name, value in
             (("production", 1000), ("standard", 100), ("experiment", 10))}  # fmt: skip
    teams = [make_team(slug, tiers, gpu=8) for slug in ("maps", "vision", "research", "finance")]
    members = [make_user(f"member-{n}", teams=teams[:3]) for n in range(40)]
    lead = Membership.Role.LEAD
    people = {"member": members[0], "lead": make_user("lead", teams=teams[:1], role=lead),
              "staff": make_user("staff", staff=True),
              "lead of a team without jobs": make_user("finance-lead", teams=teams[3:], role=lead)}  # fmt: skip
    first = Job.objects.create(team=teams[0], owner=members[0], name="first", image="busybox", gpu_total=1,
                               replicas=[{"role": "Worker", "count": 1, "gpu": 1}], tier=tiers["standard"],
                               queued_at=timezone.now(), state=Job.State.FAILED)  # fmt: skip
    made = ("id", "name", "team_id", "owner_id")
    kept = ", ".join(f'"{field.column}"' for field in Job._meta.concrete_fields if field.column not in made)
    with connection.cursor() as cursor:
        cursor.execute(f"""
            INSERT INTO jobs_job ({kept}, name, team_id, owner_id)
            SELECT {kept}, 'job-' || n, (%(teams)s::bigint[])[1 + n %% 3], (%(owners)s::bigint[])[1 + n %% 40]
            FROM jobs_job, generate_series(1, %(jobs)s) AS n WHERE id = %(first)s
        """, {"jobs": JOBS, "first": first.pk, "teams": [team.pk for team in teams[:3]],
              "owners": [member.pk for member in members]})  # fmt: skip
        cursor.execute("""
            INSERT INTO jobs_jobevent (job_id, at, kind, from_state, to_state, message, code)
            SELECT id, now(), 'failed', 'running', 'failed', 'Failed: exit code 1.', ''
            FROM jobs_job ORDER BY id DESC LIMIT %(told)s
        """, {"told": DELIVERIES})  # fmt: skip
        cursor.execute("""
            INSERT INTO notifications_delivery (event_id, job_id, channel, target, user_id, state, attempts, error,
                                                created_at, sent_at, digest_size)
            SELECT e.id, e.job_id, CASE WHEN e.id %% 5 = 0 THEN 'webhook' ELSE 'email' END,
                   CASE WHEN e.id %% 5 = 0 THEN 'https://hooks.example.com/' || j.team_id
                        ELSE 'member-' || j.owner_id || '@example.com' END,
                   CASE WHEN e.id %% 5 = 0 THEN NULL ELSE j.owner_id END, 'sent', 1, '',
                   now() - (e.id %% 43200) * interval '1 minute', now() - (e.id %% 43200) * interval '1 minute', 1
            FROM jobs_jobevent e JOIN jobs_job j ON j.id = e.job_id
        """, {})  # fmt: skip
        cursor.execute("VACUUM ANALYZE jobs_job, jobs_jobevent, notifications_delivery, tenants_membership, "
                       "tenants_team")
    assert Delivery.objects.count() == DELIVERIES
    return people


def plan_of(sql: str) -> dict:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (FORMAT JSON) " + sql)
        plan = cursor.fetchone()[0]
    return (json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]


def nodes(plan: dict):
    yield plan
    for child in plan.get("Plans", ()):
        yield from nodes(child)


def page_plans(client, user) -> list[tuple[str, list[dict]]]:
    """(SQL, its plan's nodes) of each SELECT of deliveries the settings page sends for `user`."""
    client.force_login(user)
    with CaptureQueriesContext(connection) as queries:
        response = client.get("/notifications/")
    assert response.status_code == 200
    # The captured SQL has its parameters inlined: EXPLAIN it as it was sent.
    return [(query["sql"], list(nodes(plan_of(query["sql"])))) for query in queries
            if query["sql"].startswith("SELECT") and '"notifications_delivery"' in query["sql"]]  # fmt: skip


@pytest.mark.parametrize("persona", ["member", "lead", "staff", "lead of a team without jobs"])
def test_the_page_reads_the_latest_deliveries_from_indexes_without_sorting_them_all(history, client, persona):
    plans = page_plans(client, history[persona])
    assert len(plans) == 1, [sql[:300] for sql, _ in plans]
    [(sql, plan)] = plans
    shown = f"{sql}\n" + "\n".join(
        f"{node['Node Type']} {node.get('Relation Name', '')} {node.get('Index Name', '')} rows={node['Plan Rows']}"
        for node in plan
    )
    scanned = {node.get("Relation Name") for node in plan if node["Node Type"] == "Seq Scan"}
    assert not scanned & {"notifications_delivery", "jobs_job", "jobs_jobevent"}, shown
    # Sorted: at most the newest 20 of each half, never every delivery of the person or the teams.
    assert all(node["Plan Rows"] <= 40 for node in plan if node["Node Type"] == "Sort"), shown
    indexes = {node.get("Index Name") for node in plan}
    assert "delivery_to_person" in indexes, shown
    if persona in ("lead", "staff"):
        assert "delivery_by_channel" in indexes, shown
