"""The policy compiled with mypyc (scheduling/policy/native.py): loaded only when
its build matches the sources, run in CI, and planning exactly as the
interpreted policy does."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from scheduling.policy import native
from tests.policy import native_plans

ROOT = Path(__file__).resolve().parents[2]
SUFFIX = str(sysconfig.get_config_var("EXT_SUFFIX"))
WANTED = os.environ.get("GANGWAY_POLICY", "") != "python"


def test_ci_runs_the_compiled_policy():
    """`make test` builds the policy before the tests, so in CI every test but
    those that watch the policy's insides runs the compiled policy."""
    if os.environ.get("CI") != "true" or not WANTED:
        pytest.skip("only CI must run the compiled policy (make policy builds it)")
    assert native.LOADED, native.REASON
    import scheduling.policy.cycle as cycle
    assert cycle.__file__.endswith(SUFFIX)


def test_the_compiled_and_the_interpreted_policy_plan_alike():
    """824 plans, with and without estimated starts: 300 small random
    snapshots (a third with cordoned nodes), 100 on clusters of GPU types,
    and the policy bench's busy cluster at two sizes, two queue ages, both
    guards and with types. The interpreted ones are made in another process."""
    if not native.LOADED:
        pytest.skip(f"the compiled policy is not loaded here ({native.REASON})")
    done = subprocess.run(
        [sys.executable, "-m", "tests.policy.native_plans"], cwd=ROOT, check=True,
        capture_output=True, text=True, env={**os.environ, "GANGWAY_POLICY": "python"})
    interpreted = json.loads(done.stdout)
    assert interpreted["compiled"] is False
    compiled = native_plans.digests()
    assert len(compiled) == 2 * len(native_plans.cases()) == 824
    differ = [name for name, digest in compiled.items() if interpreted["plans"][name] != digest]
    assert not differ, f"{len(differ)} plans differ, the first: {differ[:5]}"


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A copy of the policy's sources for the loader to read, builds kept in
    tmp_path/builds, and the loader's state put back afterwards."""
    copy = tmp_path / "policy"
    shutil.copytree(native.PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(native, "PACKAGE", copy)
    monkeypatch.setenv("GANGWAY_NATIVE_DIR", str(tmp_path / "builds"))
    monkeypatch.delenv("GANGWAY_POLICY", raising=False)
    monkeypatch.setattr(native, "REASON", native.REASON)
    monkeypatch.setattr(native, "LOADED", native.LOADED)
    return copy


def _fake_build(where: Path, library: bytes = b"not a shared library") -> None:
    (where / "scheduling" / "policy").mkdir(parents=True)
    for source in native.sources():
        (where / "scheduling" / "policy" / f"{source.stem}{SUFFIX}").write_bytes(b"")
    (where / f"0123456789abcdef0123__mypyc{SUFFIX}").write_bytes(library)


def test_the_digest_follows_every_compiled_source_and_nothing_else(package):
    before = native.digest()
    (package / "__init__.py").write_text("# the loader, never compiled\n")
    (package / "native.py").write_text("# nor this\n")
    assert native.digest() == before
    lines = package / "lines.py"
    lines.write_text(lines.read_text() + "\n# one more line\n")
    edited = native.digest()
    assert edited != before
    (package / "new_rule.py").write_text("RULE = 15\n")
    assert native.digest() not in (before, edited)
    assert "new_rule.py" in [p.name for p in native.sources()]


def test_without_a_matching_build_the_policy_runs_interpreted(package, tmp_path):
    path: list[str] = []
    assert native.load(path) is False
    assert path == [] and not native.LOADED
    assert "no build matches the sources" in native.REASON
    # A build of the sources before an edit is never loaded.
    _fake_build(tmp_path / "builds" / native.digest())
    (package / "room.py").write_text((package / "room.py").read_text() + "\n# edited\n")
    assert native.load(path) is False and path == []
    assert "no build matches" in native.REASON


def test_a_build_missing_a_module_is_not_loaded(package, tmp_path):
    where = tmp_path / "builds" / native.digest()
    _fake_build(where)
    (where / "scheduling" / "policy" / f"quota{SUFFIX}").unlink()
    path: list[str] = []
    assert native.load(path) is False and path == []


def test_a_build_that_does_not_load_leaves_the_policy_interpreted(package, tmp_path):
    _fake_build(tmp_path / "builds" / native.digest())
    path: list[str] = []
    assert native.load(path) is False
    assert path == [] and not native.LOADED
    assert "does not load" in native.REASON


def test_asked_for_the_interpreted_policy_it_loads_no_build(package, tmp_path, monkeypatch):
    _fake_build(tmp_path / "builds" / native.digest())
    monkeypatch.setenv("GANGWAY_POLICY", "python")
    path: list[str] = []
    assert native.load(path) is False and path == []
    assert native.REASON == "interpreted: GANGWAY_POLICY=python"


def test_a_matching_build_goes_first_on_the_package_path(package, tmp_path):
    """sys.path is left as it is: mypyc's shared library, when there is one,
    is loaded by the loader itself (the failing case above shows it tried)."""
    where = tmp_path / "builds" / native.digest()
    _fake_build(where)
    next(where.glob(f"*__mypyc{SUFFIX}")).unlink()
    path = ["sources"]
    path_before = list(sys.path)
    assert native.load(path) is True
    assert path == [str(where / "scheduling" / "policy"), "sources"]
    assert native.LOADED and str(where) in native.REASON
    assert sys.path == path_before


def test_the_command_says_which_policy_runs():
    done = subprocess.run([sys.executable, "-m", "scheduling.policy", "status"], cwd=ROOT,
                          capture_output=True, text=True, check=True,
                          env={**os.environ, "GANGWAY_POLICY": "python"})
    assert done.stdout == "Policy: interpreted: GANGWAY_POLICY=python.\n"
    assert done.stderr == ""
    helped = subprocess.run([sys.executable, "-m", "scheduling.policy", "--help"], cwd=ROOT,
                            capture_output=True, text=True, check=True)
    assert "build" in helped.stdout and "status" in helped.stdout


# Calls that read a generator expression whole anyway, so mypyc's reading it
# as a list first changes nothing.
READ_WHOLE = {"all", "any", "dict", "extend", "frozenset", "fromkeys", "join", "list", "max", "min",
              "next", "set", "sorted", "sum", "tuple", "union", "update"}


def _lazy_generator_expressions(source: str) -> list[int]:
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    lazy = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.GeneratorExp):
            continue
        parent = parents.get(node)
        if isinstance(parent, ast.Call) and node in parent.args:
            func = parent.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name in READ_WHOLE:
                continue
        if isinstance(parent, ast.Starred):  # f(*(... for ...)): read whole to make the call
            continue
        if isinstance(parent, ast.Assign) and isinstance(parent.targets[0], ast.Tuple):
            continue  # a, b = (... for ...): read whole to unpack
        lazy.append(node.lineno)
    return lazy


def test_no_generator_expression_in_the_policy_is_read_lazily():
    """mypyc reads a generator expression whole, as a list, before anything
    reads from it: one the policy read only in part (the replay's ends once
    were) would cost the whole read when compiled. A generator function keeps
    it lazy."""
    found = {path.name: lines for path in native.sources()
             if (lines := _lazy_generator_expressions(path.read_text()))}
    assert found == {}


def test_it_would_catch_a_generator_expression_read_in_part():
    source = ("import heapq\n"
              "ends = ((e, n) for e, k, n in heap if k == 0)\n"
              "first = heapq.merge(ends, [])\n"
              "total = sum(x for x in ends)\n"
              "a, b = (x for x in (1, 2))\n")
    assert _lazy_generator_expressions(source) == [2]


def test_a_build_whose_modules_do_not_load_leaves_the_policy_interpreted(tmp_path):
    """A build of these very sources whose modules fail to import (here, no
    shared library and empty files) is taken off the package's path, and the
    policy is imported from its sources: it plans."""
    _fake_build(tmp_path / native.digest())
    next((tmp_path / native.digest()).glob(f"*__mypyc{SUFFIX}")).unlink()
    code = ("from scheduling.policy import native, plan\n"
            "import scheduling.policy.cycle as cycle\n"
            "print(native.REASON)\n"
            "print(cycle.__file__)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "GANGWAY_NATIVE_DIR": str(tmp_path), "GANGWAY_POLICY": ""})
    assert done.returncode == 0, done.stderr
    reason, source = done.stdout.splitlines()
    assert reason.startswith(f"interpreted: the build in {tmp_path / native.digest()} does not load")
    assert source == str(ROOT / "scheduling" / "policy" / "cycle.py")


def _fake_mypyc(args, cwd, **kwargs):
    """Stands in for mypyc's minute: every module named "compiled" (empty files)."""
    cwd = Path(cwd)
    for name in args[3:]:
        (cwd / name).with_suffix("").with_suffix(SUFFIX).write_bytes(b"")
    (cwd / f"0123456789abcdef0123__mypyc{SUFFIX}").write_bytes(b"")
    return subprocess.CompletedProcess(args, 0, "", "")


def test_a_build_replaces_an_incomplete_folder_of_the_same_digest(package, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(native.subprocess, "run", _fake_mypyc)
    target = tmp_path / "builds" / native.digest()
    (target / "scheduling" / "policy").mkdir(parents=True)
    (target / "scheduling" / "policy" / f"room{SUFFIX}").write_bytes(b"")  # the rest deleted since

    assert native.build() == target
    assert native._complete(target)
    assert capsys.readouterr().out.startswith(f"Compiling {len(native.sources())} policy modules")
    assert native.build() == target  # and then it is up to date
    assert capsys.readouterr().out == f"The compiled policy is up to date: {target}\n"
    assert [p.name for p in (tmp_path / "builds").iterdir()] == [target.name]  # nothing left behind


def test_a_build_removes_the_working_folders_of_builds_killed_mid_way(package, tmp_path,
                                                                     monkeypatch):
    monkeypatch.setattr(native.subprocess, "run", _fake_mypyc)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    builds = tmp_path / "builds"
    try:
        old = time.time() - native.LEFT_AFTER - 60
        for name in (f".work-0123-{gone.pid}", f".out-0123-{gone.pid}", f".work-4567-{alive.pid}",
                     ".work-notapid", f".work-89ab-{gone.pid}", f".work-cdef-{10 ** 30}"):
            (builds / name / "scheduling").mkdir(parents=True)
            if name != f".work-89ab-{gone.pid}":  # that one changed a moment ago: left alone
                os.utime(builds / name, (old, old))
        target = native.build(quiet=True)
        assert sorted(p.name for p in builds.iterdir()) == sorted(
            [target.name, f".work-4567-{alive.pid}", ".work-notapid", f".work-89ab-{gone.pid}",
             f".work-cdef-{10 ** 30}"])
    finally:
        alive.kill()
        alive.wait()


def test_a_build_is_keyed_by_the_sources_it_compiled(package, tmp_path, monkeypatch):
    """Sources edited while mypyc runs get a build of their own, never the old key."""
    before = native.digest()

    def edited_meanwhile(args, cwd, **kwargs):
        lines = package / "lines.py"
        lines.write_text(lines.read_text() + "\n# edited during the build\n")
        return _fake_mypyc(args, cwd, **kwargs)

    monkeypatch.setattr(native.subprocess, "run", edited_meanwhile)
    assert native.build().name == before  # the copy taken before the edit is what was compiled
    assert native.digest() != before  # and the edited sources have no build: they run interpreted


def test_a_relative_builds_folder_is_read_from_the_project(monkeypatch):
    monkeypatch.setenv("GANGWAY_NATIVE_DIR", "build/elsewhere")
    assert native.builds() == ROOT / "build" / "elsewhere"
    monkeypatch.setenv("GANGWAY_NATIVE_DIR", "/opt/gangway/native")
    assert native.builds() == Path("/opt/gangway/native")


def test_a_builds_folder_that_cannot_be_made_is_said_plainly(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    done = subprocess.run([sys.executable, "-m", "scheduling.policy", "build"], cwd=ROOT,
                          capture_output=True, text=True,
                          env={**os.environ, "GANGWAY_NATIVE_DIR": str(blocker / "builds")})
    assert done.returncode == 1
    assert done.stderr.startswith(f"The policy could not be built in {blocker / 'builds'}: ")
    assert "Traceback" not in done.stderr
