"""Errors of the server under /api/: a database out of service for a while is a 503 with Retry-After, which
clients retry (the CLI with the same idempotency key); any other error a 500 in DRF's JSON shape, never the
pages' HTML."""

import sqlite3

import psycopg
import pytest
from django.db import connection

from portal.api_errors import DATABASE_RETRY_AFTER
from tests.api.conftest import bearer

URL = "/api/v1/jobs/"


@pytest.fixture
def api(tokens):
    client = bearer(tokens["maps_token"])
    client.raise_request_exception = False
    return client


def failing_with(monkeypatch, error: BaseException):
    """The job list's read raises `error` as the database driver would, through Django's wrapper."""

    def visible_jobs(request):
        with connection.wrap_database_errors:
            raise error

    monkeypatch.setattr("jobs.api.visible_jobs", visible_jobs)


@pytest.mark.parametrize("error", [
    psycopg.OperationalError("connection failed: Connection refused"),
    psycopg.OperationalError("consuming input failed: server closed the connection unexpectedly"),
    psycopg.errors.AdminShutdown("terminating connection due to administrator command"),
    psycopg.errors.CannotConnectNow("the database system is starting up"),
    psycopg.errors.TooManyConnections("sorry, too many clients already"),
], ids=["refused", "dropped", "shut down in a failover", "starting up", "too many connections"])  # fmt: skip
def test_a_database_out_of_reach_is_a_503_to_retry(api, monkeypatch, error):
    failing_with(monkeypatch, error)
    response = api.get(URL)
    assert response.status_code == 503
    assert response["Retry-After"] == str(DATABASE_RETRY_AFTER)
    assert response.json() == {"detail": f"The database cannot be reached for the moment: retry in {DATABASE_RETRY_AFTER} s."}


@pytest.mark.parametrize("error", [
    psycopg.errors.UndefinedColumn('column "nope" does not exist'),
    psycopg.errors.InFailedSqlTransaction("current transaction is aborted, commands ignored until end of block"),
    psycopg.errors.UniqueViolation("duplicate key value violates unique constraint"),
    psycopg.errors.DivisionByZero("division by zero"),
    sqlite3.OperationalError("no such table: jobs_job"),
    RuntimeError("a bug"),
], ids=["a missing column", "an aborted transaction", "a constraint", "bad data", "SQLite's missing table",
        "not the database's"])  # fmt: skip
def test_an_error_of_the_code_stays_a_500_in_drfs_shape(api, monkeypatch, error):
    failing_with(monkeypatch, error)
    response = api.get(URL)
    assert response.status_code == 500 and "Retry-After" not in response
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"detail": "The server failed to answer this request; the error is in its log."}


def test_a_page_keeps_its_html_error_page(client, owner, monkeypatch):
    client.force_login(owner)
    client.raise_request_exception = False
    monkeypatch.setattr("jobs.views.jobs_for", lambda user: 1 / 0)
    response = client.get("/jobs/")
    assert response.status_code == 500 and response["Content-Type"].startswith("text/html")
