"""Imports sit at the top of a module (issue 34 item 6): an import inside a function hides a dependency from the
reader and from import-linter's view of the layers, and is how an import cycle gets dodged instead of fixed. One
is kept only where it says why on its own line (a heavy or optional library loaded when needed, Django's app
registry not ready yet, a cycle inside the engine named).
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("scheduling", "gpuportal")


def unexplained_imports(source: str) -> list[int]:
    """Lines of imports inside a function (at any depth) that carry no comment on their line."""
    commented = {
        token.start[0]
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    }
    found = []
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Import | ast.ImportFrom) and node.end_lineno not in commented:
                found.append(node.lineno)
    return sorted(set(found))


def test_no_function_level_import_without_a_reason():
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if "/migrations/" in relative:
                continue
            found += [f"{relative}:{line}" for line in unexplained_imports(path.read_text(encoding="utf-8"))]
    assert not found, "imports inside functions, no reason given (move them to the top): " + ", ".join(found)


def test_the_scan_tells_a_reason_from_none():
    """The scan itself can fail: a bare import in a method is found, one with its reason is not, a module-level
    import and an import named in a docstring are not."""
    source = '''
import os


class Page:
    def render(self):
        """from weasyprint import HTML is not an import"""
        from json import dumps

        def inner():
            import csv

        from weasyprint import HTML  # loading Pango costs 0.3 s: only for a PDF
        return dumps, HTML
'''
    assert unexplained_imports(source) == [8, 11]
