"""A database that takes no writes for a while (a failover, a standby promoted late): reads still answer, and a
write is a 503 to retry."""

from __future__ import annotations

import pytest
from django.db import connection

from jobs.models import Job
from portal.api_errors import DATABASE_RETRY_AFTER
from tenants.models import ApiToken
from tests.api.conftest import bearer
from tests.conftest import spec_data

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_token_still_reads_the_jobs_while_the_database_is_read_only(tokens, caplog):
    with connection.cursor() as cursor:
        cursor.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
    try:
        response = bearer(tokens["maps_token"]).get("/api/v1/jobs/")
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE")

    assert response.status_code == 200, response.content
    assert "its last use could not be written: the database is read-only" in caplog.text
    assert ApiToken.objects.get(name="ci-maps").last_used_at is None  # written at the next use instead


def test_a_submission_while_the_database_is_read_only_is_a_503_to_retry(tokens, nodes):
    # What a CI submission meets during a failover: the CLI retries a 503 with the same idempotency key.
    client = bearer(tokens["maps_token"])
    with connection.cursor() as cursor:
        cursor.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
    try:
        response = client.post("/api/v1/jobs/", spec_data(name="ro"), format="json", HTTP_IDEMPOTENCY_KEY="ci-1")
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE")

    assert response.status_code == 503, response.content
    assert response["Retry-After"] == str(DATABASE_RETRY_AFTER)
    assert response.json() == {
        "detail": f"The database is taking no writes for the moment (a failover): retry in {DATABASE_RETRY_AFTER} s."}
    assert not Job.objects.exists()
    again = client.post("/api/v1/jobs/", spec_data(name="ro"), format="json", HTTP_IDEMPOTENCY_KEY="ci-1")
    assert again.status_code == 201 and Job.objects.get().name == "ro"
