"""Values longer than a phone is wide (390 px) wrap where they are shown rather than push the page, or the
table they sit in, into scrolling sideways."""

from __future__ import annotations

import pytest

from jobs.models import Job
from tenants.models import Quota
from tests.browser.conftest import PHONE, sign_in
from tests.conftest import make_team

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SPILL = "document.scrollingElement.scrollWidth - window.innerWidth"
# A PyTorchJob whose Worker names no command of its own: the import lists that key path, 71 characters of
# one word, among what it did not carry over.
NOT_CARRIED = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: ddp, namespace: maps, labels: {team: maps}}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers:
            - {name: pytorch, image: "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime", command: [torchrun, train.py],
               resources: {limits: {nvidia.com/gpu: 1}}}
    Worker:
      replicas: 1
      template:
        spec:
          containers:
            - {name: pytorch, image: "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
               resources: {limits: {nvidia.com/gpu: 1}}}
"""


def test_what_an_import_did_not_carry_over_wraps_on_a_phone(page_at, owner, cycle, shot):
    cycle()
    page = sign_in(page_at(PHONE), owner, "/jobs/new/")
    page.click("summary:has-text('Import')")
    page.fill("textarea[name=yaml]", NOT_CARRIED)
    page.click("button:has-text('Fill the form from YAML')")
    page.wait_for_selector("text=Filled from the pasted manifest")
    shot(page, "import-not-carried-over-390")
    paths = page.locator(".unsupported code").all_text_contents()
    assert any(len(path) > 60 for path in paths), paths
    notice = page.locator(".notice").bounding_box()
    for path in page.locator(".unsupported code").all():
        box = path.bounding_box()
        assert box["x"] + box["width"] <= notice["x"] + notice["width"] + 0.5, f"{path.text_content()} leaves its notice"
    assert page.evaluate(SPILL) <= 0, "the submit page spills sideways"


@pytest.fixture
def borrowing_from_four(gpu_types, tiers, maps, vision, submit, cycle):
    """maps runs 8 a100 GPUs: its 4 nominal and 1 borrowed from each of four teams, three of long names."""
    vision.quotas.filter(resource=gpu_types["a100"].resource).update(nominal=1)
    for slug in ("perception-foundation-models", "speech-recognition-research", "autonomous-driving-planning"):
        team = make_team(slug, tiers, gpu=0)
        team.quotas.all().delete()
        Quota.objects.create(team=team, resource=gpu_types["a100"].resource, nominal=1, max_per_replica=8)
    job = submit(name="big-a100", replicas=[{"role": "Worker", "count": 1, "gpu": 8}])
    Job.objects.filter(pk=job.pk).update(gpu_type=["a100"])
    cycle()
    assert Job.objects.get(pk=job.pk).state in (Job.State.ADMITTED, Job.State.RUNNING)


def test_a_team_s_lenders_per_type_wrap_on_a_phone(page_at, staff, borrowing_from_four, shot):
    page = sign_in(page_at(PHONE), staff, "/teams/maps/")
    page.wait_for_load_state("networkidle")
    shot(page, "team-types-lenders-390")
    borrowed = page.locator("#type-a100 td[data-label=Borrowed]")
    assert "1 from autonomous-driving-planning" in borrowed.text_content()
    box = page.evaluate("(box) => [box.scrollWidth, box.clientWidth]", page.locator("#team-types .table-wrap").element_handle())
    assert box[0] <= box[1], f"the table of GPUs per type is {box[0]}px wide in a box of {box[1]}px"
    cell = borrowed.bounding_box()
    card = page.locator("#team-types").bounding_box()
    assert cell["x"] + cell["width"] <= card["x"] + card["width"], "the lenders run past the card"
    assert page.evaluate(SPILL) <= 0, "the team page spills sideways"
