"""`plan`, `replay`, `manifest` and `settings_reference` run on a fresh checkout, with no SECRET_KEY or
DJANGO_DEBUG set; the web process, the worker and every other command still refuse to start without a key.

Each command runs in a subprocess with a clean environment, as a person runs it after `git clone`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scheduling.cluster.base import cluster_name
from scheduling.sim.policies import POLICIES

ROOT = Path(__file__).resolve().parent.parent
REFUSAL = "SECRET_KEY must be set"
SNAPSHOT = {"now": 1000, "nodes": [{"name": "n1", "gpu": 8}], "tiers": [{"name": "standard", "value": 100}],
            "teams": [{"name": "maps", "nominal": {"gpu": 8}}], "running": [],
            "pending": [{"id": "p1", "team": "maps", "tier": "standard", "queued": 10,
                         "replicas": [{"count": 2, "gpu": 4}]}]}  # fmt: skip


def run(args: list[str], tmp_path: Path, **extra: str) -> subprocess.CompletedProcess:
    """Runs `args` from the checkout with only PATH, HOME and a var folder of its own set (plus `extra`)."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GANGWAY_VAR_DIR": str(tmp_path / "var"), **extra}
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def manage(*args: str, tmp_path: Path, **extra: str) -> subprocess.CompletedProcess:
    return run([sys.executable, "manage.py", *args], tmp_path, **extra)


def test_plan_prints_the_plan(tmp_path):
    snapshot = tmp_path / "snapshot.json"
    snapshot.write_text(json.dumps(SNAPSHOT))
    result = manage("plan", "--input", str(snapshot), tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["admit"] == [{"id": "p1", "placement": {"n1": 2}, "victims": []}]


def test_replay_replays_a_synthetic_trace(tmp_path):
    result = manage("replay", "--synthetic", "20", tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"Replayed {len(POLICIES)} policy runs" in result.stdout  # every policy, once, at load 1


def test_settings_reference_prints_the_table(tmp_path):
    result = manage("settings_reference", tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "| `SECRET_KEY` |" in result.stdout


def test_manifest_on_a_database_not_yet_migrated_says_what_to_do(tmp_path):
    result = manage("manifest", "1", tmp_path=tmp_path)
    assert result.returncode == 1
    assert "Run `manage.py migrate`" in result.stderr and "Traceback" not in result.stderr


@pytest.fixture
def stored_job(transactional_db, submit, settings):
    """A job committed where a subprocess can read it; returns (job, DATABASE_URL of the test database)."""
    database = settings.DATABASES["default"]
    return submit(), f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}"


def test_manifest_prints_a_stored_jobs_tfjob(stored_job, tmp_path):
    job, url = stored_job
    result = manage("manifest", str(job.pk), tmp_path=tmp_path, DATABASE_URL=url)
    assert result.returncode == 0, result.stderr
    assert "kind: TFJob" in result.stdout and f"name: {cluster_name(job.pk, job.name)}\n" in result.stdout


def test_manifest_that_would_carry_a_job_token_asks_for_the_key(stored_job, tmp_path):
    job, url = stored_job
    result = manage("manifest", str(job.pk), tmp_path=tmp_path, DATABASE_URL=url, PUBLIC_URL="https://gangway.example")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "job token signed with SECRET_KEY" in result.stderr


@pytest.mark.parametrize("args", [
    pytest.param([sys.executable, "manage.py", "migrate"], id="another command"),
    pytest.param([sys.executable, "manage.py", "runserver", "--noreload"], id="the development server"),
    pytest.param([sys.executable, "-c", "import portal.wsgi"], id="the web process"),
    pytest.param([str(Path(sys.executable).parent / "celery"), "-A", "portal", "worker"], id="the worker"),
])  # fmt: skip
def test_everything_else_refuses_to_start_without_a_key(tmp_path, args):
    result = run(args, tmp_path)
    assert result.returncode != 0 and REFUSAL in result.stderr



def test_the_settings_reference_names_exactly_these_commands(settings):
    from portal.settings_reference import BY_NAME

    meaning = BY_NAME["SECRET_KEY"].meaning
    assert [command for command in settings.COMMANDS_WITHOUT_SECRETS if f"`{command}`" not in meaning] == []
    assert meaning.count("`") // 2 == len(settings.COMMANDS_WITHOUT_SECRETS) + 1  # and SECRET_KEY_FILE
