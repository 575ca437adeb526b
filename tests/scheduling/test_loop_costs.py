"""What a cycle and a reconcile pass cost the database on a long queue: bounds that do not grow with it.

`bench/loop_bench.py` measures the loop at 10,000 jobs; these keep what it found fixed.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.models.query import QuerySet
from django.test.utils import CaptureQueriesContext

from jobs.models import Job
from scheduling.cluster.base import Phase
from scheduling.waits import WAIT_FIELDS
from scheduling.models import SimJob
from scheduling.reconcile import reconcile
from scheduling.snapshot import to_cluster_job

WAITING = 12
EIGHT = [{"role": "Worker", "count": 1, "gpu": 8}]
PLACES = ("position", "team_position")  # written with every waiting row that is written


def inserts_of_events(queries) -> list[str]:
    return [q["sql"] for q in queries if q["sql"].startswith('INSERT INTO "jobs_jobevent"')]


@pytest.fixture
def full(submit, cycle, clock):
    """Both nodes busy with an hour's job each, WAITING jobs of 8 GPUs queued behind them; returns those."""
    for n in range(2):
        submit(name=f"run-{n}", replicas=EIGHT, max_runtime=3600, simulate={"duration": 3600})
    for _ in range(2):  # admitted, then running
        cycle()
        clock.tick(5)
    return [submit(name=f"wait-{n}", replicas=EIGHT, max_runtime=600) for n in range(WAITING)]


def test_the_reasons_of_many_new_waits_are_written_in_one_insert(full, cycle):
    """Each waiting job given a new reason was one INSERT of its event: the first cycle over a queue of
    3,000 made 3,000 of them. They are one insert however many wait."""
    with CaptureQueriesContext(connection) as queries:
        result = cycle()
    assert result.waiting == WAITING
    assert len(inserts_of_events(queries.captured_queries)) == 1
    assert all(job.events.filter(kind="waiting").count() == 1 for job in full)


def test_a_job_queued_ahead_of_the_others_writes_only_the_figures_that_moved(full, submit, cycle, clock, monkeypatch):
    """A submission ahead of every waiting job moves each of them a place: their rows were written with
    all six figures, the unchanged reason code and reservation among them, which cost a cycle over
    3,000 jobs seconds of building SQL. Only their places and the figures that moved are written."""
    cycle()
    clock.tick(5)
    ahead = submit(name="urgent", replicas=EIGHT, max_runtime=600, tier="production")
    before = {row["pk"]: row for row in Job.objects.filter(pk__in=[job.pk for job in full]).values("pk", *WAIT_FIELDS)}
    written: list[tuple[list[int], list[str]]] = []
    bulk_update = QuerySet.bulk_update

    def spy(self, objs, fields, *args, **kwargs):
        objs = list(objs)
        written.append(([obj.pk for obj in objs], list(fields)))
        return bulk_update(self, objs, fields, *args, **kwargs)

    monkeypatch.setattr(QuerySet, "bulk_update", spy)
    result = cycle()
    assert result.written == WAITING + 1
    after = {row["pk"]: row for row in Job.objects.filter(pk__in=before).values("pk", *WAIT_FIELDS)}
    rows = {pk for pks, _ in written for pk in pks} - {ahead.pk}
    assert rows == set(before), "every waiting job moved a place"
    others = [(pk, name) for pks, fields in written for pk in pks if pk != ahead.pk
              for name in fields if name not in PLACES]  # fmt: skip
    assert all(before[pk][name] != after[pk][name] for pk, name in others), "a figure written that did not move"
    assert [after[job.pk]["position"] for job in full] == list(range(2, WAITING + 2))
    assert Job.objects.get(pk=ahead.pk).position == 1


def simjob_reads(queries) -> list[str]:
    return [q["sql"] for q in queries.captured_queries
            if q["sql"].startswith("SELECT") and 'FROM "scheduling_simjob"' in q["sql"]]


def test_a_create_on_the_simulated_cluster_reads_the_running_jobs_once(full, cluster):
    """Each create (and suspend) of a cycle locked every unfinished simulated job reading its whole row,
    manifest included, then read them all again to start what fits: with 2,000 running, a cycle that
    admitted 17 jobs and preempted 8 spent 8 s there. The lock reads ids; the rows are read once."""
    job = Job.objects.select_related("team", "tier").get(pk=full[0].pk)
    with CaptureQueriesContext(connection) as queries:
        cluster.create_job(to_cluster_job(job))
    reads = [sql for sql in simjob_reads(queries) if '"scheduling_simjob"."nodes"' in sql and '"finished_at" IS NULL' in sql]
    assert len(reads) == 1, reads
    assert SimJob.objects.filter(job_id=job.pk).exists()


def test_the_simulated_cluster_reads_no_manifest_to_create_suspend_resume_or_list_jobs(full, cluster, clock):
    """Each create and suspend places or counts every unfinished job's replicas, and read them from their
    stored manifests: with 2,000 running, a minute of jobs ending cost the next cycle 20 s of CPU parsing
    them. What the replicas need is kept on each row; a pass reads those columns, never a manifest."""
    waiting = Job.objects.select_related("team", "tier").get(pk=full[0].pk)
    running = Job.objects.select_related("team", "tier").filter(state="running").first()
    with CaptureQueriesContext(connection) as queries:
        cluster.create_job(to_cluster_job(waiting))
        cluster.suspend_job(to_cluster_job(running))
        clock.tick(5)
        cluster.create_job(to_cluster_job(running))  # resumed
        statuses = cluster.job_statuses()
    reads = simjob_reads(queries)
    assert reads and not [sql for sql in reads if '"scheduling_simjob"."manifest"' in sql]
    # One pass (`advance`) per call over every unfinished job, reading a few columns of each ...
    passes = [sql for sql in reads if '"finished_at" IS NULL' in sql and '"scheduling_simjob"."progress"' in sql
              and '"scheduling_simjob"."hint"' not in sql]  # fmt: skip
    assert len(passes) == 4, reads
    # ... and whole rows by id only (the jobs a call changes), but for the list of unfinished jobs itself.
    whole = [sql for sql in reads if '"scheduling_simjob"."hint"' in sql and '"finished_at" IS NULL' in sql]
    assert len(whole) == 1, whole
    by_id = {status.job_id: status for status in statuses}
    # The suspend freed a node for the waiting job; the resumed one waits for room, as on Volcano.
    assert by_id[waiting.pk].running_pods == 1 and by_id[waiting.pk].pods[0].gpu == 8
    assert by_id[running.pk].phase is Phase.CREATED


def test_reconcile_reads_the_ended_jobs_the_cluster_keeps_narrowly(submit, cycle, cluster, clock):
    """The cluster keeps an ended job's object for ENDED_JOB_RETENTION (a week of them on a busy
    cluster), and each pass read every such job whole, command, environment and all. It reads what
    names its object and when it ended."""
    ended = [submit(name=f"done-{n}", simulate={"duration": 60}) for n in range(3)]
    for _ in range(2):
        cycle()
    clock.tick(61)
    cycle()
    assert {job.state for job in Job.objects.filter(pk__in=[job.pk for job in ended])} == {"succeeded"}
    with CaptureQueriesContext(connection) as queries:
        reconcile(cluster=cluster, now=clock())
    reads = [q["sql"] for q in queries.captured_queries
             if q["sql"].startswith('SELECT') and 'FROM "jobs_job"' in q["sql"] and '"jobs_job"."id" IN (' in q["sql"]]
    assert len(reads) == 1, reads
    assert '"jobs_job"."finished_at"' in reads[0]
    assert not any(f'"jobs_job"."{column}"' in reads[0] for column in ("command", "env", "replicas", "reason"))
