"""Reason codes are named, never spelled: no bare string is given as, or compared with, a code."""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [p for folder in ("jobs", "scheduling", "tenants", "portal", "notifications") for p in (ROOT / folder).rglob("*.py")
           if "migrations" not in p.parts and p.name != "schema_examples.py"]
CODE_NAMES = {"code", "reason_code"}


def _bare_codes(tree: ast.AST):
    """Yields (line, text) of string constants passed as code=/reason_code= or compared with `.code`/`.reason_code`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in CODE_NAMES:
            if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str) and node.value.value:
                yield node.value.lineno, node.value.value
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(isinstance(s, ast.Attribute) and s.attr in CODE_NAMES for s in sides):
                for s in sides:
                    if isinstance(s, ast.Constant) and isinstance(s.value, str) and s.value:
                        yield s.lineno, s.value


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_spells_a_reason_code(path):
    assert list(_bare_codes(ast.parse(path.read_text()))) == []


def test_no_template_compares_a_reason_code_with_a_string():
    for path in (ROOT / "templates").rglob("*.html"):
        assert not re.search(r"(reason_)?code\s*==\s*[\"']", path.read_text()), path


def test_it_would_catch_a_spelled_code():
    tree = ast.parse('transition(job, code="reclaimed")\nif job.reason_code == "backoff": pass\n')
    assert sorted(text for _, text in _bare_codes(tree)) == ["backoff", "reclaimed"]
