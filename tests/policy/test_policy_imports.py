"""scheduling/policy imports only the standard library and the shared core beneath it, which
imports only the standard library itself (tests/core)."""

import ast
import sys
from pathlib import Path

import scheduling.policy

POLICY = Path(scheduling.policy.__file__).parent


def _imports(path: Path):
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.module


def test_it_imports_only_the_standard_library_and_the_core():
    allowed = set(sys.stdlib_module_names) | {"__future__", "core"}
    for path in sorted(POLICY.glob("*.py")):
        for name in _imports(path):
            top = name.split(".")[0]
            assert top in allowed, f"{path.name} imports {name}"


def test_it_would_catch_a_django_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from django.db import models\nimport kubernetes\n")
    tops = {name.split(".")[0] for name in _imports(bad)}
    assert tops - set(sys.stdlib_module_names) == {"django", "kubernetes"}
