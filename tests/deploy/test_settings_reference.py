"""The settings reference, the code that reads the variables and the README never drift apart."""

import ast
import re
from pathlib import Path

from django.core.management import call_command

from portal.settings_reference import APP, BY_NAME, COMPUTED, SETTINGS, markdown_table

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("portal", "jobs", "scheduling", "tenants", "notifications")
READERS = {"text", "flag", "integer", "number", "choice", "items"}
NOT_SETTINGS = {"portal/test_settings.py"}  # the test suite's own defaults


def reads() -> dict[str, list[object]]:
    """Returns each variable the application reads, with the default of each read (COMPUTED when not a literal)."""
    found: dict[str, list[object]] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if str(path.relative_to(ROOT)) in NOT_SETTINGS:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                name, default = _read(node)
                if name:
                    found.setdefault(name, []).append(default)
    return found


def _read(node) -> tuple[str | None, object]:
    """Returns (variable, default) for `env.<reader>("NAME", default)` and `os.environ.get("NAME", default)`."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args):
        return None, None
    func, first = node.func, node.args[0]
    is_env = isinstance(func.value, ast.Name) and func.value.id == "env" and func.attr in READERS
    is_environ = func.attr == "get" and ast.unparse(func.value) == "os.environ"
    if not (is_env or is_environ) or not isinstance(first, ast.Constant):
        return None, None
    default = node.args[1] if len(node.args) > 1 else None
    return first.value, default.value if isinstance(default, ast.Constant) else COMPUTED


def test_every_variable_the_code_reads_is_declared_with_the_default_the_code_uses():
    found = reads()

    assert sorted(set(found) - set(BY_NAME)) == [], "declare these in portal/settings_reference.py"
    for name, defaults in found.items():
        for default in defaults:
            assert BY_NAME[name].value is default or BY_NAME[name].value == default, (
                f"{name}: the code's default is {default!r}, the reference says {BY_NAME[name].value!r}"
            )


def test_every_declared_application_variable_is_read_somewhere():
    declared = {setting.name for setting in SETTINGS if setting.read_by == APP}

    assert sorted(declared - set(reads())) == []


def test_the_readme_shows_exactly_the_generated_table():
    readme = (ROOT / "README.md").read_text()
    match = re.search(r"<!-- settings:start -->\n(.*?)<!-- settings:end -->", readme, re.S)

    assert match, "README.md lacks the settings markers"
    assert match.group(1) == markdown_table(), "run: python manage.py settings_reference, and paste it into README.md"


def test_the_command_prints_the_table(capsys):
    call_command("settings_reference")

    assert capsys.readouterr().out == markdown_table()


def test_names_are_unique_and_every_row_says_something():
    assert len(BY_NAME) == len(SETTINGS)
    for setting in SETTINGS:
        assert re.fullmatch(r"[A-Z][A-Z0-9_]+", setting.name)
        assert setting.default and setting.meaning.endswith(".")
        assert "|" not in setting.meaning + setting.default


def test_the_image_reads_the_container_variables_it_declares():
    image = (ROOT / "deploy" / "entrypoint.sh").read_text() + (ROOT / "deploy" / "gunicorn.conf.py").read_text()
    for setting in SETTINGS:
        if setting.read_by != APP:
            assert setting.name in image, f"{setting.name} is declared for the image but neither file reads it"


def test_every_variable_in_the_example_env_file_is_declared():
    lines = (ROOT / ".env.example").read_text().splitlines()
    names = {line.split("=", 1)[0] for line in lines if line and not line.startswith("#")}

    assert sorted(names - set(BY_NAME) - {"POSTGRES_PASSWORD"}) == []
