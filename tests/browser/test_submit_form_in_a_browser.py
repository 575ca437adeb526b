"""The submit form in a real Chromium: rows added or imported, then submitted as the page shows them."""

from __future__ import annotations

import re

import pytest

from jobs.models import Job
from tests.browser.conftest import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

MASTER_AND_WORKER = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: ddp, namespace: maps}
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
            - {name: pytorch, image: "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime", command: [torchrun, train.py],
               resources: {limits: {nvidia.com/gpu: 1}}}
"""


def import_then_submit(page, owner, text: str) -> None:
    sign_in(page, owner, "/jobs/new/")
    page.click("summary:has-text('Import')")
    page.fill("textarea[name=yaml]", text)
    page.click("button:has-text('Fill the form from YAML')")
    page.wait_for_selector("text=Filled from the pasted manifest")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/jobs/\d+/$"), timeout=5_000)


def groups_of(job: Job) -> dict:
    return {group["role"]: (group["count"], group["gpu"]) for group in job.replicas}


def test_a_row_added_with_the_button_and_left_as_it_came_keeps_its_gpu(page, owner, cycle):
    cycle()
    sign_in(page, owner, "/jobs/new/")
    page.select_option("#id_kind", "PyTorchJob")
    page.fill("#id_name", "ddp")
    page.fill("#id_image", "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime")
    page.select_option("[name=replicas-0-role]", "Master")
    page.click("[data-add-replica]")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/jobs/\d+/$"), timeout=5_000)
    assert groups_of(Job.objects.get()) == {"Master": (1, 1), "Worker": (1, 1)}


def test_an_imported_worker_of_one_replica_and_one_gpu_keeps_its_gpu(page, owner, cycle):
    cycle()
    import_then_submit(page, owner, MASTER_AND_WORKER)
    assert groups_of(Job.objects.get()) == {"Master": (1, 1), "Worker": (1, 1)}


def test_an_imported_lone_worker_of_one_replica_and_one_gpu_can_be_submitted(page, owner, cycle):
    cycle()
    master, worker = MASTER_AND_WORKER.split("    Worker:\n")
    import_then_submit(page, owner, master.split("    Master:\n")[0] + "    Worker:\n" + worker)
    assert groups_of(Job.objects.get()) == {"Worker": (1, 1)}


def test_a_script_of_several_lines_in_args_survives_the_import(page, owner, cycle):
    """bash -c and a literal block: a one-line input would have lost the script's line breaks."""
    cycle()
    worker = MASTER_AND_WORKER[MASTER_AND_WORKER.index("    Worker:"):]
    script = worker.replace("command: [torchrun, train.py]", 'command: [bash, -c], args: ["pip install -r requirements.txt\\n'
                            'torchrun train.py\\n"]')  # fmt: skip
    import_then_submit(page, owner, MASTER_AND_WORKER[:MASTER_AND_WORKER.index("    Master:")] + script)
    job = Job.objects.get()
    assert (job.command, job.args) == (["bash", "-c"], ["pip install -r requirements.txt\ntorchrun train.py\n"])


def test_an_env_value_of_several_lines_survives_the_import(page, owner, cycle):
    cycle()
    worker = MASTER_AND_WORKER[MASTER_AND_WORKER.index("    Worker:"):]
    hosts = worker.replace("command: [torchrun, train.py]", 'command: [torchrun, train.py], '
                           'env: [{name: HOSTS, value: "a.example\\nb.example\\n"}]')  # fmt: skip
    import_then_submit(page, owner, MASTER_AND_WORKER[:MASTER_AND_WORKER.index("    Master:")] + hosts)
    assert Job.objects.get().env == {"HOSTS": "a.example\nb.example\n"}


@pytest.mark.parametrize("width", [1280, 1024])
def test_the_replica_groups_fit_their_card_on_a_laptop(page_at, owner, width):
    """Each group's role, count, GPUs, CPU, memory and its remove button show without scrolling the table
    sideways: at 1024 px the remove buttons sat past the card's edge."""
    page = sign_in(page_at({"width": width, "height": 900}), owner, "/jobs/new/")
    page.click("[data-add-replica]")
    wide, shown = page.locator("#replicas .table-wrap").evaluate("(box) => [box.scrollWidth, box.clientWidth]")
    assert wide <= shown, f"at {width}px the replica groups are {wide}px wide in a box of {shown}px"
