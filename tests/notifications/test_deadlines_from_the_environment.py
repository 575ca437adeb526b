"""WEBHOOK_DEADLINE and EMAIL_DEADLINE come from environment variables of the same names, as every other
deployment setting does; a value that is not a number stops the process as it reads its settings, and one not
above 0 (or over half the worker's soft time limit) fails the system checks every process runs at start, each
naming the variable."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from notifications.deadlines import EMAIL_DEADLINE_DEFAULT, WEBHOOK_DEADLINE_DEFAULT
from portal.settings_reference import BY_NAME

ROOT = Path(__file__).resolve().parents[2]
READ_DEADLINES = ("import django; django.setup(); from notifications import deadlines; "
                  "print(deadlines.webhook_deadline(), deadlines.email_deadline())")  # fmt: skip


def run(tmp_path, args: list[str], **variables: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args],
        env={"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "portal.settings", "DJANGO_DEBUG": "1",
             "GANGWAY_VAR_DIR": str(tmp_path), **variables},
        capture_output=True, text=True, cwd=str(ROOT),
    )  # fmt: skip


def test_the_deadlines_are_read_from_the_environment(tmp_path):
    result = run(tmp_path, ["-c", READ_DEADLINES], WEBHOOK_DEADLINE="2.5", EMAIL_DEADLINE="45")

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["2.5", "45.0"]


def test_unset_they_are_the_defaults(tmp_path):
    result = run(tmp_path, ["-c", READ_DEADLINES])

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(float(WEBHOOK_DEADLINE_DEFAULT)), str(float(EMAIL_DEADLINE_DEFAULT))]


def test_the_settings_reference_states_the_defaults_the_deadlines_use():
    assert BY_NAME["WEBHOOK_DEADLINE"].value == WEBHOOK_DEADLINE_DEFAULT
    assert BY_NAME["EMAIL_DEADLINE"].value == EMAIL_DEADLINE_DEFAULT


@pytest.mark.parametrize("name", ["WEBHOOK_DEADLINE", "EMAIL_DEADLINE"])
def test_a_deadline_that_is_not_a_number_is_refused_naming_it(tmp_path, name):
    result = run(tmp_path, ["-c", READ_DEADLINES], **{name: "5s"})

    assert result.returncode != 0
    assert f"{name} must be a number, got '5s'." in result.stderr


@pytest.mark.parametrize(("name", "check", "value", "read"), [
    ("WEBHOOK_DEADLINE", "E001", "0", "0.0"),
    ("WEBHOOK_DEADLINE", "E001", "51", "51.0"),
    ("EMAIL_DEADLINE", "E002", "-1", "-1.0"),
    ("EMAIL_DEADLINE", "E002", "nan", "nan"),
])  # fmt: skip
def test_a_deadline_out_of_its_range_stops_the_service_at_start_naming_it(tmp_path, name, check, value, read):
    result = run(tmp_path, ["manage.py", "check"], **{name: value})

    assert result.returncode != 0
    assert (f"(notifications.{check}) {name} must be a number of seconds above 0 and at most half of "
            f"CELERY_TASK_SOFT_TIME_LIMIT (100 s), not {read}.") in result.stderr  # fmt: skip
