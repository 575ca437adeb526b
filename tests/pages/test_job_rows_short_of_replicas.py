"""A row of jobs (My jobs, a team's page) of a running job short of replicas (R13): its badge stays "running", and
its row says how many replicas run, as the job page does, and for how long, with since when and by when it is
evicted on hover; a plain "running" row again once every replica runs."""

from __future__ import annotations

import pytest
from django.utils import timezone
from django.utils.html import escape

from scheduling.cluster import simulated
from scheduling.cluster.simulated import SimulatedCluster
from scheduling.reconcile import reconcile
from tests.pages.test_job_page_short_of_replicas import short  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db


def _row(body: str, job) -> str:
    """The row of `job` in a table of jobs."""
    start = body.index(f'href="/jobs/{job.pk}/"')
    return body[body.rindex("<tr", 0, start):body.index("</tr>", start)]


@pytest.mark.parametrize("page", ["/jobs/", "/teams/maps/"], ids=["My jobs", "its team's page"])
def test_a_running_job_short_of_a_replica_says_so_in_its_row(login, owner, short, page):  # noqa: F811
    row = _row(login(owner).get(page).content.decode(), short)

    assert '<span class="badge s-running">' in row
    assert "Only 1 of 2 replicas running, short for " in row
    since = timezone.localtime(short.short_since).strftime("%Y-%m-%d %H:%M:%S %Z")
    assert f'title="Short since {since}. {escape(short.reason)}"' in row
    assert "evicted and requeued if it has not started by " in short.reason  # by when, on hover


def test_its_live_rows_say_so_too(login, owner, short, htmx):  # noqa: F811
    row = _row(login(owner).get("/jobs/", **htmx).content.decode(), short)
    assert "Only 1 of 2 replicas running, short for " in row


def test_its_row_reads_running_again_once_every_replica_runs(login, owner, short):  # noqa: F811
    simulated.cordon("node-01", schedulable=True)  # room for worker-0 again
    reconcile(cluster=SimulatedCluster(failure_rate=0))

    row = _row(login(owner).get("/jobs/").content.decode(), short)

    assert "replicas running" not in row and "short-note" not in row
    assert ">running " in row
