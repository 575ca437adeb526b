"""The spec's `gpu_type`: one name or a list in order of preference, checked like every other field."""

from __future__ import annotations

import pytest

from jobs.services import spec_digest
from jobs.spec import MAX_GPU_TYPES, SpecError, parse_spec, spec_to_data
from tests.conftest import spec_data


def errors_of(data) -> dict:
    with pytest.raises(SpecError) as error:
        parse_spec(data)
    return error.value.errors


@pytest.mark.parametrize(("given", "read"), [
    (None, ()), ("", ()), ([], ()), ("a100", ("a100",)), (["h100", "a100"], ("h100", "a100")),
])  # fmt: skip
def test_it_reads_a_name_a_preference_list_or_nothing(given, read):
    data = spec_data() if given is None else spec_data(gpu_type=given)
    assert parse_spec(data).gpu_type == read


@pytest.mark.parametrize(("given", "field", "fragment"), [
    ("A100", "gpu_type", "Must be a GPU type name"),
    (["a100", "Bad_Name"], "gpu_type[1]", "got 'Bad_Name'"),
    (["a100", 7], "gpu_type[1]", "got 7"),
    (["a100", "l4", "a100"], "gpu_type[2]", "GPU type a100 is named twice"),
    ({"a100": 1}, "gpu_type", "a list of at most 8 names"),
    ([f"t{i}" for i in range(MAX_GPU_TYPES + 1)], "gpu_type", f"at most {MAX_GPU_TYPES} names"),
    ("x" * 64, "gpu_type", "Must be a GPU type name"),
])  # fmt: skip
def test_it_refuses_bad_gpu_types_naming_the_field(given, field, fragment):
    errors = errors_of(spec_data(gpu_type=given))
    assert fragment in " ".join(errors[field]), errors


def test_it_refuses_a_gpu_type_on_a_job_without_gpus():
    errors = errors_of(spec_data(gpu_type="a100", replicas=[{"role": "Worker", "count": 2, "gpu": 0}]))
    assert errors == {"gpu_type": ["This job asks for no GPUs, so it runs on any node; name a GPU type only "
                                   "when a replica asks for GPUs."]}  # fmt: skip


def test_the_preference_order_is_part_of_the_spec_and_its_digest():
    plain, first, swapped = (parse_spec(spec_data(**extra)) for extra in
                             ({}, {"gpu_type": ["a100", "l4"]}, {"gpu_type": ["l4", "a100"]}))  # fmt: skip
    assert spec_to_data(first)["gpu_type"] == ["a100", "l4"]
    assert len({spec_digest(plain), spec_digest(first), spec_digest(swapped)}) == 3


def test_a_spec_without_gpu_types_keeps_its_json_shape_and_digest():
    spec = parse_spec(spec_data())
    assert "gpu_type" not in spec_to_data(spec)
    assert spec_digest(spec) == spec_digest(parse_spec(spec_data(gpu_type=[])))


def test_a_name_given_alone_reads_as_a_list_of_one():
    assert spec_to_data(parse_spec(spec_data(gpu_type="l4")))["gpu_type"] == ["l4"]
    assert parse_spec(spec_to_data(parse_spec(spec_data(gpu_type="l4")))).gpu_type == ("l4",)
