"""Migration operations that leave the site working while they run beside the release before them.

A plain CREATE INDEX blocks every write to its table until the index is built: on a table of
millions of rows that is minutes of jobs that cannot change state and notifications that cannot be
recorded, during an upgrade meant to cause no downtime (tests/deploy/test_migrations.py).
"""

from __future__ import annotations

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db.migrations import AddIndex


class AddIndexWithoutLocking(AddIndexConcurrently):
    """Adds an index without blocking writes to its table: CREATE INDEX CONCURRENTLY on PostgreSQL,
    outside a transaction (its migration says `atomic = False`); a plain index on any other database
    (the demo's SQLite, where the demo alone writes)."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            super().database_forwards(app_label, schema_editor, from_state, to_state)
        else:
            AddIndex.database_forwards(self, app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            super().database_backwards(app_label, schema_editor, from_state, to_state)
        else:
            AddIndex.database_backwards(self, app_label, schema_editor, from_state, to_state)
