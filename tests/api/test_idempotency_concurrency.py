"""Ten CI retries racing with one Idempotency-Key create one job (real PostgreSQL, one connection per thread)."""

import threading

import pytest
from django.db import connection

from jobs.models import Job
from tests.api.conftest import bearer
from tests.conftest import spec_data

PARALLEL = 10


@pytest.mark.django_db(transaction=True)
def test_parallel_submissions_with_one_key_create_one_job(tokens):
    barrier = threading.Barrier(PARALLEL)
    answers: list[tuple[int, int]] = []
    lock = threading.Lock()

    def submit():
        try:
            client = bearer(tokens["maps_token"])
            barrier.wait()
            response = client.post("/api/v1/jobs/", spec_data(), format="json", HTTP_IDEMPOTENCY_KEY="pipeline-42")
            with lock:
                answers.append((response.status_code, response.json().get("id")))
        finally:
            connection.close()

    threads = [threading.Thread(target=submit) for _ in range(PARALLEL)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert len(answers) == PARALLEL
    assert sorted(status for status, _ in answers) == [200] * (PARALLEL - 1) + [201]
    assert len({job_id for _, job_id in answers}) == 1
    assert Job.objects.filter(idempotency_key="pipeline-42").count() == 1
