"""An index built without locking, run again after a migrate Job stopped part-way, on the real PostgreSQL.

AddIndexWithoutLocking runs outside a transaction, so the index can outlive a run whose migration was never
recorded: built, when the pod was killed just after, or left invalid, when the build was cancelled or
failed. The Job's retry runs the same operation again and must complete either way.
"""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, models
from django.db.migrations.loader import MigrationLoader

from portal.migration_ops import AddIndexWithoutLocking

pytestmark = pytest.mark.django_db(transaction=True)
NAME = "delivery_channel_newest_idx"
TABLE = "notifications_delivery"


@pytest.fixture
def operation():
    if connection.vendor != "postgresql":
        pytest.skip("CREATE INDEX CONCURRENTLY is PostgreSQL's")
    yield AddIndexWithoutLocking("delivery", models.Index(fields=["channel", "-id"], name=NAME))
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX IF EXISTS {NAME}")


def run(operation, *, backwards: bool = False) -> None:
    """Runs `operation` as `migrate` does, outside a transaction (forwards, or backwards)."""
    before = MigrationLoader(connection).project_state()
    after = before.clone()
    operation.state_forwards("notifications", after)
    with connection.schema_editor(atomic=False) as editor:
        if backwards:
            operation.database_backwards("notifications", editor, after, before)
        else:
            operation.database_forwards("notifications", editor, before, after)


def index() -> tuple[bool, str] | None:
    """Returns whether the index is valid, and its definition; None when there is none."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT i.indisvalid, pg_get_indexdef(i.indexrelid) FROM pg_index i "
                       "WHERE i.indexrelid = to_regclass(%s)", [NAME])  # fmt: skip
        return cursor.fetchone()


def cancelled_while_building(operation) -> None:
    """Runs `operation` until PostgreSQL cancels it part-way, as a killed or timed-out migrate leaves it: another
    transaction writing to the table holds the concurrent build in its wait, after the index was entered in the
    catalog, until its statement_timeout."""
    writer = connection.get_new_connection(connection.get_connection_params())
    try:
        writer.autocommit = False
        writer.cursor().execute(f"LOCK TABLE {TABLE} IN ROW EXCLUSIVE MODE")  # what an INSERT holds
        with connection.cursor() as cursor:
            cursor.execute("SET statement_timeout = '500ms'")
        try:
            with pytest.raises(DatabaseError, match="statement timeout"):
                run(operation)
        finally:
            with connection.cursor() as cursor:
                cursor.execute("RESET statement_timeout")
    finally:
        writer.rollback()
        writer.close()


def test_a_run_again_after_the_index_was_built_keeps_it_and_completes(operation):
    run(operation)
    run(operation)  # the pod was killed before the migration was recorded: the Job's retry

    valid, definition = index()
    assert valid and "(channel, id DESC)" in definition


def test_a_run_again_after_a_build_was_cancelled_drops_the_invalid_index_and_builds_it(operation):
    cancelled_while_building(operation)
    assert index()[0] is False  # what PostgreSQL leaves behind

    run(operation)

    valid, definition = index()
    assert valid and "(channel, id DESC)" in definition


def test_backwards_run_again_finds_nothing_to_drop(operation):
    run(operation)
    run(operation, backwards=True)
    run(operation, backwards=True)

    assert index() is None
