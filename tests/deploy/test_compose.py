"""docker-compose.yml: checked as YAML here always, and by docker-compose itself where it is installed.

Debian's docker-compose (v1) validates and renders the file without an
engine; installing it takes about a minute, so `make test` does not, and the
structural checks below stand in for it when it is absent.
"""

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
GANGWAY = {"migrate": "migrate", "web": "web", "worker": "worker", "notifier": "notifier", "beat": "beat"}


@pytest.fixture(scope="module")
def compose():
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def entrypoint_commands() -> set[str]:
    text = (ROOT / "deploy" / "entrypoint.sh").read_text()
    return set(re.findall(r"^\s+([a-z]+)\)$", text, re.M))


def test_it_runs_web_worker_notifier_beat_and_migrate_from_the_image_beside_postgres_and_redis(compose):
    services = compose["services"]
    assert set(services) == {"postgres", "redis", *GANGWAY}
    for name, command in GANGWAY.items():
        service = services[name]
        assert service["build"] == {"context": ".", "dockerfile": "deploy/Dockerfile"}
        assert (ROOT / service["build"]["dockerfile"]).is_file()
        assert service["command"] == [command] and command in entrypoint_commands()
        assert service["env_file"] == ".env"
        assert service["environment"]["CELERY_BROKER_URL"].startswith("redis://redis:")
        assert "@postgres:5432/" in service["environment"]["DATABASE_URL"]


def test_every_long_running_service_has_a_health_check_and_starts_after_what_it_needs(compose):
    services = compose["services"]
    for name in ("postgres", "redis", "web", "worker", "notifier"):
        assert services[name]["healthcheck"]["test"], name
    # The same checks as the web's readiness probe in deploy/kubernetes/web.yaml.
    assert "/readyz?exclude=cluster&exclude=cycles&exclude=broker'" in " ".join(services["web"]["healthcheck"]["test"])
    for name in ("web", "worker", "notifier", "beat"):
        assert services[name]["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}
        assert services[name]["depends_on"]["redis"] == {"condition": "service_healthy"}
    assert services["migrate"]["depends_on"]["postgres"] == {"condition": "service_healthy"}
    assert services["migrate"]["restart"] == "no"


def test_data_lives_in_named_volumes(compose):
    declared = set(compose["volumes"])
    used = {
        volume.split(":")[0]
        for service in compose["services"].values()
        for volume in service.get("volumes", ())
    }
    assert used == declared == {"postgres-data", "redis-data", "beat-schedule"}


def test_the_example_env_file_documents_the_secrets_it_needs():
    example = (ROOT / ".env.example").read_text()
    names = dict(line.split("=", 1) for line in example.splitlines() if line and not line.startswith("#"))
    assert names["SECRET_KEY"] == "" and names["POSTGRES_PASSWORD"] == ""  # no secret ships with the repository
    assert "token_urlsafe" in example


@pytest.mark.skipif(not shutil.which("docker-compose"), reason="docker-compose (Debian's v1) is not installed")
def test_docker_compose_accepts_it(tmp_path):
    shutil.copy(ROOT / "docker-compose.yml", tmp_path)
    env_file = (ROOT / ".env.example").read_text().replace("POSTGRES_PASSWORD=\n", "POSTGRES_PASSWORD=pw\n")
    (tmp_path / ".env").write_text(env_file)

    result = subprocess.run(["docker-compose", "-f", "docker-compose.yml", "config"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)  # fmt: skip

    assert result.returncode == 0, result.stderr
    rendered = yaml.safe_load(result.stdout)
    assert rendered["services"]["web"]["environment"]["DATABASE_URL"] == "postgres://gangway:pw@postgres:5432/gangway"


@pytest.mark.skipif(not shutil.which("docker-compose"), reason="docker-compose (Debian's v1) is not installed")
def test_docker_compose_refuses_to_start_without_a_database_password(tmp_path):
    shutil.copy(ROOT / "docker-compose.yml", tmp_path)
    shutil.copy(ROOT / ".env.example", tmp_path / ".env")

    result = subprocess.run(["docker-compose", "-f", "docker-compose.yml", "config"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)  # fmt: skip

    assert result.returncode != 0
    assert "set POSTGRES_PASSWORD in .env" in result.stderr
