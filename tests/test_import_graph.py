"""Imports run one way between the apps, and no two modules import each other.

The layers, bottom to top: the shared core (`core/`, `scheduling/policy/`, the
standard-library-only `jobs/kinds.py` and `jobs/codes.py`, and the portal's helpers that
import no app), then tenants, jobs, scheduling, notifications, portal. Every import is read with `ast`, the ones inside
functions too, so a cycle cannot be hidden by moving an import into a function.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

APPS = ("tenants", "jobs", "scheduling", "notifications", "portal")
LAYER = {"core": 0, **{app: rank for rank, app in enumerate(APPS, start=1)}}
# Modules at the bottom although they sit inside an app's package. `scheduling/policy`,
# `jobs/kinds.py` and `jobs/codes.py` import only the standard library and the core; the
# portal's helpers below import Django or Celery but no app (they are in the bottom layer,
# so the upward rule itself fails them the day they import one), so every app may use them.
CORE_MODULES = (
    "core", "scheduling.policy", "jobs.kinds", "jobs.codes",
    "portal.addresses", "portal.compiled", "portal.database_errors", "portal.live", "portal.migration_ops",
    "portal.settings_reference", "portal.triggers", "portal.upgrades",
)  # fmt: skip

# The exact allowance: a shell module (views, API views, admin, management commands,
# template tags) may read a higher app's read modules, and nothing else of it: its
# selectors, its what-if previews (`scheduling/preview.py` plans without writing) and
# its log reads (`scheduling/logs.py`; a whole log for a download, `scheduling/log_download.py`;
# the API's follow cursor, `scheduling/log_cursor.py`).
SHELL_LEAVES = {"views", "api", "api_logs", "admin", "token_views"}
SHELL_PACKAGES = {"management", "templatetags"}
READABLE_FROM_ABOVE = {"selectors", "preview", "logs", "log_download", "log_cursor"}

# The only modules of the apps that import project modules inside a function, and why; any
# other such import is one hidden to dodge a cycle (move the shared piece down instead).
LAZY_IMPORTS = {
    "scheduling.apps": "ready() runs once the models have loaded",
    "notifications.apps": "ready() runs once the models have loaded",
    "scheduling.cluster": "an adapter is loaded only once CLUSTER_BACKEND chooses it",
    "portal.health": "the kubernetes client is loaded only when a kubernetes install is probed",
}

SKIPPED_DIRS = {"tests", "migrations", ".venv", "node_modules", "__pycache__", ".git"}


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources(root: Path):
    """Every non-test, non-migration .py file under root, as (module name, path)."""
    for path in sorted(root.rglob("*.py")):
        if SKIPPED_DIRS & set(path.relative_to(root).parts):
            continue
        yield _module_name(root, path), path


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _imported(module: str, package: bool, node: ast.ImportFrom) -> list[str]:
    """The names an `ast.ImportFrom` brings in, each as a dotted path (`from a import b`
    gives a.b, which `_resolve` reads as module a.b, or as module a when b is a name in
    it); relative imports are resolved against module (a package's `from .x import y`
    names its own child x)."""
    if node.level:
        parts = module.split(".") + ([""] if package else [])
        base = parts[: -node.level]
        prefix = ".".join(base + ([node.module] if node.module else []))
    else:
        prefix = node.module or ""
    return [f"{prefix}.{alias.name}" for alias in node.names]


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


MODULE, TYPING, FUNCTION = "module", "typing", "function"  # where an import sits; MODULE first
WHERE_RANK = {MODULE: 0, FUNCTION: 1, TYPING: 2}


def _imports(module: str, path: Path):
    """(imported name, line, where) for every import in the file: MODULE when it runs as
    the module loads (under a module-level `if` or `try:` too), TYPING under
    `if TYPE_CHECKING:` (it never runs), FUNCTION inside a function or class body."""
    tree = ast.parse(path.read_text(), filename=str(path))
    where = {id(node): MODULE for node in tree.body}
    for node in tree.body:
        if isinstance(node, (ast.If, ast.Try)):
            kind = TYPING if _type_checking(node) else MODULE
            where |= {id(child): kind for child in ast.walk(node)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno, where.get(id(node), FUNCTION)
        elif isinstance(node, ast.ImportFrom):
            for name in _imported(module, _is_package(path), node):
                yield name, node.lineno, where.get(id(node), FUNCTION)


def _resolve(name: str, modules: set[str]) -> str | None:
    """The project module an imported name lives in (a `from a.b import c` may name a
    function c of module a.b), or None for a third-party or standard-library name."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _app(module: str) -> str | None:
    """The app whose layer a module sits in: "core" for the shared core, None outside
    the apps (bench, the CLI, manage.py)."""
    for core in CORE_MODULES:
        if module == core or module.startswith(core + "."):
            return "core"
    top = module.split(".")[0]
    return top if top in LAYER else None


def _is_shell(module: str) -> bool:
    parts = module.split(".")
    return parts[-1] in SHELL_LEAVES or bool(SHELL_PACKAGES & set(parts[1:-1]))


def import_graph(root: Path) -> dict[str, dict[str, tuple[int, str]]]:
    """module -> {imported project module: (line, where)} for the tree at root. A module
    imported in several places keeps the one that runs first (MODULE, then FUNCTION)."""
    sources = dict(_sources(root))
    modules = set(sources)
    graph: dict[str, dict[str, tuple[int, str]]] = {}
    for module, path in sources.items():
        edges = graph.setdefault(module, {})
        for name, line, where in _imports(module, path):
            target = _resolve(name, modules)
            if target is None or target == module:
                continue
            if target not in edges or WHERE_RANK[where] < WHERE_RANK[edges[target][1]]:
                edges[target] = (line, where)
    return graph


def upward_imports(graph) -> list[str]:
    """Each import from a lower layer into a higher one that the allowance does not cover."""
    found = []
    for module, edges in graph.items():
        source = _app(module)
        if source is None:
            continue
        for target, (line, _) in edges.items():
            destination = _app(target)
            if destination is None or LAYER[destination] <= LAYER[source]:
                continue
            if _is_shell(module) and target.split(".")[-1] in READABLE_FROM_ABOVE:
                continue
            found.append(f"{module}:{line} imports {target} ({source} is below {destination})")
    return found


def function_level_imports(graph) -> list[str]:
    """Each import of a project module made inside a function of an app's module that
    LAZY_IMPORTS does not name."""
    return [
        f"{module}:{line} imports {target} inside a function"
        for module, edges in graph.items()
        if _app(module) is not None and module not in LAZY_IMPORTS
        for target, (line, where) in edges.items()
        if where == FUNCTION
    ]


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in graph.get(node, ()):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def _parent_packages(module: str) -> set[str]:
    parts = module.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def module_cycles(graph, *, module_level_only: bool) -> list[list[str]]:
    """Groups of modules that import each other, directly or round a loop. A package's
    import of its own submodules is left out: importing a.b runs a/__init__ first, so
    a package and its children are not a cycle to untangle."""
    edges = {
        module: {
            target
            for target, (_, where) in targets.items()
            if (where == MODULE or not module_level_only) and target not in _parent_packages(module)
            and module not in _parent_packages(target)
        }
        for module, targets in graph.items()
    }
    return _strongly_connected(edges)


def app_cycles(graph) -> list[list[str]]:
    """Cycles (module- or function-level imports) whose modules sit in more than one app."""
    return [
        component
        for component in module_cycles(graph, module_level_only=False)
        if len({_app(module) for module in component}) > 1
    ]


@pytest.fixture(scope="module")
def graph():
    return import_graph(ROOT)


def test_no_module_imports_a_higher_app(graph):
    assert upward_imports(graph) == []


def test_no_cycle_crosses_apps(graph):
    assert app_cycles(graph) == []


def test_no_two_modules_import_each_other_at_module_level(graph):
    assert module_cycles(graph, module_level_only=True) == []


def test_imports_inside_functions_are_only_the_named_lazy_ones(graph):
    assert function_level_imports(graph) == []


def test_the_graph_covers_every_app(graph):
    assert {_app(module) for module in graph} >= set(LAYER)
    assert "tenants.models" in graph["jobs.models"]


def _plant(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_it_catches_an_upward_import_hidden_in_a_function(tmp_path):
    _plant(
        tmp_path,
        {
            "tenants/__init__.py": "",
            "tenants/services.py": "def f():\n    from scheduling.tasks import trigger\n",
            "scheduling/__init__.py": "",
            "scheduling/tasks.py": "def trigger():\n    pass\n",
            "tests/test_x.py": "from portal import settings\n",
            "tenants/migrations/0001.py": "from scheduling import tasks\n",
        },
    )
    graph = import_graph(tmp_path)
    assert upward_imports(graph) == ["tenants.services:2 imports scheduling.tasks (tenants is below scheduling)"]
    assert function_level_imports(graph) == ["tenants.services:2 imports scheduling.tasks inside a function"]


def test_it_lets_a_view_read_a_higher_apps_selectors_and_nothing_else(tmp_path):
    _plant(
        tmp_path,
        {
            "jobs/__init__.py": "",
            "jobs/views.py": "from scheduling.selectors import usage\nfrom scheduling import loop\n",
            "jobs/management/commands/show.py": "from scheduling.selectors import usage\n",
            "scheduling/__init__.py": "",
            "scheduling/selectors.py": "usage = 1\n",
            "scheduling/loop.py": "",
        },
    )
    found = upward_imports(import_graph(tmp_path))
    assert found == ["jobs.views:2 imports scheduling.loop (jobs is below scheduling)"]


def test_it_catches_a_cycle_across_apps_and_a_module_level_pair(tmp_path):
    _plant(
        tmp_path,
        {
            "jobs/__init__.py": "",
            "jobs/services.py": "def f():\n    from portal.util import x\n",
            "portal/__init__.py": "",
            "portal/util.py": "from jobs.services import f\nx = 1\n",
            "scheduling/__init__.py": "",
            "scheduling/reconcile.py": "from .tasks import trigger\n",
            "scheduling/tasks.py": "from scheduling.reconcile import run\n",
        },
    )
    graph = import_graph(tmp_path)
    assert app_cycles(graph) == [["jobs.services", "portal.util"]]
    assert module_cycles(graph, module_level_only=True) == [
        ["scheduling.reconcile", "scheduling.tasks"]
    ]
