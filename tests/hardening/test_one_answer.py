"""One answer on every path: the same manifest through the form's YAML import, the API (JSON), the CLI's request
(YAML with a team token) and `manage.py submit` is accepted by all or refused by all, with the same sentence.

The form's import once turned a tier the team may not use into "Team default" and said every field was
carried over, while the API refused the same YAML.
"""

from __future__ import annotations

import html
import json
import uuid

import pytest
import yaml
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from scheduling.cluster.simulated import SimulatedCluster
from scheduling.loop import admission_cycle
from tenants.tokens import token_create

MANIFEST = """
apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {{name: {name}, namespace: maps}}
spec:
  runPolicy: {{activeDeadlineSeconds: 3600}}
  tfReplicaSpecs:
    Worker:
      replicas: 2
      template:
        spec:
          {pod}
          containers:
          - name: tensorflow
            image: tensorflow/tensorflow:2.12.0-gpu
            command: [python, /app/train.py]
            resources: {{limits: {{nvidia.com/gpu: {gpu}}}}}
"""
CASES = {
    "a job the team may run": dict(name="resnet", pod="", gpu=1),
    "a priority class that is no tier": dict(name="resnet", pod="priorityClassName: high-priority", gpu=1),
    "a tier the team may not use": dict(name="resnet", pod="priorityClassName: production", gpu=1),
    "a name that is not a DNS label": dict(name="ResNet_50", pod="", gpu=1),
    "a replica bigger than any node": dict(name="resnet", pod="", gpu=12),
}
EXPECTED = {
    "a job the team may run": None,
    "a priority class that is no tier": "may not use tier 'high-priority'",
    "a tier the team may not use": "may not use tier 'production'",
    "a name that is not a DNS label": "Must be at most 50 lowercase letters",
    "a replica bigger than any node": "Can never run",
}


@pytest.fixture
def world(maps, tiers, owner, nodes):
    maps.tiers.remove(tiers["production"])
    admission_cycle(cluster=SimulatedCluster())  # reads the nodes, so R10 can refuse what never fits
    return maps


def through_the_form(client, owner, text) -> str | None:
    client.force_login(owner)
    response = client.post("/jobs/new/import/", {"yaml": text, "team": "maps"}, HTTP_HX_REQUEST="true")
    if response.status_code == 200:
        return None
    assert response.status_code == 422
    return html.unescape(response.content.decode())


def through_the_api(owner, text) -> str | None:
    client = APIClient()
    client.force_login(owner)
    response = client.post("/api/v1/jobs/", json.dumps(yaml.safe_load(text)), content_type="application/json")
    return None if response.status_code == 201 else _refusal(response)


def through_the_cli_request(world, text) -> str | None:
    """What `gangway submit` sends: the YAML as it is, a team token, ?team= and an idempotency key."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(name=f'ci-{uuid.uuid4().hex[:6]}', team=world)[1]}")
    response = client.post("/api/v1/jobs/?team=maps", text, content_type="application/yaml",
                           HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()))  # fmt: skip
    return None if response.status_code == 201 else _refusal(response)


def through_manage_py(tmp_path, text: str | bytes) -> str | None:
    path = tmp_path / "job.yaml"
    path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)
    try:
        call_command("submit", team="maps", file=str(path), user="owner", stdout=open("/dev/null", "w"))
    except CommandError as error:
        return str(error)
    return None


def _refusal(response) -> str:
    assert response.status_code == 400, response.content
    return json.dumps(response.json(), ensure_ascii=False)


@pytest.mark.parametrize("case", CASES, ids=CASES)
def test_every_path_gives_the_same_answer(client, world, owner, tmp_path, case):
    text = MANIFEST.format(**CASES[case])
    answers = {
        "form": through_the_form(client, owner, text),
        "api": through_the_api(owner, text),
        "cli": through_the_cli_request(world, text),
        "manage.py": through_manage_py(tmp_path, text),
    }
    expected = EXPECTED[case]
    if expected is None:
        assert answers == dict.fromkeys(answers), answers
        return
    for path, answer in answers.items():
        assert answer is not None, f"{path} accepted {case}"
        assert expected in answer, f"{path}: {answer[:300]}"


def test_the_forms_refusal_is_by_the_tier_field_and_keeps_the_asked_tier(client, world, owner):
    body = through_the_form(client, owner, MANIFEST.format(**CASES["a priority class that is no tier"]))
    assert '<option value="high-priority" selected>high-priority (not allowed for this team)</option>' in body
    assert "Team maps may not use tier 'high-priority'; it may use standard, experiment." in body
    assert "Every field of the manifest was carried over" in body  # true: nothing was dropped, and nothing changed
