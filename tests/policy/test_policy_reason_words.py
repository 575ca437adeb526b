"""The words a reason puts around its numbers agree with them: "only 1 more is
free", "only 7 more are free", "none is free"."""

from __future__ import annotations

import pytest

from scheduling.policy.demand import CPU, GPU, MEMORY
from scheduling.policy.reasons import GIB, more_free

CASES = [
    pytest.param(GPU, 0, "none is free", id="No GPU left is said as none"),
    pytest.param(GPU, 1, "only 1 more is free", id="One GPU is free, singular"),
    pytest.param(GPU, 7, "only 7 more are free", id="Seven GPUs are free, plural"),
    pytest.param(CPU, 1000, "only 1 more core is free", id="One core is free, singular"),
    pytest.param(CPU, 2500, "only 2.5 more cores are free", id="Cores in part are plural"),
    pytest.param(MEMORY, 4 * GIB, "only 4 GiB more is free", id="Memory is an amount, singular"),
]


@pytest.mark.parametrize(("resource", "value", "words"), CASES)
def test_how_much_more_is_free_agrees_with_its_number(resource, value, words):
    assert more_free(resource, value) == words
