"""The policy compiled to C with mypyc, loaded in place of its sources when it
matches them exactly.

The policy's modules are type-checked Python (tests/policy/test_policy_typecheck.py);
mypyc turns each into a C extension that decides exactly as the source does, with
1.6 to 1.7 times fewer instructions for a plan with estimates on a long queue (README,
"The policy at scale"). A build is keyed by a
digest of every compiled source and of the interpreter's extension suffix, and is
loaded only when that digest is the sources' own: a policy edited since its last
build runs interpreted, never stale, until it is built again.

    python -m scheduling.policy build    # compile (about a minute), or say it is up to date
    python -m scheduling.policy status   # which policy this interpreter runs, and why

Builds live in `var/native/<digest>/` (`GANGWAY_NATIVE_DIR` to put them elsewhere).
`GANGWAY_POLICY=python` runs the interpreted policy even when a build matches: the
tests that watch the policy's insides (marked `interpreted_policy`) run so.

This module is the loader and the builder (the command is `__main__.py`); it is
never compiled itself, and it imports only the standard library (the build runs
mypyc as a command).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
ROOT = PACKAGE.parent.parent  # the project's checkout
# Not compiled: the package's `__init__`, which loads the build, this module and
# the command (`__main__.py`).
LEFT_OUT = ("__init__.py", "__main__.py", "native.py")


def sources(package: Path | None = None) -> list[Path]:
    """Returns the policy's modules that are compiled (of a copy of the
    package, given one), by name."""
    return sorted(p for p in (package or PACKAGE).glob("*.py") if p.name not in LEFT_OUT)


def digest(package: Path | None = None) -> str:
    """Returns the key of a build of the sources as they are now (of a copy
    of the package, given one), for this interpreter: their names and bytes,
    and the extension suffix (the Python version and platform a compiled
    module is for)."""
    h = hashlib.sha256(str(sysconfig.get_config_var("EXT_SUFFIX")).encode())
    for path in sources(package):
        h.update(b"\0" + path.name.encode() + b"\0")
        h.update(path.read_bytes())
    return h.hexdigest()[:20]


def builds() -> Path:
    """Returns the directory that holds builds, one folder per digest (a
    relative GANGWAY_NATIVE_DIR is read from the project's folder, so that
    every process finds the same builds wherever it starts)."""
    return ROOT / (os.environ.get("GANGWAY_NATIVE_DIR") or Path("var", "native"))


def _modules(where: Path) -> list[Path]:
    suffix = str(sysconfig.get_config_var("EXT_SUFFIX"))
    return sorted((where / "scheduling" / "policy").glob(f"*{suffix}"))


def _complete(where: Path, package: Path | None = None) -> bool:
    """Returns whether `where` holds a compiled module for every source (of
    a copy of the package, given one)."""
    suffix = str(sysconfig.get_config_var("EXT_SUFFIX"))
    names = {p.name[: -len(suffix)] for p in _modules(where)}
    return bool(names) and names >= {p.stem for p in sources(package)}


# Why this interpreter runs the policy it runs: set once, by `load`.
REASON = "not loaded yet"
LOADED = False


def load(package_path: list[str]) -> bool:
    """Puts the build matching the sources, if there is one, first on the
    policy package's path, so that its modules are imported from it; returns
    whether it did. Called once, by the package's `__init__`, before it
    imports any of its modules."""
    global REASON, LOADED
    LOADED = False
    if os.environ.get("GANGWAY_POLICY", "").strip().lower() == "python":
        REASON = "interpreted: GANGWAY_POLICY=python"
        return False
    where = builds() / digest()
    if not _complete(where):
        REASON = (f"interpreted: no build matches the sources "
                  f"(`python -m scheduling.policy build` makes {where})")
        return False
    suffix = str(sysconfig.get_config_var("EXT_SUFFIX"))
    try:
        # mypyc puts the code of every module in one shared library that each
        # module's own extension imports by its top-level name: load it from
        # the build, so that sys.path is left as it is.
        for lib in where.glob(f"*__mypyc{suffix}"):
            name = lib.name[: -len(suffix)]
            if name not in sys.modules:
                spec = importlib.util.spec_from_file_location(name, lib)
                assert spec is not None and spec.loader is not None
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                sys.modules[name] = module
    except ImportError as error:  # built for another interpreter of the same suffix
        REASON = f"interpreted: the build in {where} does not load ({error})"
        return False
    folder = str(where / "scheduling" / "policy")
    package_path.insert(0, folder)
    try:
        importlib.import_module(f"{__package__}.cycle")  # and with it every module `plan` runs
    except ImportError as error:
        package_path.remove(folder)
        for name in [n for n in sys.modules if n.startswith(f"{__package__}.") and n != __name__]:
            del sys.modules[name]  # half imported from the build: imported again from the sources
        REASON = f"interpreted: the build in {where} does not load ({error})"
        return False
    REASON = f"compiled with mypyc: {where}"
    LOADED = True
    return True


# A working folder untouched this long is its build's for sure, should the process id
# in its name be of another machine or container sharing the builds folder.
LEFT_AFTER = 3600


def _left_behind(folder: Path) -> bool:
    """Returns whether `folder` is the working folder of a build whose process
    is gone (killed mid-way): `.work-<digest>-<pid>` or `.out-<digest>-<pid>`,
    that process no longer running here, and the folder unchanged for
    LEFT_AFTER seconds."""
    kind, _, pid = folder.name.rpartition("-")
    if not kind.startswith((".work-", ".out-")) or not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        if time.time() - folder.stat().st_mtime < LEFT_AFTER:
            return False
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):  # alive and another user's (PermissionError), or not a pid
        return False
    return False


def build(*, quiet: bool = False) -> Path:
    """Compiles the sources as they are now into `builds()/digest()`, unless
    a complete build is there already; returns its folder. Raises
    RuntimeError, with mypyc's output, when the build fails."""
    key = digest()
    target = builds() / key
    if _complete(target):
        if not quiet:
            print(f"The compiled policy is up to date: {target}")
        return target
    builds().mkdir(parents=True, exist_ok=True)
    work = builds() / f".work-{key}-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    try:
        # The sources with what type-checking them reads: the package (its
        # `__init__` too) and the shared core beneath it.
        policy = work / "scheduling" / "policy"
        policy.mkdir(parents=True)
        (work / "scheduling" / "__init__.py").write_text("")
        for path in PACKAGE.glob("*.py"):
            shutil.copy2(path, policy / path.name)
        shutil.copytree(ROOT / "core", work / "core",
                        ignore=shutil.ignore_patterns("__pycache__"))
        # Keyed by what is compiled: sources edited while this build ran get a build of their own.
        key = digest(policy)
        target = builds() / key
        names = [f"scheduling/policy/{p.name}" for p in sources(policy)]
        if not quiet:
            print(f"Compiling {len(names)} policy modules with mypyc into {target} "
                  "(about a minute on two cores)...", flush=True)
        began = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "mypyc", *names], cwd=work,
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError("mypyc failed:\n" + (done.stdout + done.stderr)[-4000:])
        # Keep only the compiled modules: the build's folder is found before
        # the sources, and must hold nothing else they would read.
        out = work.parent / f".out-{key}-{os.getpid()}"
        shutil.rmtree(out, ignore_errors=True)
        (out / "scheduling" / "policy").mkdir(parents=True)
        suffix = str(sysconfig.get_config_var("EXT_SUFFIX"))
        for lib in work.glob(f"*__mypyc{suffix}"):
            shutil.copy2(lib, out / lib.name)
        for module in _modules(work):
            shutil.copy2(module, out / "scheduling" / "policy" / module.name)
        if not _complete(out, policy):
            shutil.rmtree(out, ignore_errors=True)
            raise RuntimeError(f"mypyc left no compiled module for some sources in {work}")
        try:
            out.rename(target)
        except OSError:
            if _complete(target, policy):  # another build of the same sources finished first
                shutil.rmtree(out, ignore_errors=True)
            else:  # an incomplete folder (a module deleted since): replaced
                shutil.rmtree(target)
                out.rename(target)
        for old in builds().iterdir():  # builds of other sources are never loaded again
            if (old.name != key and not old.name.startswith(".")) or _left_behind(old):
                shutil.rmtree(old, ignore_errors=True)
        if not quiet:
            print(f"Built in {time.monotonic() - began:.0f} s.")
        return target
    finally:
        shutil.rmtree(work, ignore_errors=True)
