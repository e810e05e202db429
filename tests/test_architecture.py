"""House rules that the layout of the package must keep (BRIEF/STYLE): one parser of kernel
source, no import cycles, modules a newcomer can read, analysis without Warp."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "warptrace"
# Modules allowed over the size limit (none today).
LARGE: set[str] = set()
LIMIT = 650


def _modules() -> dict[str, Path]:
    return {
        ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__"): path
        for path in PACKAGE.rglob("*.py")
    }


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Modules of the package that ``name`` imports, at any level (TYPE_CHECKING included)."""
    found = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        found.update(t for t in targets if t in modules and t != name)
    return found


def test_ast_parse_only_in_the_kernel_source_module():
    users = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if any(
            isinstance(node, ast.Attribute)
            and node.attr == "parse"
            and getattr(node.value, "id", "") == "ast"
            for node in ast.walk(ast.parse(path.read_text()))
        )
    )
    assert users == ["kernel_source/syntax.py"]


def test_no_import_cycles():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    # a package importing its own submodules (re-exports) is not a cycle back into it
    for name in graph:
        graph[name] = {t for t in graph[name] if not t.startswith(name + ".")}
    for name in graph:
        graph[name] = {
            t for t in graph[name] if not (name.startswith(t + ".") and modules[t].name == "__init__.py")
        }
    cycles = []
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                cycles.append([*stack[stack.index(target) :], target])
            elif target not in state:
                visit(target, [*stack, target])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert cycles == []


def test_modules_are_small():
    too_big = {
        str(path.relative_to(PACKAGE)): n
        for path in PACKAGE.rglob("*.py")
        if (n := len(path.read_text().splitlines())) > LIMIT and str(path.relative_to(PACKAGE)) not in LARGE
    }
    assert too_big == {}


def test_analysis_and_kernel_source_import_without_warp():
    code = (
        "import sys; sys.modules['warp'] = None; "
        "import warptrace.analysis.report, warptrace.kernel_source, warptrace.report; print('ok')"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.stdout.strip() == "ok", result.stderr


def test_kernel_source_imports_neither_record_nor_analysis():
    modules = _modules()
    for name, path in modules.items():
        if name.startswith("warptrace.kernel_source"):
            assert not {
                t for t in _imports(name, path, modules) if not t.startswith("warptrace.kernel_source")
            }
