"""The shared core sits at the bottom of the import graph: it imports only the standard library."""

import sys
from pathlib import Path

import core
from tests.policy.test_policy_imports import _imports

CORE = Path(core.__file__).parent


def test_it_imports_only_the_standard_library():
    allowed = set(sys.stdlib_module_names) | {"__future__"}
    for path in sorted(CORE.glob("*.py")):
        for name in _imports(path):
            assert name.split(".")[0] in allowed, f"{path.name} imports {name}"
