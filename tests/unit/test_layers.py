"""The package's import graph: layers only import downwards, and nothing cycles.

Every ``import`` statement in ``tsmodel/`` counts, wherever it stands: at the
top, inside a function, or under ``if TYPE_CHECKING:``. The layers, lowest
first, are the packages a newcomer sees in the tree (see docs/architecture.md).

Planners speak the ground vocabulary (``tsmodel.ground``) and never open a
backend: the concrete backends (``tsmodel.backends``) sit above them, and only
the executors (``run/``), the jobs (``jobs/``), the test helpers (``testing/``)
and the command line (``cli/``: its emulator command and connection URLs)
import them.

An operation of more than one backend call is a planner in ``plan/`` that
yields the typed steps of ``plan/calls.py`` (the one step protocol); the two
drivers of ``run/drive.py`` alone carry steps out: no other module hands out
a schedule's steps, and nothing dispatches a call by a method's name.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "tsmodel"

#: Lowest first. A module may import its own layer and the layers before it.
LAYERS = ("errors", "_observe", "settings", "encoding", "ground", "layouts", "declare",
          "plan", "io", "backends", "run", "jobs", "cli", "testing", "__init__", "__main__")

#: The only layers that import the concrete backends (besides ``backends`` itself).
OPENERS = ("run", "jobs", "cli", "testing")
#: The step protocol, and the one module that drives it (sync and async).
PROTOCOL, DRIVERS = "tsmodel.plan.calls", "tsmodel.run.drive"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every tsmodel module ``path`` imports, by any kind of import statement."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = _module_name(path) if path.name == "__init__.py" else \
        _module_name(path).rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("tsmodel"))
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, package)
            if not base.startswith("tsmodel"):
                continue
            # ``from tsmodel.plan import schema`` imports the module tsmodel.plan.schema;
            # ``from tsmodel.plan.schema import plan`` the module tsmodel.plan.schema.
            for alias in node.names:
                name = f"{base}.{alias.name}"
                found.add(name if _is_module(name) else base)
    return found


def _is_module(name: str) -> bool:
    path = PACKAGE.parent / name.replace(".", "/")
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _absolute(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    base = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def _graph() -> dict[str, set[str]]:
    graph = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        graph[_module_name(path)] = {m for m in _imports(path) if m != "tsmodel"}
    return graph


def _layer(module: str) -> int:
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else "__init__"
    return LAYERS.index(top)


GRAPH = _graph()


def test_every_module_is_in_a_layer() -> None:
    unknown = sorted(m for m in GRAPH if m != "tsmodel" and m.split(".")[1] not in LAYERS)
    assert not unknown, f"modules outside the layers {LAYERS}: {unknown}"


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_no_import_from_a_lower_layer_upwards(module: str) -> None:
    if module == "tsmodel":
        return  # the public API imports everything
    upward = sorted(m for m in GRAPH[module] if m in GRAPH and _layer(m) > _layer(module))
    assert not upward, f"{module} (layer {LAYERS[_layer(module)]}) imports higher: {upward}"


def _opens_a_backend(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    """The modules outside ``backends/`` and `OPENERS` that import ``tsmodel.backends``."""
    found = {}
    for module, imported in graph.items():
        parts = module.split(".")
        top = parts[1] if len(parts) > 1 else "__init__"
        if top == "backends" or top in OPENERS:
            continue
        backends = sorted(m for m in imported
                          if m == "tsmodel.backends" or m.startswith("tsmodel.backends."))
        if backends:
            found[module] = backends
    return found


def test_only_the_executors_jobs_cli_and_testing_import_the_backends() -> None:
    """Encoding, ground, layouts, declare, plan and io (and the public API module)
    never import ``tsmodel.backends``: they speak ``tsmodel.ground``."""
    found = _opens_a_backend(GRAPH)
    assert not found, "imports of tsmodel.backends outside run/, jobs/, cli/, testing/:\n" + \
        "\n".join(f"{m}: {', '.join(b)}" for m, b in sorted(found.items()))


def _private_imports(graph: dict[str, set[str]], package: str) -> dict[str, list[str]]:
    """The modules outside ``package`` that import one of its private (``_``) modules."""
    found = {}
    for module, imported in graph.items():
        if module == package or module.startswith(package + "."):
            continue
        private = sorted(m for m in imported if m.startswith(package + "._"))
        if private:
            found[module] = private
    return found


def test_the_private_modules_of_the_backends_stay_inside() -> None:
    """``tsmodel.backends._urls``, ``._bigtable_rpc`` and the like are the backends'
    own: what others need from them is public in ``tsmodel.backends``."""
    found = _private_imports(GRAPH, "tsmodel.backends")
    assert not found, "imports of the backends' private modules:\n" + \
        "\n".join(f"{m}: {', '.join(p)}" for m, p in sorted(found.items()))


def test_private_imports_are_found() -> None:
    fake = {"tsmodel.cli.a": {"tsmodel.backends._urls", "tsmodel.backends"},
            "tsmodel.backends.b": {"tsmodel.backends._urls"}}
    assert _private_imports(fake, "tsmodel.backends") == {
        "tsmodel.cli.a": ["tsmodel.backends._urls"]}


def _drives_steps(path: Path) -> list[str]:
    """The places in ``path`` that drive steps themselves or dispatch by name: a
    schedule's ``.ready()`` called, or ``getattr(<a backend>, <not a literal>)``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "ready" and not node.args:
            found.append(f"line {node.lineno}: .ready()")
        if (isinstance(func, ast.Name) and func.id == "getattr" and len(node.args) >= 2
                and "backend" in ast.unparse(node.args[0])
                and not isinstance(node.args[1], ast.Constant)):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_only_the_drivers_carry_out_steps() -> None:
    """Every operation's steps go through ``run/drive.py``; the protocol is plan's."""
    assert _layer(PROTOCOL) < _layer(DRIVERS) and LAYERS[_layer(PROTOCOL)] == "plan"
    assert PROTOCOL in GRAPH[DRIVERS]
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if _module_name(path) == DRIVERS:
            continue
        places = _drives_steps(path)
        if places:
            found[_module_name(path)] = places
    assert not found, "steps driven (or calls dispatched by name) outside run/drive.py:\n" + \
        "\n".join(f"{m}: {'; '.join(p)}" for m, p in sorted(found.items()))


def test_the_driver_check_can_fail(tmp_path: Path) -> None:
    source = tmp_path / "loop.py"
    source.write_text("while not schedule.done:\n    for t, c in schedule.ready():\n"
                      "        schedule.answer(t, getattr(self.backend, c.method)())\n")
    assert len(_drives_steps(source)) == 2


def test_no_import_cycles() -> None:
    cycles = _cycles(GRAPH)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in graph:
                continue
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1 or node in graph.get(node, ()):
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_checker_sees_cycles_and_upward_imports() -> None:
    """The checks above can fail: a made-up graph with both faults is caught."""
    fake = {"tsmodel.encoding.a": {"tsmodel.plan.b"}, "tsmodel.plan.b": {"tsmodel.encoding.a"}}
    assert _cycles(fake) == [["tsmodel.encoding.a", "tsmodel.plan.b"]]
    assert _layer("tsmodel.plan.b") > _layer("tsmodel.encoding.a")
    source = PACKAGE / "layouts" / "codec.py"
    assert "tsmodel.encoding.keys" in _imports(source)
    fake = {"tsmodel.plan.b": {"tsmodel.backends.embedded"},
            "tsmodel.run.c": {"tsmodel.backends"}, "tsmodel.backends.d": {"tsmodel.backends"}}
    assert _opens_a_backend(fake) == {"tsmodel.plan.b": ["tsmodel.backends.embedded"]}


def test_the_package_exposes_only_its_api_and_its_layers() -> None:
    import tsmodel

    layers = {m.split(".")[1] for m in GRAPH if m.count(".") >= 1}
    # "@py_builtins" and "@pytest_ar": pytest's assertion rewriting, which
    # covers the whole distribution of a plugin (tsmodel.testing.plugin).
    extra = {n for n in dir(tsmodel)
             if not n.startswith(("__", "@"))} - set(tsmodel.__all__)
    assert extra <= layers, f"names that are neither public API nor a layer: {extra - layers}"
    missing = [n for n in tsmodel.__all__ if not hasattr(tsmodel, n)]
    assert not missing


def test_the_old_paths_of_the_ground_vocabulary_name_the_same_objects() -> None:
    """``tsmodel.backends.base`` and ``.gc`` (in users' code and the docs) still import."""
    import tsmodel
    from tsmodel.backends import base as old_base
    from tsmodel.backends import gc as old_gc
    from tsmodel.ground import base, gc

    assert old_base.__all__ == base.__all__ and old_gc.__all__ == gc.__all__
    assert all(getattr(old_base, n) is getattr(base, n) for n in base.__all__)
    assert all(getattr(old_gc, n) is getattr(gc, n) for n in gc.__all__)
    assert tsmodel.backends.base.ReadRequest is base.ReadRequest  # loaded with tsmodel
