"""A database that takes no writes for a while (a failover, a standby promoted late): reads still answer."""

from __future__ import annotations

import pytest
from django.db import connection

from tenants.models import ApiToken
from tests.api.conftest import bearer

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
