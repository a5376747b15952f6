"""The benchmark scripts within the package's bounds: short modules, short functions, no module-level
mutable state.

A benchmark is read to learn what a number means, so it is held to the same size as the package
(issue 12's bounds, counted the way ``tests/test_imports.py`` counts them). Module-level lists,
dicts and sets are shared by every caller of the module and invite registries that one run fills
for the next; constants are tuples, frozensets or ``types.MappingProxyType``. The check is pure
``ast`` over the source text: no script is imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

MAX_MODULE_LINES, MAX_FUNCTION_LINES = 400, 60

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

MUTABLE_DISPLAYS = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)
MUTABLE_CALLS = frozenset({"list", "dict", "set", "defaultdict", "OrderedDict", "Counter", "deque"})


def _is_main_guard(node: ast.stmt) -> bool:
    """``if __name__ == "__main__":``: what a script does when run, not module state."""
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    sides = [node.test.left, *node.test.comparators]
    return any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides) \
        and any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides)


def _module_statements(body: list[ast.stmt]):
    """Statements that run at import: the module's own, and those under its ``if``/``try``/``with``
    blocks (a constant defined under ``try: import x`` is still module state), not under the
    ``__main__`` guard, a function or a class."""
    for node in body:
        if _is_main_guard(node):
            continue
        yield node
        if isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
            for field in ("body", "orelse", "finalbody"):
                yield from _module_statements(getattr(node, field, []))
            for handler in getattr(node, "handlers", []):
                yield from _module_statements(handler.body)


def _is_mutable(value: ast.expr | None) -> bool:
    if isinstance(value, MUTABLE_DISPLAYS):
        return True
    if isinstance(value, ast.Call):
        func = value.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        return name in MUTABLE_CALLS
    return False


def structure_problems(src: str, where: str) -> list[str]:
    """What in ``src`` breaks the bounds: ``where: N lines`` for a long module, ``where:line name: N
    lines`` for a long function (nested functions count in their parent's length, and on their own),
    ``where:line NAME: module-level mutable ...`` for a module-level list/dict/set."""
    problems = []
    lines = src.count("\n")
    if lines > MAX_MODULE_LINES:
        problems.append(f"{where}: {lines} lines (at most {MAX_MODULE_LINES})")
    tree = ast.parse(src, where)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                problems.append(f"{where}:{node.lineno} {node.name}: {length} lines (at most {MAX_FUNCTION_LINES})")
    for node in _module_statements(tree.body):
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign):
            targets, value = [node.target], node.value
        else:
            continue
        if _is_mutable(value):
            names = ", ".join(ast.unparse(t) for t in targets)
            problems.append(f"{where}:{node.lineno} {names}: module-level mutable {type(value).__name__.lower()}")
    return problems


def test_the_checker_reports_what_it_is_shown():
    long_function = "def f():\n" + "    x = 1\n" * 60 + "    return x\n"  # 62 lines
    nested = "def outer():\n    def inner():\n" + "        y = 2\n" * 59 + "        return y\n    return inner\n"
    long_module = "x = 1\n" * (MAX_MODULE_LINES + 1)
    state = ('REGISTRY = {}\nNAMES: list[str] = []\nSEEN = set()\nBY = defaultdict(list)\n'
             'SQUARES = [i * i for i in range(3)]\nOPTS = dict(a=1)\n'
             'if True:\n    FLAGS = ["--x"]\n')
    fine = ('from types import MappingProxyType\nSIZES = MappingProxyType({"a": 1})\nNAMES = ("a", "b")\n'
            'KINDS = frozenset({"x"})\n\ndef f():\n    local = {}\n    return local\n\n'
            'if __name__ == "__main__":\n    ARGS = []\n')
    assert structure_problems(long_function, "f.py") == ["f.py:1 f: 62 lines (at most 60)"]
    assert structure_problems(nested, "n.py") == ["n.py:1 outer: 63 lines (at most 60)",
                                                  "n.py:2 inner: 61 lines (at most 60)"]
    assert structure_problems(long_module, "m.py") == [f"m.py: {MAX_MODULE_LINES + 1} lines (at most 400)"]
    found = structure_problems(state, "s.py")
    assert [p.split(" ")[0] + " " + p.split(" ")[1] for p in found] == [
        "s.py:1 REGISTRY:", "s.py:2 NAMES:", "s.py:3 SEEN:", "s.py:4 BY:", "s.py:5 SQUARES:", "s.py:6 OPTS:",
        "s.py:8 FLAGS:"]
    assert structure_problems(fine, "ok.py") == []


def test_the_benchmarks_keep_within_the_bounds():
    paths = sorted(BENCHMARKS.rglob("*.py"))
    assert len(paths) > 10 and (BENCHMARKS / "_harness" / "__init__.py") in paths
    problems = []
    for path in paths:
        problems += structure_problems(path.read_text(), str(path.relative_to(BENCHMARKS.parent)))
    assert not problems, "; ".join(problems)


HEADERS = frozenset({"start_report", "print_header", "environment"})
"""What opens a benchmark's report through ``_harness``: the machine and versions its numbers were taken on."""


def opens_through_harness(src: str) -> bool:
    """Whether ``src`` imports one of :data:`HEADERS` from ``_harness`` (at any depth: some import it where
    it is used)."""
    return any(isinstance(node, ast.ImportFrom) and node.module == "_harness" and
               HEADERS & {alias.name for alias in node.names} for node in ast.walk(ast.parse(src)))


def test_every_benchmark_opens_its_report_through_the_harness():
    """Each script a user runs (``benchmarks/NAME.py``; not the ``_`` helpers they share, nor the one-off
    probes under ``probes/``) prints its machine and versions through ``_harness`` (issue 64)."""
    assert not opens_through_harness("import json\nfrom _harness import REPO\n")
    assert opens_through_harness("def main():\n    from _harness import print_header\n")
    scripts = sorted(p for p in BENCHMARKS.glob("[a-z]*.py"))
    assert len(scripts) > 20
    assert [p.name for p in scripts if not opens_through_harness(p.read_text())] == []
