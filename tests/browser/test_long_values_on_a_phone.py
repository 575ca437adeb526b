"""Values longer than a phone is wide (390 px) wrap where they are shown rather than push the page, or the
table they sit in, into scrolling sideways."""

from __future__ import annotations

import pytest

from tests.browser.conftest import PHONE, sign_in

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
