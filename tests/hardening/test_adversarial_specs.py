"""Random and adversarial specs thrown at validation and submission.

Each is accepted or refused with a message naming a field; never an unexpected
exception, and a refused spec writes nothing.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.models import Job, JobEvent
from jobs.services import IdempotencyConflict, NeverFits, job_submit
from jobs.spec import FIELDS, SpecError, parse_spec
from jobs.yaml_import import spec_from_yaml

EXAMPLES = 150 if os.environ.get("CI") else 80

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=30),
    st.sampled_from(["", "-1", "1e9", "4Gi", "500m", "NaN", "../../etc", "$(rm -rf /)", "a" * 5000, "\x00", "ℵ"]),
)  # fmt: skip
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)
replica = st.fixed_dictionaries(
    {},
    optional={"role": st.one_of(st.sampled_from(["Worker", "Chief", "PS", "Master", "Evaluator"]), values),
              "count": st.one_of(st.integers(-5, 2000), values), "gpu": st.one_of(st.integers(-3, 100), values),
              "cpu": st.one_of(st.sampled_from(["1", "250m", "-1", "1Ei", "0.0001"]), values),
              "memory": st.one_of(st.sampled_from(["1Gi", "512Mi", "-1Gi", "100Ti", "1.5"]), values),
              "extra": values},
)  # fmt: skip
specs = st.fixed_dictionaries(
    {},
    optional={
        "team": st.one_of(st.just("maps"), values), "name": st.one_of(st.from_regex(r"[a-z][a-z0-9-]{0,60}", fullmatch=True), values),
        "kind": st.one_of(st.sampled_from(["TFJob", "PyTorchJob"]), values),
        "image": st.one_of(st.sampled_from(["busybox", "tensorflow/tensorflow:2.12.0-gpu", "a b", "UPPER/case"]), values),
        "command": st.one_of(st.lists(st.text(max_size=20), max_size=5), values),
        "args": st.one_of(st.lists(st.text(max_size=20), max_size=5), values),
        "env": st.one_of(st.dictionaries(st.text(max_size=10), st.text(max_size=10), max_size=4), values),
        "tier": st.one_of(st.sampled_from(["standard", "production", "experiment", "gold"]), values),
        "max_runtime": st.one_of(st.integers(-10, 10**8), values),
        "replicas": st.one_of(st.lists(replica, max_size=4), values),
        "simulate": values,
    },
) | values  # fmt: skip


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=specs)
def test_validation_accepts_or_names_the_problem(data):
    try:
        spec = parse_spec(data, team="maps")
    except SpecError as error:
        assert error.errors and all(isinstance(k, str) and v and all(isinstance(m, str) for m in v)
                                    for k, v in error.errors.items())  # fmt: skip
        return
    assert spec.team == "maps" and spec.replicas and all(g.count >= 1 and g.gpu >= 0 for g in spec.replicas)
    assert set(data) <= FIELDS


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=specs)
def test_a_refused_spec_changes_nothing(data, maps, owner, nodes):
    before = (Job.objects.count(), JobEvent.objects.count())
    try:
        spec = parse_spec(data, team="maps")
        job, _ = job_submit(team=maps, spec=spec, owner=owner, via="property test")
    except (SpecError, NeverFits, IdempotencyConflict) as error:
        assert str(error)
        assert (Job.objects.count(), JobEvent.objects.count()) == before
        return
    assert Job.objects.filter(pk=job.pk).exists()
    Job.objects.filter(pk=job.pk).delete()


@settings(max_examples=EXAMPLES, deadline=None)
@given(text=st.text(max_size=400) | st.sampled_from([
    "a: &a [*a]", "!!python/object/apply:os.system ['true']", "{" * 500, "- " * 300, "kind: TFJob\napiVersion: x\nspec: 5",
    "apiVersion: kubeflow.org/v1\nkind: TFJob\nspec: {tfReplicaSpecs: {Worker: {template: {spec: {containers: 7}}}}}",
]))  # fmt: skip
def test_yaml_import_accepts_or_names_the_problem(text):
    try:
        data, unsupported = spec_from_yaml(text)
    except SpecError as error:
        assert error.errors
        return
    try:
        parse_spec(data, team="maps")
    except SpecError as error:
        assert error.errors
