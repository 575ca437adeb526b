"""Where a job from elsewhere came from, as its `submitted_via` spells it: one home for the spelling that
adoption writes (`scheduling.cluster.outside.origin`) and the job page and the submit form read.

Standard library only: the cluster adapters import it as well as the apps.
"""

from __future__ import annotations

PIPELINES_RUN = "pipelines run"  # "pipelines run nightly": a step a Kubeflow Pipelines run created


def pipelines_run(via: str) -> str:
    """Returns the Kubeflow Pipelines run a job's `submitted_via` names ("" when it names none)."""
    prefix = f"{PIPELINES_RUN} "
    return via[len(prefix):] if via.startswith(prefix) else ""
