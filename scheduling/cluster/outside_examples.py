"""Jobs as kubectl and Katib create them, for the simulated cluster (`manage.py simulate_outside`) and tests.

Pure builders: each returns the object the other tool would send to the API server, created
suspended with the queue label, as the admission policy requires in a team namespace.
"""

from __future__ import annotations

from jobs import kinds
from scheduling.cluster import outside

IMAGE = "pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime"


def training_object(*, kind: str, name: str, team: str, workers: int, gpu: int, labels: dict | None = None,
                    annotations: dict | None = None, owner: dict | None = None, manager: str = "kubectl-create",
                    args: tuple[str, ...] = ()) -> dict:  # fmt: skip
    """Returns a suspended TFJob or PyTorchJob of `workers` replicas of `gpu` GPUs, labelled for `team`'s queue."""
    training = kinds.get(kind)
    container: dict = {"name": training.container, "image": IMAGE, "command": ["python", "/app/train.py"],
                       "resources": {"limits": {"nvidia.com/gpu": gpu, "cpu": "4", "memory": "16Gi"}}}  # fmt: skip
    if args:
        container["args"] = list(args)
    meta: dict = {"name": name, "namespace": team, "labels": {outside.QUEUE_LABEL: team, **(labels or {})},
                  "managedFields": [{"manager": manager, "operation": "Update"}]}  # fmt: skip
    if annotations:
        meta["annotations"] = dict(annotations)
    if owner:
        meta["ownerReferences"] = [owner]
    return {
        "apiVersion": training.api_version, "kind": kind, "metadata": meta,
        "spec": {"runPolicy": {"suspend": True}, training.replica_specs: {
            "Worker": {"replicas": workers, "template": {"spec": {"containers": [container]}}}}},
    }  # fmt: skip


def kubectl_job(*, team: str, name: str, user: str, workers: int = 2, gpu: int = 1) -> dict:
    """Returns a TFJob as `kubectl create -f` sends it, with the creator annotation."""
    return training_object(kind="TFJob", name=name, team=team, workers=workers, gpu=gpu,
                           annotations={outside.CREATOR_ANNOTATION: user})  # fmt: skip


def katib_trials(*, team: str, experiment: str, trials: int, gpu: int = 2) -> list[dict]:
    """Returns the PyTorchJobs Katib's trial controller creates for `trials` trials of an experiment.

    Each is owned by its Trial (`<experiment>-<suffix>`, as Katib names them) and carries the
    experiment and trial labels a trial template can set; learning rates differ per trial.
    """
    result = []
    for index in range(trials):
        trial = f"{experiment}-t{index:03d}"
        owner = {"apiVersion": f"{outside.KATIB_GROUP}/{outside.KATIB_VERSION}", "kind": "Trial", "name": trial,
                 "controller": True}  # fmt: skip
        labels = {outside.KATIB_EXPERIMENT_LABEL: experiment, outside.KATIB_TRIAL_LABEL: trial}
        result.append(training_object(
            kind="PyTorchJob", name=trial, team=team, workers=1, gpu=gpu, labels=labels, owner=owner,
            manager="katib-controller", args=(f"--lr={0.001 * (index + 1):.3f}",),
        ))  # fmt: skip
    return result
