"""Whether the database has every migration this code needs.

An upgrade runs the migrate Job beside the new processes (`kubectl apply -k` applies both): until
it is done, new code would meet an older schema. So a new web process answers /readyz 503
(`schema`) and stays out of the Service, and new workers, the notifier and beat wait before they
start (`manage.py wait_for_schema`, in deploy/entrypoint.sh), while the old ones go on: migrations
only add, so old code keeps working on the newer schema (tests/deploy/test_migrations.py).
"""

from __future__ import annotations

from django.db import connections
from django.db.migrations.executor import MigrationExecutor

_current: set[str] = set()  # databases found current: a schema only moves forward while a process lives


def missing_migrations(using: str = "default") -> list[str]:
    """Returns the migrations this code has that the database lacks ("jobs.0013_..."), in the order they
    would be applied; [] once it has them all. Raises DatabaseError when the database cannot be read."""
    if using in _current:
        return []
    executor = MigrationExecutor(connections[using])
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    missing = [f"{migration.app_label}.{migration.name}" for migration, _backwards in plan]
    if not missing:
        _current.add(using)
    return missing
