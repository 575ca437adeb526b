"""Submissions and cancels arriving at the same moment (real PostgreSQL, one connection per call): one job per
idempotency key even when no queue cap takes the team's lock, and one cancel recorded per job."""

from __future__ import annotations

import pytest

from jobs.models import Job
from jobs.services import job_cancel, job_submit
from jobs.spec import parse_spec
from tests.conftest import spec_data
from tests.together import run_together

pytestmark = pytest.mark.django_db(transaction=True)


def test_eight_submissions_with_one_key_and_no_queue_cap_make_one_job(settings, maps, owner):
    settings.MAX_QUEUED_PER_TEAM = 0  # no team lock: the unique key alone decides
    made = []

    def submit() -> None:
        made.append(job_submit(team=maps, spec=parse_spec(spec_data()), owner=owner, idempotency_key="pipeline-7"))

    assert run_together(*[submit] * 8, timeout=60) == []
    assert Job.objects.count() == 1
    assert sorted(created for _, created in made) == [False] * 7 + [True]
    assert {job.pk for job, _ in made} == {Job.objects.get().pk}


def test_three_cancels_of_each_of_five_jobs_at_once_cancel_each_once(maps, owner):
    jobs = [job_submit(team=maps, spec=parse_spec(spec_data(name=f"run-{i}")), owner=owner)[0] for i in range(5)]

    def cancel(job):
        return lambda: job_cancel(job=job, actor=owner)

    assert run_together(*[cancel(job) for job in jobs for _ in range(3)], timeout=60) == []
    for job in jobs:
        assert list(job.events.filter(kind__in=["cancel_requested", "cancelled"]).values_list("kind", flat=True)
                    .order_by("id")) == ["cancel_requested", "cancelled"]  # fmt: skip
