"""LOG_FORMAT=json: one JSON object per line, with the admission decision's fields."""

import io
import json
import logging
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from portal.logging import JsonFormatter

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def decisions():
    """Lines the admission loop logs while the test runs, formatted as JSON."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("gangway.admission")
    logger.addHandler(handler)
    old_level, logger.level = logger.level, logging.INFO
    yield stream
    logger.removeHandler(handler)
    logger.setLevel(old_level)


@pytest.mark.django_db
def test_each_admission_decision_is_one_json_line_with_job_team_rule_and_reason(decisions, busy_world):
    lines = decisions.getvalue().splitlines()
    entries = [json.loads(line) for line in lines]

    assert {entry["logger"] for entry in entries} == {"gangway.admission"}
    assert all({"time", "level", "message", "job", "team", "rule", "reason"} <= entry.keys() for entry in entries)
    by_job = {(entry["job"], entry["rule"]): entry for entry in entries}
    rejected = busy_world["too-big"]
    entry = by_job[(rejected.pk, rejected.reason_code)]
    assert entry["team"] == "maps"
    assert entry["reason"] == rejected.reason
    assert entry["level"] == "INFO"
    assert (busy_world["first"].pk, "reclaimed") in by_job  # of maps, for vision
    assert (busy_world["reclaim"].pk, "admitted") in by_job


def test_an_exception_and_odd_values_still_make_one_line():
    record = logging.LogRecord("gangway.tasks", logging.ERROR, __file__, 1, "failed %s", ("cycle",), None)
    try:
        raise ValueError("boom\non two lines")
    except ValueError:
        record.exc_info = sys.exc_info()
    record.when = object()  # not JSON: logged as its text

    line = JsonFormatter().format(record)

    assert "\n" not in line
    entry = json.loads(line)
    assert entry["message"] == "failed cycle"
    assert "ValueError: boom" in entry["exception"]
    assert entry["when"].startswith("<object object")
    assert entry["time"].endswith("+00:00")


def test_the_settings_switch_every_logger_to_json_with_log_format(tmp_path):
    script = (
        "import django, logging; django.setup(); "
        "logging.getLogger('gangway.admission').info('admitted job=7', "
        "extra={'job': 7, 'team': 'maps', 'rule': 'admitted', 'reason': 'Admitted: all 2 replicas placed.'})"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings", "DJANGO_DEBUG": "1", "LOG_FORMAT": "json",
           "GANGWAY_VAR_DIR": str(tmp_path)}  # fmt: skip
    result = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True,
                            timeout=60, check=True)  # fmt: skip

    entry = json.loads(result.stderr.strip().splitlines()[-1])
    assert entry["message"] == "admitted job=7"
    assert (entry["job"], entry["team"], entry["rule"]) == (7, "maps", "admitted")


def test_an_unknown_log_format_is_refused_naming_the_variable(tmp_path):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings", "DJANGO_DEBUG": "1", "LOG_FORMAT": "xml",
           "GANGWAY_VAR_DIR": str(tmp_path)}  # fmt: skip
    result = subprocess.run([sys.executable, "-c", "import django; django.setup()"], env=env, cwd=ROOT,
                            capture_output=True, text=True, timeout=60)  # fmt: skip

    assert result.returncode != 0
    assert "LOG_FORMAT must be one of plain, json, got 'xml'" in result.stderr


def test_the_web_server_writes_its_own_events_but_no_request_lines(tmp_path):
    from tests.deploy.ports import closed_port

    port = closed_port()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings", "DJANGO_DEBUG": "1", "PORT": str(port),
           "WEB_CONCURRENCY": "1", "GANGWAY_VAR_DIR": str(tmp_path)}  # fmt: skip
    gunicorn = Path(sys.executable).with_name("gunicorn")
    server = subprocess.Popen([str(gunicorn), "--config", "deploy/gunicorn.conf.py", "portal.wsgi:application"],
                              cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as answer:
                    assert answer.status == 200
                    break
            except OSError:
                assert time.monotonic() < deadline, "gunicorn did not answer"
                time.sleep(0.2)
    finally:
        server.terminate()
        _, stderr = server.communicate(timeout=30)

    assert "Booting worker" in stderr
    assert "/healthz" not in stderr
