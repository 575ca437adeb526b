"""The job kinds Gangway runs, in one registry: what every form, check, import, builder and adapter reads.

A kind says how its operator spells it (API group, version, plural, the spec
key holding its replica groups, the container it looks for), which replica
roles it has and in what order, where its suspend flag and deadline sit,
which status conditions mean what, and how its pods are labelled. Nothing
else in Gangway names a kind: consumers look one up by name (`get`) or walk
them all (`all_kinds`) when they need them, never at import time, so a kind
registered here (or by a test, with `registered`) is offered, checked,
imported, built and read back everywhere at once.

This module imports only the standard library: the policy never needs it,
and everything above it may read it.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Iterator
from dataclasses import dataclass


class Layout(enum.StrEnum):
    """How a kind's manifest is shaped; one manifest builder and one manifest reader per layout."""

    # Training Operator v1: spec.<replica_specs>.<Role>.template, spec.runPolicy (suspend, schedulingPolicy).
    REPLICA_SPECS = "replica_specs"
    # Kubeflow Trainer v2: spec.runtimeRef, spec.trainer (numNodes, resourcesPerNode), spec.runtimePatches.
    TRAINER = "trainer"


@dataclass(frozen=True, slots=True)
class Role:
    name: str
    singleton: bool = False  # exactly one replica (a TFJob's Chief, a PyTorchJob's Master)


@dataclass(frozen=True, slots=True)
class JobKind:
    """One job kind, as its operator spells it and as Gangway treats it."""

    name: str  # the manifest's `kind`, and Job.kind
    group: str
    version: str
    plural: str
    layout: Layout
    roles: tuple[Role, ...]  # in the order manifests list them
    container: str  # the container name the operator looks for (ports, env)
    operator: str  # what installs its CRD, for doctor's advice
    replica_specs: str = ""  # REPLICA_SPECS: the spec field holding role -> ReplicaSpec
    suspend: tuple[str, ...] = ("spec", "runPolicy", "suspend")  # path of the suspend flag
    # True status conditions -> the phase they mean (a `scheduling.cluster.base.Phase` value), most decisive first.
    conditions: tuple[tuple[str, str], ...] = (
        ("Failed", "Failed"), ("Succeeded", "Succeeded"), ("Suspended", "Suspended"),
        ("Restarting", "Restarting"), ("Running", "Running"), ("Created", "Created"),
    )  # fmt: skip
    # Labels the operator puts on each replica pod: its role and its index within the role.
    pod_role_label: str = "training.kubeflow.org/replica-type"
    pod_index_label: str = "training.kubeflow.org/replica-index"
    extra_crds: tuple[str, ...] = ()  # other CustomResourceDefinitions its jobs need
    # The kind of runtime its jobs run on (the spec's `runtime` names one), or "" when they name none; its
    # cluster-wide plural in the kind's group and version, and the field a runtime needs for Volcano's gangs.
    runtime_kind: str = ""
    runtime_plural: str = ""
    runtime_gang: tuple[str, ...] = ()
    # An elastic job of the kind trains on with fewer replicas of one role than it asks for, down to the fewest
    # its policy names (a PyTorchJob's elasticPolicy, torchrun's --nnodes=min:max): where that policy sits and
    # the role it scales; () for a kind whose jobs are never elastic. Only adopted jobs carry one: the submission
    # builds none, and lists it back on import.
    elastic_policy: tuple[str, ...] = ()
    elastic_role: str = ""
    # Its replicas are `num_nodes` identical nodes of its one role: the spec may say num_nodes and resources_per_node.
    nodes: bool = False
    # Its object names must start with a letter (RFC 1035), not only be DNS labels.
    letter_first: bool = False
    # Its operator keeps a Failed condition Gangway writes in a job's status: the Training Operator leaves a
    # finished job's status as it is. A job from elsewhere of such a kind that Gangway refuses, or that a person
    # cancels in Gangway, is marked so, and whatever waits on it (a Katib trial holding one of its experiment's
    # parallel places, a Pipelines step, `kubectl wait`) sees it end. Kubeflow Trainer works a TrainJob's
    # status out again from its JobSet, so a condition written there would be lost.
    keeps_written_failure: bool = False
    example_image: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def crd(self) -> str:
        """The name of its CustomResourceDefinition: "tfjobs.kubeflow.org"."""
        return f"{self.plural}.{self.group}"

    @property
    def crds(self) -> tuple[str, ...]:
        return (self.crd, *self.extra_crds)

    @property
    def role_names(self) -> tuple[str, ...]:
        return tuple(role.name for role in self.roles)

    @property
    def singleton_roles(self) -> frozenset[str]:
        return frozenset(role.name for role in self.roles if role.singleton)

    @property
    def default_role(self) -> str:
        """The role a replica group without one gets: Worker where the kind has it, else its only role."""
        return "Worker" if "Worker" in self.role_names else self.roles[-1].name


TRAINING_OPERATOR = "the Kubeflow Training Operator"

_BUILT_IN = (
    JobKind(
        name="TFJob", group="kubeflow.org", version="v1", plural="tfjobs", layout=Layout.REPLICA_SPECS,
        roles=(Role("Chief", singleton=True), Role("Master", singleton=True), Role("PS"), Role("Worker"),
               Role("Evaluator", singleton=True)),
        container="tensorflow", operator=TRAINING_OPERATOR, replica_specs="tfReplicaSpecs",
        keeps_written_failure=True, example_image="tensorflow/tensorflow:2.12.0-gpu",
    ),
    JobKind(
        name="PyTorchJob", group="kubeflow.org", version="v1", plural="pytorchjobs", layout=Layout.REPLICA_SPECS,
        roles=(Role("Master", singleton=True), Role("Worker")),
        container="pytorch", operator=TRAINING_OPERATOR, replica_specs="pytorchReplicaSpecs",
        elastic_policy=("spec", "elasticPolicy"), elastic_role="Worker", keeps_written_failure=True,
        example_image="pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
    ),
    # Kubeflow Trainer v2, the Training Operator's successor (trainer `pkg/apis/trainer/v1alpha1`): a TrainJob
    # runs numNodes nodes on a ClusterTrainingRuntime; its conditions are Suspended, Complete and Failed (no
    # Running: it runs once its pods do); its pods are a JobSet's, labelled with the replicated job and index.
    JobKind(
        name="TrainJob", group="trainer.kubeflow.org", version="v1alpha1", plural="trainjobs", layout=Layout.TRAINER,
        roles=(Role("Node"),), container="node", operator="Kubeflow Trainer v2",
        suspend=("spec", "suspend"),
        conditions=(("Failed", "Failed"), ("Complete", "Succeeded"), ("Suspended", "Suspended")),
        pod_role_label="jobset.sigs.k8s.io/replicatedjob-name", pod_index_label="batch.kubernetes.io/job-completion-index",
        extra_crds=("clustertrainingruntimes.trainer.kubeflow.org",), runtime_kind="ClusterTrainingRuntime",
        runtime_plural="clustertrainingruntimes", runtime_gang=("spec", "podGroupPolicy", "volcano"),
        nodes=True, letter_first=True, example_image="pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
    ),
)  # fmt: skip

_registry: dict[str, JobKind] = {kind.name: kind for kind in _BUILT_IN}


class UnknownKind(LookupError):
    """A name no registered kind has."""


def all_kinds() -> tuple[JobKind, ...]:
    """Every registered kind, in the order they were registered (the built-in ones first)."""
    return tuple(_registry.values())


def names() -> tuple[str, ...]:
    return tuple(_registry)


def get(name: str) -> JobKind:
    """The kind of that name; raises UnknownKind for any other."""
    try:
        return _registry[name]
    except (KeyError, TypeError):
        raise UnknownKind(f"Unknown job kind {name!r}; the kinds are {', '.join(_registry)}.") from None


def find(name: object) -> JobKind | None:
    """The kind of that name, or None when there is none (a manifest of something else)."""
    return _registry.get(name) if isinstance(name, str) else None


def default() -> JobKind:
    """The kind a spec that names none gets: the first registered (TFJob)."""
    return next(iter(_registry.values()))


def choices() -> list[tuple[str, str]]:
    """(value, label) pairs for Job.kind and the forms; read on each use, so no migration follows a new kind."""
    return [(name, name) for name in _registry]


def all_roles() -> tuple[str, ...]:
    """Every role of every kind, each once, in the order kinds list them."""
    return tuple(dict.fromkeys(role for kind in _registry.values() for role in kind.role_names))


def most_groups() -> int:
    """The most replica groups any kind has (one per role)."""
    return max(len(kind.roles) for kind in _registry.values())


def register(kind: JobKind) -> None:
    """Adds a kind; raises ValueError when one of that name is already registered."""
    if kind.name in _registry:
        raise ValueError(f"Job kind {kind.name} is already registered.")
    _registry[kind.name] = kind


@contextlib.contextmanager
def registered(kind: JobKind) -> Iterator[JobKind]:
    """Registers `kind` for the duration of a `with` block (tests of a kind Gangway does not ship)."""
    register(kind)
    try:
        yield kind
    finally:
        _registry.pop(kind.name, None)
