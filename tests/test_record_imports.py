"""The recorder imports its own modules at module level only (cycles: test_architecture)."""

from __future__ import annotations

import ast
from pathlib import Path

RECORD = Path(__file__).resolve().parents[1] / "warptrace" / "record"


def _module_name(path: Path) -> str:
    parts = path.relative_to(RECORD.parents[1]).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(tree: ast.AST) -> list[tuple[str, bool]]:
    """(imported warptrace module, at module level) for every import in ``tree``."""
    found: list[tuple[str, bool]] = []
    top = {id(node) for node in getattr(tree, "body", [])}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("warptrace"):
            for alias in node.names:
                found.append((f"{node.module}.{alias.name}", id(node) in top))
        elif isinstance(node, ast.Import):
            found.extend((a.name, id(node) in top) for a in node.names if a.name.startswith("warptrace"))
    return found


def _graph() -> tuple[dict[str, set[str]], list[str]]:
    paths = sorted(RECORD.rglob("*.py"))
    names = {_module_name(p) for p in paths}
    graph: dict[str, set[str]] = {}
    nested: list[str] = []
    for path in paths:
        name = _module_name(path)
        edges = graph.setdefault(name, set())
        for target, at_top in _imports(ast.parse(path.read_text())):
            module = target if target in names else target.rsplit(".", 1)[0]
            if module not in names or module == name:
                continue
            if not at_top:
                nested.append(f"{name} -> {module}")
            edges.add(module)
    return graph, nested


def test_no_function_level_imports_of_our_modules():
    assert _graph()[1] == []
