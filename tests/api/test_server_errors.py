"""Errors of the server under /api/: a database out of service for a while is a 503 with Retry-After, which
clients retry (the CLI with the same idempotency key), wherever in the request the database fails (the view, a
middleware, the browsable API's page); any other error a 500 in DRF's JSON shape, never the pages' HTML."""

import sqlite3

import psycopg
import pytest
from django.db import connection, connections
from rest_framework.renderers import BrowsableAPIRenderer

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


def end_the_connection_of_this_thread():
    """Ends this thread's PostgreSQL connection from another, as a failover ends every connection."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s, 5000)", [pid])  # returns once it has ended
    finally:
        other.close()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("persona", ["maps_token", "owner"], ids=["a token looked up", "a session read"])
def test_a_database_ended_before_the_request_authenticates_is_a_503_to_retry(as_persona, persona):
    # DRF authenticates inside the view's own handling (its dispatch), not in a middleware.
    client = as_persona(persona)
    client.raise_request_exception = False
    end_the_connection_of_this_thread()
    try:
        response = client.get(URL)
    finally:
        connection.close()

    assert response.status_code == 503, response.content[:300]
    assert response["Retry-After"] == str(DATABASE_RETRY_AFTER)


@pytest.mark.django_db(transaction=True)
def test_a_database_ended_while_the_browsable_api_renders_its_page_is_a_503_to_retry(as_persona, monkeypatch):
    # The view has answered; its page, rendered after it, reads the database again (the staff banner's cycles).
    render = BrowsableAPIRenderer.render

    def render_after_a_failover(self, *args, **kwargs):
        end_the_connection_of_this_thread()
        return render(self, *args, **kwargs)

    monkeypatch.setattr(BrowsableAPIRenderer, "render", render_after_a_failover)
    client = as_persona("staff")
    client.raise_request_exception = False
    try:
        response = client.get(URL, HTTP_ACCEPT="text/html")
    finally:
        connection.close()  # the ended connection; the next query opens another

    assert response.status_code == 503, response.content[:300]
    assert response["Retry-After"] == str(DATABASE_RETRY_AFTER)
    assert response.json() == {"detail": f"The database cannot be reached for the moment: retry in {DATABASE_RETRY_AFTER} s."}


@pytest.mark.django_db(transaction=True)
def test_a_session_saved_on_the_way_out_while_the_database_takes_no_writes_is_a_503_to_retry(as_persona, settings):
    settings.SESSION_SAVE_EVERY_REQUEST = True  # the session middleware writes the session after the view
    client = as_persona("owner")
    client.raise_request_exception = False
    with connection.cursor() as cursor:
        cursor.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
    try:
        response = client.get(URL)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE")

    assert response.status_code == 503, response.content[:300]
    assert response["Retry-After"] == str(DATABASE_RETRY_AFTER)
    assert response.json() == {
        "detail": f"The database is taking no writes for the moment (a failover): retry in {DATABASE_RETRY_AFTER} s."}


@pytest.mark.django_db(transaction=True)
def test_a_session_the_database_refuses_to_save_stays_a_page_outside_the_api(client, owner, settings):
    settings.SESSION_SAVE_EVERY_REQUEST = True
    client.force_login(owner)
    client.raise_request_exception = False
    with connection.cursor() as cursor:
        cursor.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
    try:
        response = client.get("/healthz")
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE")

    assert response.status_code == 400 and "Retry-After" not in response
