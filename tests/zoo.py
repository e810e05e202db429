"""Discovery of the program zoo (tests/programs) and its `# expect:` markers."""

from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

PROGRAMS = Path(__file__).parent / "programs"
_EXPECT = re.compile(r"#\s*expect:\s*([A-Z0-9, ]+)")
# `# allow: WT304`: a finding of that code may sit on that line or not (a rule that another
# branch is teaching to see this shape); it is neither required nor unexpected there
_ALLOW = re.compile(r"#\s*allow:\s*([A-Z0-9, ]+)")
_GRAD = re.compile(r"^#\s*grad:\s*(wrong|right)\s*$", re.M)
# `# grad-wrong-before: 1.17`: a `grad: right` program whose gradient depends on Warp behaviour
# that changed in that version (e.g. copy adjoints accumulate from 1.17 on)
_NUMERICS = re.compile(r"^#\s*check-numerics\s*$", re.M)
_REQUIRES = re.compile(r"^#\s*requires-warp:\s*(\d+)\.(\d+)", re.M)
# `# requires-module: torch`: the program needs an optional package (skipped without it)
_REQUIRES_MODULE = re.compile(r"^#\s*requires-module:\s*([A-Za-z_][\w.]*)\s*$", re.M)
_WRONG_BEFORE = re.compile(r"^#\s*grad-wrong-before:\s*(\d+)\.(\d+)", re.M)


@dataclass
class Program:
    path: Path
    expected: set[tuple[str, int]] = field(default_factory=set)  # (code, line)
    grad_wrong: bool = False
    forbid_info: bool = False
    wrong_before: tuple[int, int] | None = None
    requires_warp: tuple[int, int] = (0, 0)  # `# requires-warp: 1.15`: the program needs that Warp
    numerics: bool = False  # `# check-numerics`: recorded with numerics=True (WT5xx programs)
    requires_module: str | None = None  # `# requires-module: torch`: an optional package it needs

    def skip_reason(self) -> str | None:
        import warp

        if self.requires_module and importlib.util.find_spec(self.requires_module) is None:
            return f"{self.name} needs {self.requires_module}, which is not installed"
        version = tuple(int(part) for part in warp.__version__.split(".")[:2])
        if version < self.requires_warp:
            return f"{self.name} needs warp-lang >= {self.requires_warp[0]}.{self.requires_warp[1]}"
        return None

    def gradient_wrong_on(self, warp_version: tuple[int, ...]) -> bool:
        return self.grad_wrong or (
            self.wrong_before is not None and tuple(warp_version[:2]) < self.wrong_before
        )

    @property
    def name(self) -> str:
        return str(self.path.relative_to(PROGRAMS).with_suffix(""))


def _markers(path: Path, pattern: re.Pattern[str] = _EXPECT) -> set[tuple[str, Path, int]]:
    found = set()
    for lineno, text in enumerate(path.read_text().splitlines(), start=1):
        match = pattern.search(text)
        if match:
            for code in match.group(1).replace(",", " ").split():
                found.add((code, path, lineno))
    return found


def discover() -> list[Program]:
    """Every file holding ``def run(`` is an entry program; markers may sit in its sibling modules."""
    programs = []
    for path in sorted(PROGRAMS.rglob("*.py")):
        text = path.read_text()
        if "\ndef run(" not in text:
            continue
        marks = _program_markers(path)
        grad = _GRAD.search(text)
        before = _WRONG_BEFORE.search(text)
        requires = _REQUIRES.search(text)
        module = _REQUIRES_MODULE.search(text)
        programs.append(
            Program(
                path=path,
                expected={(code, line) for code, _, line in marks},
                grad_wrong=(grad.group(1) == "wrong") if grad else bool(marks),
                forbid_info="# forbid-info" in text,
                wrong_before=(int(before.group(1)), int(before.group(2))) if before else None,
                requires_warp=(int(requires.group(1)), int(requires.group(2))) if requires else (0, 0),
                numerics=bool(_NUMERICS.search(text)),
                requires_module=module.group(1) if module else None,
            )
        )
    return programs


def _program_markers(path: Path) -> set[tuple[str, Path, int]]:
    """Markers of an entry file; a package program's markers may sit anywhere in its folder."""
    marks = _markers(path)
    if path.parent != PROGRAMS:
        for sibling in path.parent.glob("*.py"):
            if sibling != path:
                marks |= _markers(sibling)
    return marks


def allowed_locations(program: Program) -> set[tuple[str, str, int]]:
    """(code, file, line) triples where a finding may appear without being required."""
    paths = [program.path]
    if program.path.parent != PROGRAMS:
        paths = sorted(program.path.parent.glob("*.py"))
    return {(code, str(path.resolve()), line) for p in paths for code, path, line in _markers(p, _ALLOW)}


def expected_locations(program: Program) -> set[tuple[str, str, int]]:
    """(code, file, line) triples the analyzer must report for a program."""
    marks = _program_markers(program.path)
    return {(code, str(path.resolve()), line) for code, path, line in marks}


def recorder_available() -> str | None:
    """Why zoo programs cannot be recorded here (no Warp, recorder broken), or None."""
    try:
        import warp  # noqa: F401
    except ImportError:
        return "warp is not installed"
    try:
        from warptrace.record import recorder  # noqa: F401
    except ImportError as exc:
        return f"the recorder is not importable yet ({exc})"
    return None


def record(program: Program, path: Path, module_name: str | None = None) -> Path:
    """Run ``program`` under the recorder into the trace directory ``path``."""
    import warptrace

    module = load(program, module_name=module_name or "zoo_traced_" + program.name.replace("/", "_"))
    # warptrace.start/stop rather than `with warptrace.trace(...)`: once any test imported the
    # `warptrace.trace` subpackage, that attribute is the subpackage, not the function
    warptrace.start(path, numerics=program.numerics)
    try:
        module.run()
    finally:
        warptrace.stop()
    return path


class TraceCache:
    """Each zoo program recorded at most once per test session (``zoo_traces`` fixture): the
    findings tests and the diff tests read the same traces."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._paths: dict[str, Path] = {}

    def __call__(self, program: Program) -> Path:
        """The program's trace; the calling test is skipped where this Warp cannot run it."""
        reason = program.skip_reason()
        if reason:
            import pytest

            pytest.skip(reason)
        path = self._paths.get(program.name)
        if path is None:
            path = record(program, self.folder / (program.name.replace("/", "_") + ".wtrace"))
            self._paths[program.name] = path
        return path


def load(program: Program, module_name: str | None = None):
    """Import a program file as a fresh module (its folder first on sys.path, like python would)."""
    name = module_name or "zoo_" + program.name.replace("/", "_")
    folder = str(program.path.parent)
    sys.path.insert(0, folder)
    try:
        spec = importlib.util.spec_from_file_location(name, program.path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(folder)
    return module
