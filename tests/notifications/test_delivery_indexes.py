"""Deliveries keep one index per way they are read: a person's are read through `delivery_to_person`, which starts
with the person, so the person column has no index of its own (every index slows every write of the table)."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from notifications.models import Delivery


def indexes_starting_with(column: str) -> list[str]:
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, Delivery._meta.db_table)
    return sorted(name for name, about in found.items()
                  if about["index"] and not about["primary_key"] and about["columns"][:1] == [column])  # fmt: skip


@pytest.mark.django_db
def test_the_person_column_is_indexed_only_by_the_index_that_reads_a_persons_deliveries():
    assert indexes_starting_with("user_id") == ["delivery_to_person"]


@pytest.fixture
def back_to_the_latest():
    """Migrates the app to its latest migration after the test, whichever it left the database at: a test run
    after it in the same process reads every table (a later migration's too)."""
    yield
    call_command("migrate", "notifications", verbosity=0)


@pytest.mark.django_db(transaction=True)
def test_the_migration_drops_the_person_columns_own_index_without_locking_the_table_and_undoes(back_to_the_latest):
    call_command("migrate", "notifications", "0006", verbosity=0)
    (own,) = [name for name in indexes_starting_with("user_id") if name != "delivery_to_person"]

    with CaptureQueriesContext(connection) as queries:
        call_command("migrate", "notifications", "0007", verbosity=0)
    assert indexes_starting_with("user_id") == ["delivery_to_person"]
    assert [query["sql"] for query in queries if "DROP INDEX" in query["sql"]] == [
        f'DROP INDEX CONCURRENTLY IF EXISTS "{own}"']
