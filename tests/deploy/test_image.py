"""The container image, checked without a Docker engine: what it copies exists, and the layout it builds works."""

import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy.dockerfile import ignore_patterns, ignored, stages

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
ENTRYPOINT = ROOT / "deploy" / "entrypoint.sh"


@pytest.fixture(scope="module")
def image():
    return stages(DOCKERFILE)


def stage(image, name):
    return next(found for found in image if found.name == name)


def test_it_builds_wheels_in_one_stage_and_runs_as_a_non_root_user_on_a_slim_python_311(image):
    assert [found.name for found in image] == ["wheels", "policy", "runtime"]
    build, runtime = stage(image, "wheels"), stage(image, "runtime")
    assert build.base == runtime.base == stage(image, "policy").base == "python:3.11-slim-bookworm"
    assert any("pip wheel" in run for run in build.values("RUN"))
    assert any("--from=wheels" in copy for copy in runtime.values("COPY"))
    user = runtime.values("USER")[-1]
    assert user.split(":")[0] not in ("0", "root")
    assert any("collectstatic" in run for run in runtime.values("RUN"))
    assert runtime.values("ENTRYPOINT") == ['["/app/deploy/entrypoint.sh"]']


def test_everything_it_copies_exists_and_is_not_left_out_of_the_context(image):
    patterns = ignore_patterns(ROOT / ".dockerignore")
    for stage in image:
        for sources, _ in stage.copies():
            for source in sources:
                assert (ROOT / source).exists(), f"{stage.name}: COPY {source} does not exist"
                assert not ignored(source, patterns), f"{stage.name}: COPY {source} is excluded by .dockerignore"


def test_the_wheels_stage_copies_every_package_pyproject_installs(image):
    copied = {source for sources, _ in stage(image, "wheels").copies() for source in sources}
    pyproject = (ROOT / "pyproject.toml").read_text()
    include = pyproject.split("include = [", 1)[1].split("]", 1)[0]
    packages = {name.strip().strip('"').rstrip("*") for name in include.split(",") if name.strip()}
    assert packages <= copied
    assert {"pyproject.toml", "README.md"} <= copied


def test_the_runtime_layout_collects_static_files_and_serves_them(image, tmp_path):
    """Lay out /app as the runtime stage copies it, run its collectstatic, then serve a page and a stylesheet."""
    app = tmp_path / "app"
    for sources, destination in stage(image, "runtime").copies():  # relative to WORKDIR /app
        for source in sources:
            target = app / destination / Path(source).name if destination.endswith("/") else app / destination
            target.parent.mkdir(parents=True, exist_ok=True)
            (shutil.copytree if (ROOT / source).is_dir() else shutil.copy2)(ROOT / source, target)
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(app), "DJANGO_SETTINGS_MODULE": "portal.settings",
           "GANGWAY_VAR_DIR": str(tmp_path / "var"), "STATIC_ROOT": str(app / "staticfiles"),
           "SECRET_KEY": "collectstatic-only-not-a-secret"}  # fmt: skip
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], cwd=app, env=env, check=True,
                   timeout=120)  # fmt: skip
    assert (app / "staticfiles" / "css" / "gangway.css").is_file()

    script = (
        "import django; django.setup(); from django.test import Client; c = Client();"
        "print(c.get('/healthz').status_code, c.get('/static/css/gangway.css', secure=True).status_code)"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env={**env, "ALLOWED_HOSTS": "testserver"},
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.stdout.split() == ["200", "200"], result.stderr


def test_the_policy_compiled_in_its_own_stage_is_the_one_the_runtime_loads(image, tmp_path):
    """A stage of its own compiles the policy with a compiler the runtime lacks,
    and with the mypy (and mypyc's setuptools) `make test` pins, from the policy
    and the core alone, into the folder the runtime copies to var/native beside
    the same sources; the runtime neither moves the builds nor asks for the
    interpreted policy. Laid out so, with the build `make policy` made here, the
    runtime's interpreter loads the policy compiled."""
    policy, runtime = stage(image, "policy"), stage(image, "runtime")
    runs = " ".join(policy.values("RUN"))
    assert "gcc" in runs and not any("gcc" in run for run in runtime.values("RUN"))
    pinned = re.search(r'"(mypy\[mypyc\]==[^"]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    assert f'pip install "{pinned}"' in runs
    assert {to for _, to in policy.copies()} == {"core", "scheduling/", "scheduling/policy"}
    command = policy.values("RUN")[-1]
    built_in = re.fullmatch(r"GANGWAY_NATIVE_DIR=(\S+) python -m scheduling.policy build", command).group(1)
    copied = [shlex.split(copy)[1:] for copy in runtime.values("COPY") if copy.startswith("--from=policy")]
    destination = next(to for source, to in copied if source == built_in)
    assert runtime.values("WORKDIR") == ["/app"] and not destination.startswith("/")
    assert not any(word in env for env in runtime.values("ENV")
                   for word in ("GANGWAY_POLICY", "GANGWAY_NATIVE_DIR"))

    from scheduling.policy import native

    made = native.builds() / native.digest()
    if not native._complete(made):
        if os.environ.get("CI") == "true":
            pytest.fail(f"no build of the policy in {made}: `make test` runs `make policy` first")
        pytest.skip("no build of the policy here: `make policy` makes one")
    app = tmp_path / "app"
    shutil.copytree(ROOT / "scheduling", app / "scheduling", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(made, app / destination / made.name)
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(app)}  # no GANGWAY_NATIVE_DIR, no GANGWAY_POLICY
    script = "from scheduling.policy import native; print(native.LOADED); print(native.REASON)"
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=120)  # fmt: skip
    assert result.stdout.splitlines() == ["True", f"compiled with mypyc: {app / destination / made.name}"], (
        result.stdout + result.stderr)


# Worker, notifier and beat wait for the schema first (the migrate Job runs beside them in an upgrade).
WAIT = "python manage.py wait_for_schema --timeout 600"


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ([], "gunicorn --config deploy/gunicorn.conf.py portal.wsgi:application"),
        (["web"], "gunicorn --config deploy/gunicorn.conf.py portal.wsgi:application"),
        (["worker"], f"{WAIT}\ncelery -A portal worker --loglevel=INFO --concurrency=2 --without-mingle"
                     " --without-gossip --queues=celery"),
        (["notifier"], f"{WAIT}\ncelery -A portal worker --loglevel=INFO --concurrency=2 --without-mingle"
                       " --without-gossip --queues=notifications"),
        (["beat"], f"{WAIT}\ncelery -A portal beat --loglevel=INFO"),
        (["migrate"], "python manage.py migrate --noinput"),
        (["wait-for-schema"], WAIT),
        (["manage", "doctor"], "python manage.py doctor"),
    ],
    ids=["no argument runs the web", "web", "worker", "notifier", "beat", "migrate", "wait-for-schema",
         "manage runs any command"],
)
def test_the_entrypoint_runs_the_process_its_first_argument_names(tmp_path, arguments, expected):
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    for program in ("gunicorn", "celery", "python"):
        script = fake_bin / program
        script.write_text(f'#!/bin/sh\necho {program} "$@"\n')
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    env = {"PATH": f"{fake_bin}:/usr/bin:/bin"}

    result = subprocess.run(["sh", str(ENTRYPOINT), *arguments], env=env, capture_output=True, text=True, check=True)

    assert result.stdout.strip() == expected


def test_what_the_entrypoint_runs_exists_in_the_project():
    assert os.access(ENTRYPOINT, os.X_OK)
    assert subprocess.run(["sh", "-n", str(ENTRYPOINT)]).returncode == 0
    env = {**os.environ, "SECRET_KEY": "check-only", "DJANGO_SETTINGS_MODULE": "portal.settings"}
    gunicorn = Path(sys.executable).with_name("gunicorn")
    checked = subprocess.run([str(gunicorn), "--check-config", "--config", "deploy/gunicorn.conf.py",
                              "portal.wsgi:application"], cwd=ROOT, env=env, capture_output=True, text=True)  # fmt: skip
    assert checked.returncode == 0, checked.stderr
    from portal.celery import app

    assert app.main == "gangway"
    for command in ("migrate", "wait_for_schema", "doctor", "sync_tenants", "seed_demo"):
        assert subprocess.run([sys.executable, "manage.py", "help", command], cwd=ROOT, env=env,
                              capture_output=True).returncode == 0, command  # fmt: skip
