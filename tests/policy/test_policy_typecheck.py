"""scheduling/policy type-checks cleanly under mypy (the [tool.mypy] settings in pyproject.toml)."""

from pathlib import Path

from mypy import api

ROOT = Path(__file__).resolve().parent.parent.parent


def test_the_policy_type_checks_cleanly(monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)  # mypy reads pyproject.toml and finds `core` from the project root
    out, err, status = api.run(["--cache-dir", str(tmp_path), "scheduling/policy"])
    assert status == 0, out + err
