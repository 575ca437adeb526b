"""Migration operations that leave the site working while they run beside the release before them.

A plain CREATE INDEX blocks every write to its table until the index is built: on a table of
millions of rows that is minutes of jobs that cannot change state and notifications that cannot be
recorded, during an upgrade meant to cause no downtime (tests/deploy/test_migrations.py).
"""

from __future__ import annotations

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db.migrations import AddIndex, AlterField
from django.db.models import Index


class AddIndexWithoutLocking(AddIndexConcurrently):
    """Adds an index without blocking writes to its table: CREATE INDEX CONCURRENTLY on PostgreSQL,
    outside a transaction (its migration says `atomic = False`); a plain index on any other database
    (the demo's SQLite, where the demo alone writes).

    Run again, it finishes what a run before it left. Outside a transaction, the index can outlive a run
    that stopped before its migration was recorded: built, when the migrate pod was killed just after; or
    left invalid by PostgreSQL, when the build failed or was cancelled part-way. A valid index of the name
    is kept; an invalid one is dropped (DROP INDEX CONCURRENTLY) and built again. Without that, every retry
    of the migrate Job failed on "relation already exists" until someone dropped the index by hand.
    Backwards drops it with IF EXISTS, so a rerun of that finds nothing to do either.
    """

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            return AddIndex.database_forwards(self, app_label, schema_editor, from_state, to_state)
        valid = None if schema_editor.collect_sql else _index_valid(schema_editor, self.index.name)
        if valid:
            return
        if valid is False:
            schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {schema_editor.quote_name(self.index.name)}")
        super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            super().database_backwards(app_label, schema_editor, from_state, to_state)
        else:
            AddIndex.database_backwards(self, app_label, schema_editor, from_state, to_state)


def _index_valid(schema_editor, name: str) -> bool | None:
    """Returns whether the index `name` (in the schemas searched) is valid, or None when there is none:
    pg_index.indisvalid, false while a concurrent build runs and after one failed or was cancelled."""
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)",
                       [schema_editor.quote_name(name)])  # fmt: skip
        row = cursor.fetchone()
    return row[0] if row else None


class DropFieldIndexWithoutLocking(AlterField):
    """Turns off a field's own index (`db_index=False`, the field otherwise the same) without blocking its
    table: DROP INDEX CONCURRENTLY on PostgreSQL, outside a transaction (its migration says `atomic = False`),
    where a plain DROP INDEX would hold every read and write of the table behind it while it waits for its
    lock; a plain AlterField on any other database (the demo's SQLite) and backwards."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        model = from_state.apps.get_model(app_label, self.model_name)
        column = model._meta.get_field(self.name).column
        declared = {index.name for index in model._meta.indexes}  # an index of Meta on the column alone stays
        with schema_editor.connection.cursor() as cursor:
            found = schema_editor.connection.introspection.get_constraints(cursor, model._meta.db_table)
        for name, about in found.items():
            if (about["index"] and about["columns"] == [column] and about["type"] == Index.suffix and not about["unique"]
                    and not about["primary_key"] and name not in declared):  # fmt: skip
                schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {schema_editor.quote_name(name)}")

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        # AlterField's backwards runs its forwards with the states swapped: the plain one, not the drop above.
        AlterField.database_forwards(self, app_label, schema_editor, from_state, to_state)
