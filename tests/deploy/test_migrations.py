"""Upgrades without downtime: migrations only add, and new processes wait for them.

`kubectl apply -k` runs the migrate Job beside the new Deployments, and the old processes go on
until the new ones are ready. So old code must keep working on the migrated schema (a column a
migration adds NOT NULL needs a default in the database, `db_default`: old code inserts rows without
it), and new code must not serve before the schema is there (/readyz's `schema` check, and
`wait_for_schema` before a worker, the notifier or beat starts).
"""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DatabaseError, migrations, models
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder

from portal import upgrades
from portal.migration_ops import AddIndexWithoutLocking

pytestmark = pytest.mark.django_db
APPS = ("tenants", "jobs", "scheduling", "notifications")

# Shipped before this rule: every install has applied them, so they cannot break an upgrade now.
BEFORE_THE_RULE = {
    ("jobs", "0003_job_volumes_and_shm"), ("jobs", "0006_job_runtime"), ("jobs", "0007_adopted_jobs_and_sweeps"),
    ("jobs", "0008_gpu_types"), ("jobs", "0009_sweep_reads_its_team"), ("jobs", "0012_sweep_updated_at"),
    ("scheduling", "0003_cycle_failures"), ("scheduling", "0007_gpu_types"), ("scheduling", "0008_usage_per_gpu_type"),
    ("scheduling", "0010_cycle_changed"), ("tenants", "0001_initial"), ("tenants", "0004_sweep_settings"),
    # and before its part on indexes
    ("jobs", "0001_initial"), ("jobs", "0002_queue_order_index"), ("jobs", "0010_latest_successes_index"),
    ("jobs", "0011_job_list_indexes"), ("jobs", "0013_metrics_indexes"), ("notifications", "0005_delivery_digest"),
    ("scheduling", "0011_metrics_indexes"),
}


def _breaking(operation) -> str:
    """Why `operation` would break the code before it while it runs beside it, or ""."""
    if isinstance(operation, migrations.AddField):
        field = operation.field
        if not (field.many_to_many or field.null or field.db_default is not models.NOT_PROVIDED):
            return f"adds {operation.model_name}.{operation.name} NOT NULL without a db_default"
    if type(operation) is migrations.AddIndex:
        return (f"adds index {operation.index.name} with a plain CREATE INDEX, which blocks writes to its table "
                "until built: use portal.migration_ops.AddIndexWithoutLocking")  # fmt: skip
    if isinstance(operation, (migrations.RemoveField, migrations.RenameField, migrations.DeleteModel,
                              migrations.RenameModel)):  # fmt: skip
        return f"{type(operation).__name__} {getattr(operation, 'name', '')}: remove only once no release reads it"
    return ""


def test_no_migration_breaks_the_code_still_running_beside_it():
    loader = MigrationLoader(None, ignore_no_migrations=True)
    broken = [f"{app}.{name}: {why}" for (app, name), migration in sorted(loader.disk_migrations.items())
              if app in APPS and (app, name) not in BEFORE_THE_RULE
              for why in map(_breaking, migration.operations) if why]  # fmt: skip
    assert broken == []


def test_the_rule_catches_a_column_added_not_null_without_a_database_default():
    added = migrations.AddField("job", "colour", models.CharField(max_length=10, default="blue"))
    assert _breaking(added) == "adds job.colour NOT NULL without a db_default"
    assert _breaking(migrations.AddField("job", "colour", models.CharField(max_length=10, db_default="blue"))) == ""
    assert _breaking(migrations.AddField("job", "colour", models.CharField(max_length=10, null=True))) == ""
    assert _breaking(migrations.RemoveField("job", "colour")).startswith("RemoveField colour")


def test_the_rule_catches_an_index_that_blocks_writes_while_it_builds():
    index = models.Index(fields=["state"], name="job_state")
    assert _breaking(migrations.AddIndex("job", index)).startswith("adds index job_state with a plain CREATE INDEX")
    assert _breaking(AddIndexWithoutLocking("job", index)) == ""


def test_readyz_keeps_a_process_out_of_the_service_until_its_migrations_are_applied(client, monkeypatch):
    monkeypatch.setattr("portal.health.missing_migrations", lambda: ["jobs.0099_next", "jobs.0100_after"])
    body = client.get("/readyz").json()
    assert body["failing"] == ["schema"]
    assert body["checks"]["schema"]["error"] == ("The database lacks 2 migration(s) this code needs (the first: "
                                                 "jobs.0099_next); the migrate Job applies them.")  # fmt: skip


def test_the_schema_of_the_test_database_is_current(client):
    assert upgrades.missing_migrations() == []
    assert client.get("/readyz").json()["checks"]["schema"] == {"status": "ok"}


def test_a_missing_migration_is_named(monkeypatch):
    """Forget an app's latest migration was applied: the database then lacks it, as after a new release."""
    monkeypatch.setattr(upgrades, "_current", set())
    [(app, latest)] = MigrationLoader(None).graph.leaf_nodes("tenants")
    MigrationRecorder.Migration.objects.filter(app=app, name=latest).delete()
    assert upgrades.missing_migrations() == [f"tenants.{latest}"]


def test_wait_for_schema_waits_while_migrations_are_missing_then_exits(monkeypatch, capsys):
    answers = iter([DatabaseError("connection refused"), ["jobs.0099_next"], ["jobs.0099_next"], []])

    def missing():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr("scheduling.management.commands.wait_for_schema.missing_migrations", missing)
    call_command("wait_for_schema", "--interval", "0")
    said = capsys.readouterr().out.splitlines()
    assert said == ["The database cannot be read yet: connection refused",
                    "Waiting for 1 migration(s) to be applied (the first: jobs.0099_next); the migrate Job applies them.",
                    "The database has every migration this code needs."]  # fmt: skip


def test_wait_for_schema_gives_up_after_its_timeout(monkeypatch):
    monkeypatch.setattr("scheduling.management.commands.wait_for_schema.missing_migrations", lambda: ["jobs.0099_next"])
    with pytest.raises(CommandError, match=r"Gave up after 0 s\. Waiting for 1 migration"):
        call_command("wait_for_schema", "--timeout", "0", "--interval", "0")
