"""`manage.py plan` as a person or a script runs it: a subprocess."""

import json
import os
import subprocess
import sys
from pathlib import Path

from test_policy_io import GOOD

ROOT = Path(__file__).resolve().parents[2]


def _run(*args, stdin=None):
    env = {**os.environ, "DJANGO_DEBUG": "1"}
    return subprocess.run([sys.executable, "manage.py", "plan", *args], cwd=ROOT, env=env,
                          input=stdin, capture_output=True, text=True, timeout=60)


def test_it_answers_designs_example(tmp_path):
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps(GOOD))
    done = _run("--input", str(path))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "admit": [{"id": "p1", "placement": {"n1": 2}, "victims": ["r1"]}],
        "wait": [], "reject": [], "reservations": [],
        "teams": [{"team": "finance", "nominal": 8, "used": 8, "within": 8, "borrowed": 0,
                   "lent": 0, "idle": 0, "waiting": 0, "borrowed_from": {}}]}


def test_it_reads_stdin_and_explains_on_stderr():
    done = _run("--input", "-", "--explain", stdin=json.dumps(GOOD))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["admit"][0]["id"] == "p1"
    assert done.stderr.strip().endswith("Admitted 1, preempted 1, waiting 0, rejected 0.")


def test_it_exits_2_with_one_line_for_a_malformed_snapshot():
    bad = json.loads(json.dumps(GOOD))
    bad["pending"][0]["replicas"][0]["gpu"] = -1
    done = _run("--input", "-", stdin=json.dumps(bad))
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.strip() == "pending[0].replicas[0].gpu: must be a non-negative integer, got -1"


def test_it_exits_2_with_one_line_for_a_bad_reservation():
    bad = json.loads(json.dumps(GOOD))
    bad["reservations"] = [{"id": "p1", "start": "soon", "placement": {"n1": 2}}]
    done = _run("--input", "-", stdin=json.dumps(bad))
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "reservations[0].start: must be an integer number of seconds, got 'soon'")


def test_it_prints_the_reservations_the_next_snapshot_takes_back():
    data = json.loads(json.dumps(GOOD))
    data["now"] = 5000
    data["running"][0].update(max_runtime=9000)
    # 4 GPUs are free, but not the CPU: it reserves n1 from when r1 ends.
    data["pending"][0].update(tier="standard", queued=100,
                              replicas=[{"count": 1, "gpu": 4, "cpu": 60000}])
    done = _run("--input", "-", stdin=json.dumps(data))
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["reservations"] == [{"id": "p1", "start": 9010, "placement": {"n1": 1}}]
    data["reservations"] = printed["reservations"]
    again = _run("--input", "-", "--explain", stdin=json.dumps(data))
    assert json.loads(again.stdout)["reservations"] == printed["reservations"]
    assert "p1   reserve   n1 x1 from 9010" in again.stderr


def test_it_takes_nodes_that_take_no_new_pods_and_says_who_waits_for_them():
    data = json.loads(json.dumps(GOOD))
    data["nodes"].append({"name": "n2", "gpu": 16, "schedulable": False, "unschedulable": "cordoned"})
    data["teams"][0]["nominal"]["gpu"] = 24
    data["pending"][0].update(tier="standard", replicas=[{"count": 1, "gpu": 16}])
    done = _run("--input", "-", "--explain", stdin=json.dumps(data))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["wait"] == [
        {"id": "p1", "position": 1, "team_position": 1, "code": "unschedulable", "eta": None,
         "reason": "Waiting for nodes that take no new pods: only n2 (cordoned) could hold a replica of 16 GPUs."}]
    assert done.stderr.strip().endswith("Admitted 0, preempted 0, waiting 1, rejected 0.")


def test_it_exits_2_with_one_line_for_a_bad_node_field():
    bad = json.loads(json.dumps(GOOD))
    bad["nodes"][0]["schedulable"] = "false"
    done = _run("--input", "-", stdin=json.dumps(bad))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.strip() == "nodes[0].schedulable: must be true or false, got 'false'"


def test_it_exits_2_with_one_line_for_input_that_is_not_json():
    done = _run("--input", "-", stdin="{")
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr


def test_it_exits_2_when_the_file_is_missing(tmp_path):
    done = _run("--input", str(tmp_path / "missing.json"))
    assert done.returncode == 2
    assert done.stderr.strip().startswith("--input: cannot read")
