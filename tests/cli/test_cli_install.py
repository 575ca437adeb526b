"""`gangway_cli/pyproject.toml` installs the `gangway` command alone: a wheel of the CLI, carrying
`core` inside it (`gangway_cli.shared_core`), depending on nothing, that runs where Django is not
installed (a CI runner, a training image)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]


def read_toml(path: Path) -> dict:
    return tomllib.loads(path.read_text())


def test_it_is_the_portals_command_at_the_portals_version():
    portal = read_toml(TOP / "pyproject.toml")["project"]
    cli = read_toml(TOP / "gangway_cli" / "pyproject.toml")["project"]
    assert cli["dependencies"] == []
    assert (cli["version"], cli["requires-python"], cli["scripts"]) == (
        portal["version"], portal["requires-python"], portal["scripts"])  # fmt: skip


def test_its_wheel_holds_the_cli_and_core_only_and_runs_without_site_packages(tmp_path):
    # Built from a copy, since a build writes build/ and egg-info beside the sources; its setuptools
    # comes from the package index, as when `make` installs the portal.
    for package in ("gangway_cli", "core"):
        shutil.copytree(TOP / package, tmp_path / "src" / package, ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"),
                            str(tmp_path / "src" / "gangway_cli")], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    [wheel] = (tmp_path / "dist").glob("gangway_cli-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    # `core` rides inside the CLI's package: no top-level `core` to clash with a project's own.
    assert {name.split("/")[0] for name in names if not name.startswith("gangway_cli-")} == {"gangway_cli"}
    assert "gangway_cli/signals.py" in names and "gangway_cli/shared_core/durations.py" in names
    metadata = next(name for name in names if name.endswith(".dist-info/METADATA"))
    assert "Requires-Dist" not in zipfile.ZipFile(wheel).read(metadata).decode()

    # -S: no site-packages, so no Django; run from elsewhere, so not from this checkout.
    shown = subprocess.run([sys.executable, "-S", "-m", "gangway_cli.main", "--help"], capture_output=True, text=True,
                           cwd=tmp_path, env={"PYTHONPATH": str(wheel)}, timeout=60)  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert "143  terminated" in shown.stdout

    # A training image's own `core` package, first on the path, neither hides the CLI's nor is replaced.
    (tmp_path / "project" / "core").mkdir(parents=True)
    (tmp_path / "project" / "core" / "__init__.py").write_text("MINE = True\n")
    read = subprocess.run([sys.executable, "-S", "-c", "import core, gangway_cli.follow as f; "
                           "print(core.MINE, f.duration.__module__, f.duration(5400))"], capture_output=True,
                          text=True, cwd=tmp_path, env={"PYTHONPATH": f"{tmp_path / 'project'}:{wheel}"},
                          timeout=60)  # fmt: skip
    assert read.returncode == 0, read.stderr
    assert read.stdout.split(" ", 2)[:2] == ["True", "gangway_cli.shared_core.durations"]
