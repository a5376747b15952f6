"""The package's layering and size: no import cycle between subpackages nor between two files, no module or
function past its bound.

Every ``import fullgraph.X...`` / ``from fullgraph.X... import`` of every module counts, those inside
functions too: a lazy import only hides a cycle from Python, not from a reader. The unit is the
subpackage or top-level module (``fullgraph.partition``, ``fullgraph.plan``); imports within one unit
are its own business.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import fullgraph

PACKAGE = Path(fullgraph.__file__).resolve().parent


def _unit(module: str) -> str:
    return ".".join(module.split(".")[:2])


def import_graph() -> dict[str, dict[str, list[str]]]:
    """``{unit: {imported unit: ["file:line", ...]}}`` over every module of the package."""
    graph: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent)
        module = ".".join(rel.with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [node.module]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for target in targets:
                if target.startswith("fullgraph.") and _unit(target) != _unit(module):
                    graph[_unit(module)][_unit(target)].append(f"{rel}:{node.lineno}")
    return graph


def find_cycle(graph: dict[str, dict[str, list[str]]]) -> list[str] | None:
    """One cycle ``[a, b, ..., a]`` of the graph, or None (depth-first search, three colours)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(u: str) -> list[str] | None:
        state[u] = 1
        path.append(u)
        for v in graph.get(u, {}):
            if state.get(v) == 1:
                return path[path.index(v):] + [v]
            if v not in state and (found := visit(v)):
                return found
        path.pop()
        state[u] = 2
        return None

    for u in sorted(graph):
        if u not in state and (found := visit(u)):
            return found
    return None


def test_the_walker_finds_a_cycle_it_is_shown():
    assert find_cycle({"a": {"b": ["x"]}, "b": {"c": ["y"]}, "c": {"a": ["z"]}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b": ["x"]}, "b": {"c": ["y"]}, "c": {}}) is None


def test_no_import_cycle_between_subpackages():
    graph = import_graph()
    assert "fullgraph.parallel" in graph and "fullgraph.partition" in graph["fullgraph.parallel"]  # it reads
    cycle = find_cycle(graph)
    where = [f"{a} -> {b} ({', '.join(graph[a][b][:3])})" for a, b in zip(cycle, cycle[1:])] if cycle else []
    assert cycle is None, "import cycle: " + "; ".join(where)


def file_graph() -> dict[str, dict[str, list[str]]]:
    """``{module: {imported module: ["file:line", ...]}}`` between the package's files (``from fullgraph.data
    import pyg_fields`` names the file ``data.pyg_fields``); a package's ``__init__`` that only re-exports its
    files for its users is left out, one that holds code of its own (``data.typed``) is a file like any."""
    paths = {".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__"): p
             for p in sorted(PACKAGE.rglob("*.py"))}
    files = {m for m, p in paths.items() if p.name != "__init__.py" or _holds_code(p)}
    graph: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for module in sorted(files):
        rel = paths[module].relative_to(PACKAGE.parent)
        for node in ast.walk(ast.parse(paths[module].read_text(), str(rel))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in files else node.module
                           for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for target in dict.fromkeys(targets):
                if target in files and target != module:
                    graph[module][target].append(f"{rel}:{node.lineno}")
    return graph


def _holds_code(path: Path) -> bool:
    """Whether a package's ``__init__`` defines a function or class of its own (else it re-exports)."""
    return any(isinstance(n, (ast.FunctionDef, ast.ClassDef)) for n in ast.parse(path.read_text()).body)


def test_no_two_files_import_each_other_even_through_others():
    """Issue 64: each of the circles there were (``graph`` and ``typed``, ``pyg`` and ``pyg_hetero``, ``ogb`` and
    ``ogb_layouts``, ``balance``, ``book`` and ``partitioners``) was one concern in two files, kept apart at
    import time by a lazy import; their shared part now sits a floor below both."""
    graph = file_graph()
    assert "fullgraph.data.graph" in graph["fullgraph.data.typed"]  # it reads, lazy imports too
    assert "fullgraph.data.pyg_fields" in graph["fullgraph.data.typed.pyg"]  # a file imported from its package
    cycle = find_cycle(graph)
    where = [f"{a} -> {b} ({', '.join(graph[a][b][:3])})" for a, b in zip(cycle, cycle[1:])] if cycle else []
    assert cycle is None, "import cycle: " + "; ".join(where)


MAX_MODULE_LINES, MAX_FUNCTION_LINES = 400, 60
"""Issue 12's bounds: a module a reader can hold, a function that does one thing."""


TESTS = Path(__file__).resolve().parent


def _modules():
    """``(path, its name relative to the checkout)`` of every module of the package and of the tests."""
    for root in (PACKAGE, TESTS):
        for path in sorted(root.rglob("*.py")):
            yield path, path.relative_to(root.parent)


def test_no_module_or_function_outgrows_its_bound():
    """The package's modules and the tests' (the benchmarks are scripts, outside the bound)."""
    too_long = []
    for path, rel in _modules():
        src = path.read_text()
        if src.count("\n") > MAX_MODULE_LINES:
            too_long.append(f"{rel}: {src.count(chr(10))} lines")
        for node in ast.walk(ast.parse(src, str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    too_long.append(f"{rel}:{node.lineno} {node.name}: {lines} lines")
    assert not too_long, "; ".join(too_long)


LAYOUT_HOMES = ("parallel", "comm")
"""Where layout names may be compared (issue 41): the layouts' own modules and the mesh. Everywhere
else asks the ``Mesh`` (``chunked``, ``prunable``, ``spmm``, ``tensor``, ...) or the engine."""


def layout_name_uses(src: str, where: str) -> list[str]:
    """``where:line`` of each comparison of a layout's name with a literal (``mode == "graph"``,
    ``mode in ("pipeline", "hybrid")``, ``mode.startswith("spmm")``) and each ``isinstance`` against an
    engine class in ``src``."""
    from fullgraph.comm.mesh import PARALLEL_MODES

    names = set(PARALLEL_MODES) | {"spmm"}

    def literal(node) -> bool:
        items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
        return any(isinstance(c, ast.Constant) and c.value in names for c in items)

    found = []
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Compare) and any(literal(side) for side in [node.left, *node.comparators]):
            found.append(f"{where}:{node.lineno}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "startswith" \
                and node.args and literal(node.args[0]):
            found.append(f"{where}:{node.lineno}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance" \
                and len(node.args) == 2 and ast.unparse(node.args[1]).endswith("Engine"):
            found.append(f"{where}:{node.lineno}")
    return found


def test_the_layout_check_finds_what_it_is_shown():
    planted = ('if cfg.parallel.mode in ("pipeline", "hybrid"):\n    pass\n'
               'ok = mode == "tensor" or name.startswith("spmm")\n'
               'if isinstance(engine, ChunkedEngine):\n    pass\n'
               'fine = mesh.chunked and kind == "bar" and isinstance(x, int)\n')
    assert sorted(layout_name_uses(planted, "x.py")) == ["x.py:1", "x.py:3", "x.py:3", "x.py:4"]


def test_layout_names_are_compared_only_where_the_layouts_live():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] not in LAYOUT_HOMES:
            found += layout_name_uses(path.read_text(), f"fullgraph/{rel}")
    assert not found, "layout names compared outside parallel/ and comm/ (ask the Mesh): " + ", ".join(found)


def environment_reads(src: str, where: str) -> list[str]:
    """``where:line`` of each use of ``os.environ`` / ``os.getenv`` in ``src``."""
    return [f"{where}:{node.lineno}" for node in ast.walk(ast.parse(src))
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os"
            and node.attr in ("environ", "getenv")]


def test_the_environment_is_read_in_one_module():
    """``fullgraph/environ.py`` lists and documents every variable; the rest of the package asks it."""
    assert sorted(environment_reads('import os\nx = os.environ.get("A")\ny = os.getenv("B")\n', "x.py")) == ["x.py:2", "x.py:3"]
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name != "environ.py" or path.parent != PACKAGE:
            found += environment_reads(path.read_text(), f"fullgraph/{path.relative_to(PACKAGE)}")
    assert not found, "environment read outside fullgraph/environ.py: " + ", ".join(found)


def flag_declarations(src: str, where: str) -> list[str]:
    """``where:line`` of each ``add_argument`` / ``add_parser`` call in ``src``: a flag or command
    declared by hand, outside the options classes (issue 41 §3)."""
    return [f"{where}:{node.lineno}" for node in ast.walk(ast.parse(src))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("add_argument", "add_parser")]


def test_flags_are_declared_as_options_only():
    """Every command's flags are fields of options classes (``fullgraph.cli.options``, ``TrainConfig``);
    ``fullgraph/cli/commands.py`` alone turns them into argparse calls."""
    assert flag_declarations('p.add_argument("--x")\nsub.add_parser("y")\nadd_flags(p, opts)\n', "x.py") == \
        ["x.py:1", "x.py:2"]
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path != PACKAGE / "cli" / "commands.py":
            found += flag_declarations(path.read_text(), f"fullgraph/{path.relative_to(PACKAGE)}")
    assert not found, "flags declared by hand (declare an options field instead): " + ", ".join(found)
