"""A job's manifest, built by its kind's layout: the one place that picks a builder.

Each layout (`jobs.kinds.Layout`) has a builder of the object Gangway creates,
the merge patch that resumes it once suspended, and a reader of the replicas
a built manifest asks for (the simulated cluster runs those). Everything else
a layout differs in (the suspend flag's path, conditions, pod labels) is data
in the kind's registry entry. Pure functions: dicts in, dicts out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from jobs import kinds
from scheduling.cluster import manifests, trainjob_manifests
from scheduling.cluster.base import ClusterJob


@dataclass(frozen=True, slots=True)
class LayoutBuilder:
    build: Callable[[ClusterJob], dict]
    resume: Callable[[ClusterJob], dict]  # the merge patch that resumes a suspended job
    replicas: Callable[[dict], list[tuple[str, int, dict]]]  # (role, count, container limits) of a built manifest
    terms: Callable[[dict], list[list[dict]]]  # each group's required node affinity terms, in `replicas` order


BUILDERS = {
    kinds.Layout.REPLICA_SPECS: LayoutBuilder(
        manifests.training_job, manifests.training_job_resume, manifests.training_job_replicas,
        manifests.training_job_terms,
    ),
    kinds.Layout.TRAINER: LayoutBuilder(
        trainjob_manifests.train_job, trainjob_manifests.train_job_resume, trainjob_manifests.train_job_replicas,
        trainjob_manifests.train_job_terms,
    ),
}


def _builder(kind: kinds.JobKind) -> LayoutBuilder:
    return BUILDERS[kind.layout]


def job_manifest(job: ClusterJob) -> dict:
    """Returns the object Gangway creates for the job, as its kind is shaped."""
    return _builder(kinds.get(job.kind)).build(job)


def resume_patch(job: ClusterJob) -> dict:
    """Returns the merge patch that resumes the job once suspended, its mark of Gangway's suspend removed."""
    patch = _builder(kinds.get(job.kind)).resume(job)
    patch.setdefault("metadata", {}).setdefault("annotations", {})[manifests.SUSPENDED_BY_ANNOTATION] = None
    return patch


def suspend_patch(kind: kinds.JobKind) -> dict:
    """Returns the merge patch that suspends a job of this kind: its suspend flag set, and marked as Gangway's
    suspend (`manifests.SUSPENDED_BY_ANNOTATION`), which an owner's own suspend of an adopted job is not."""
    patch: dict = {"metadata": {"annotations": {manifests.SUSPENDED_BY_ANNOTATION: "gangway"}}}
    node = patch
    *parents, last = kind.suspend
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = True
    return patch


def is_suspended(kind: kinds.JobKind, obj: dict) -> bool:
    """Returns whether a job object of this kind asks to be suspended."""
    value: object = obj
    for key in kind.suspend:
        value = value.get(key) if isinstance(value, dict) else None
    return bool(value)


def replica_needs(manifest: dict) -> list[tuple[str, int, dict]]:
    """Returns (role, count, container limits) of each replica group of a built manifest, in its order."""
    return _builder(kinds.get(manifest["kind"])).replicas(manifest)


def replica_terms(manifest: dict) -> list[list[dict]]:
    """Returns the required node affinity terms of each replica group of a built manifest, in `replica_needs`
    order; a group with none ([]) may go on any node."""
    return _builder(kinds.get(manifest["kind"])).terms(manifest)
