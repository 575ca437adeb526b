"""A failed job's page in Chromium: why it failed, the failing replica's traceback, a download; an outsider sees none of it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from playwright.sync_api import expect

from jobs.models import Job
from scheduling.cluster.simulated import SimulatedCluster
from scheduling.models import SimJob
from scheduling.reconcile import reconcile
from tests.browser.conftest import DESKTOP, PHONE, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def failed_job(submit, cycle):
    job = submit(name="probe", replicas=[{"role": "Worker", "count": 2, "gpu": 1, "memory": "4Gi"}],
                 volumes=[{"claim": "datasets", "path": "/data", "read_only": True}], shm="2Gi",
                 simulate={"duration": 30, "fail": True})  # fmt: skip
    from scheduling.models import SimClaim

    SimClaim.objects.create(namespace="maps", name="datasets")
    cycle()
    sim = SimJob.objects.get(job_id=job.pk)
    SimJob.objects.filter(pk=sim.pk).update(started_at=sim.started_at - timedelta(seconds=60))
    reconcile(cluster=SimulatedCluster())
    job.refresh_from_db()
    assert job.state == Job.State.FAILED
    return job


def test_the_failure_page_shows_the_failing_replica_its_lines_and_a_download(log_in, owner, failed_job, shot):
    page = log_in(owner, f"/jobs/{failed_job.pk}/")
    expect(page.locator(".ended.bad")).to_contain_text("exited with code 1 (Error)")
    expect(page.locator(".ended.bad")).not_to_contain_text("Submitted by")
    expect(page.locator("#failing-replica")).to_contain_text("failed with exit code 1 (Error)")
    failing = page.locator(".replica-log[open]")
    expect(failing).to_have_count(1)
    expect(failing.locator("pre")).to_contain_text("Traceback (most recent call last):")
    expect(page.locator(".facts")).to_contain_text("claim datasets at /data, read-only")
    shot(page, "job-failed-logs")
    with page.expect_download() as download:
        page.locator(".replica-log-item").filter(has=failing).locator("a[download]").click()  # beside its summary, not in it
    assert download.value.suggested_filename.startswith(f"probe-{failed_job.pk}-worker-")


def test_an_outsider_gets_no_page_no_logs_and_no_download(log_in, outsider, failed_job):
    page = log_in(outsider, "/")
    for path in (f"/jobs/{failed_job.pk}/", f"/jobs/{failed_job.pk}/logs/", f"/jobs/{failed_job.pk}/logs/worker-0.log"):
        assert page.goto(path).status == 404


@pytest.mark.parametrize("viewport", ["laptop", "phone"])
def test_the_logs_card_stands_apart_from_the_replicas_card(page_at, owner, failed_job, viewport):
    page = sign_in(page_at(DESKTOP if viewport == "laptop" else PHONE), owner, f"/jobs/{failed_job.pk}/")
    expect(page.locator("#job-logs .replica-log").first).to_be_visible()
    above = page.locator("section[aria-labelledby=replicas-h]").bounding_box()
    logs = page.locator("#job-logs").bounding_box()
    gap = logs["y"] - (above["y"] + above["height"])
    assert gap >= 12, f"the logs card is {gap}px below the replicas card: their borders touch"
