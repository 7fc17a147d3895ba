"""One ORM -> engine translation (issue 34 item 3): the engine's inputs read from stored rows (``Node``,
``Request``, ``RunningWorkload``) are built only by ``selectors/engine_inputs.py``, so two pages cannot read
one row two ways (a node's orchestrator by name here and by kind there, a workload's kind three ways).

The engine, the simulator, the trace readers, the collectors (they build from what an orchestrator answered,
not from rows) and the demo stepper build their own. The scan is ast, not grep: an aliased import
(``Node as EngineNode``) or ``types.Request(...)`` counts, a comment or docstring does not.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "scheduling"
ENGINE_TYPES = {"Node", "Request", "RunningWorkload"}
TYPES_MODULE = "scheduling.engine.types"
HOME = "selectors/engine_inputs.py"
EXCEPTED = ("engine/", "simulation/", "traces/", "collectors/", "demo/", "migrations/")


def _constructions(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, type) of each call that builds an engine input type, through whatever name this module gave it."""
    by_name: dict[str, str] = {}  # local name -> engine type
    modules: set[str] = set()  # local names bound to scheduling.engine.types itself
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == TYPES_MODULE:
            by_name.update({a.asname or a.name: a.name for a in node.names if a.name in ENGINE_TYPES})
        elif isinstance(node, ast.ImportFrom) and node.module == "scheduling.engine":
            modules.update(a.asname or a.name for a in node.names if a.name == "types")
        elif isinstance(node, ast.Import):
            modules.update(a.asname for a in node.names if a.name == TYPES_MODULE and a.asname)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in by_name:
            found.append((node.lineno, by_name[func.id]))
        elif (isinstance(func, ast.Attribute) and func.attr in ENGINE_TYPES
              and isinstance(func.value, ast.Name) and func.value.id in modules):
            found.append((node.lineno, func.attr))
    return found


def test_engine_inputs_are_built_only_in_the_translation_module():
    elsewhere = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative == HOME or relative.startswith(EXCEPTED):
            continue
        for line, kind in _constructions(ast.parse(path.read_text(encoding="utf-8"))):
            elsewhere.append(f"{relative}:{line} {kind}(...)")
    assert not elsewhere, f"engine inputs built outside {HOME}: " + "; ".join(elsewhere)


def test_the_scan_sees_aliases_and_module_attributes():
    """The scan itself can fail: each way of naming the types is caught, a look-alike is not."""
    source = """
from scheduling.engine.types import Node as EngineNode, Request
from scheduling.engine import types
from scheduling.models import Node
EngineNode(name="a", gpu_total=8)
Request("r")
types.RunningWorkload("w", "t", 1.0)
Node(name="orm row")
QuotaRequest()
"""
    assert _constructions(ast.parse(source)) == [(5, "Node"), (6, "Request"), (7, "RunningWorkload")]


def test_the_translation_module_builds_all_three():
    assert {kind for _line, kind in _constructions(ast.parse((PACKAGE / HOME).read_text()))} == ENGINE_TYPES
