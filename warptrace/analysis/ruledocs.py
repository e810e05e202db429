"""The rule reference: each rule's user documentation, read from its rule module's docstring,
checked complete, and rendered as one Markdown page per code.

One source, three readers: the docs site's rule pages (written by ``tools/regen_docs.py``),
``python -m warptrace explain CODE`` (the same page in the terminal) and the SARIF rule
metadata (default level, description, ``helpUri``).

A rule module's docstring starts with free text for maintainers; each code the module reports
has a block headed by the code and its name at column 0, with every section of
:data:`SECTIONS` indented below it::

    WT403 dynamic-loop-carry
        Summary: a product or recurrence carried across a loop Warp does not unroll
        Severity: error (warning when ...)
        Proves:
            Markdown paragraphs, indented once more.
        Example: wt403_product
        Look-alikes: ok_src_loops, ok_src_loop_constant_scale
        ...

``Example`` names a program of the test zoo (``tests/programs/``) whose ``# expect:`` marker
shows the code; its ``_fixed`` twin is the fix (``Example: NAME (no fixed twin: why)`` where
there is nothing to fix). ``Look-alikes`` names zoo programs the rule must stay silent on. The
zoo's tests check both, so the examples on the pages stay true. A missing section, an unknown
program or a marker that is not there is a problem :func:`problems` reports, and the docs
build fails on it.
"""

from __future__ import annotations

import difflib
import inspect
import re
import textwrap
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from warptrace.analysis.findings import RuleInfo

# Where the documentation site is published (the only place this address is written: the
# site's `site_url` is set from it, SARIF `helpUri`, the HTML report and `explain` link to it).
DOCS_URL = "https://warptrace.readthedocs.io/en/latest/"

# Required sections of a code's block, in the order of the page.
SECTIONS = (
    "Summary",
    "Severity",
    "Proves",
    "Mechanism",
    "Evidence",
    "Example",
    "Fix",
    "Silent on",
    "Look-alikes",
    "Warp documentation",
)
_TITLES = {
    "Proves": "What it proves",
    "Mechanism": "Warp's mechanism",
    "Evidence": "The evidence in the trace",
    "Example": "Example",
    "Fix": "Fix",
    "Silent on": "Look-alikes it stays silent on",
    "Warp documentation": "Warp documentation",
}
_FAMILIES = {
    "memory": "memory (WT1xx)",
    "accumulation": "accumulation (WT2xx)",
    "flow": "gradient flow (WT3xx)",
    "kernel": "kernel source (WT4xx)",
    "numeric": "values, with --check-numerics (WT5xx)",
}
# What the rule index says of each family, under its heading.
_FAMILY_NOTES = {
    "memory": "Memory a recorded launch read is changed before the backward that replays its adjoint.",
    "accumulation": "Gradients counted twice, or summed across steps that should each start from zero.",
    "flow": "The path from the parameters to the loss is cut, truncated, or seeded with another objective.",
    "kernel": (
        "Read from the kernel source stored in the trace; the finding points at the kernel or "
        "`@wp.func` line, the launch is a related location. Severity comes from the trace, not the "
        "pattern: `error` or `warning` only when the kernel runs on the backward slice of a "
        "backpropagated tape and the value depends on a kernel argument that carries a gradient "
        "there; `info` (or silence) when the kernel is taped but no gradient flows through it; "
        "silent outside tapes."
    ),
    "numeric": (
        "From value summaries: only in traces recorded with `--check-numerics` "
        "(`warptrace.trace(path, numerics=True)`); silent otherwise."
    ),
}
ZOO = Path(__file__).resolve().parents[2] / "tests" / "programs"  # present in a checkout only

_HEAD = re.compile(r"^(WT\d{3}) ([a-z0-9-]+)\s*$")
_SECTION = re.compile(r"^(" + "|".join(re.escape(s) for s in SECTIONS) + r"):[ \t]*(.*)$")
_EXPECT = re.compile(r"\s*#\s*expect:\s*([A-Z0-9, ]+?)\s*$")
_DIRECTIVE = re.compile(r"^#\s*(check-numerics|forbid-info|grad:|grad-wrong-before:|requires-)")


def rule_url(code: str) -> str:
    """The rule's page on the documentation site."""
    return f"{DOCS_URL}rules/{code}/"


@dataclass(frozen=True)
class RuleDoc:
    """The documentation of one code: its sections as Markdown (rst double backquotes made single)."""

    code: str
    name: str
    module: str
    sections: dict[str, str]

    @property
    def level(self) -> str:
        """The default severity word (``error``, ``warning``, ``info``): the Severity section's first."""
        match = re.match(r"\s*(error|warning|info)\b", self.sections.get("Severity", ""))
        return match.group(1) if match else "error"

    @property
    def summary(self) -> str:
        """The one-line Summary section."""
        return " ".join(self.sections.get("Summary", "").split())


def parse(doc: str, module: str = "") -> dict[str, RuleDoc]:
    """The code blocks of one module docstring."""
    found: dict[str, RuleDoc] = {}
    lines = doc.splitlines()
    i = 0
    while i < len(lines):
        head = _HEAD.match(lines[i])
        i += 1
        if not head:
            continue
        body = []
        while i < len(lines) and (not lines[i].strip() or lines[i][:1] in " \t"):
            body.append(lines[i])
            i += 1
        found[head.group(1)] = RuleDoc(head.group(1), head.group(2), module, _sections(body))
    return found


def _sections(body: list[str]) -> dict[str, str]:
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in textwrap.dedent("\n".join(body)).splitlines():
        match = _SECTION.match(line)
        if match:
            current = sections.setdefault(match.group(1), [])
            if match.group(2):
                current.append(match.group(2))
        elif current is not None:
            current.append(line)
    return {
        name: textwrap.dedent("\n".join(text)).strip().replace("``", "`") for name, text in sections.items()
    }


@lru_cache(maxsize=1)
def rule_docs() -> dict[str, RuleDoc]:
    """Every documented code of the registry's rule modules."""
    from warptrace.analysis.rules import ALL_RULES

    docs: dict[str, RuleDoc] = {}
    for rule in ALL_RULES:
        module = inspect.getmodule(rule.check)
        parsed = parse(inspect.getdoc(module) or "", module.__name__ if module else "")
        docs.update({code: parsed[code] for code in rule.codes if code in parsed})
    return docs


def rule_info() -> dict[str, RuleInfo]:
    from warptrace.analysis.rules import RULE_INFO

    return RULE_INFO


def problems(zoo: Path | None = ZOO) -> list[str]:
    """What keeps the rule reference from being complete and true (empty when it is); with
    ``zoo`` also that every example and look-alike exists and the example's marker is there."""
    found = []
    docs = rule_docs()
    for code, info in rule_info().items():
        doc = docs.get(code)
        where = doc.module if doc else "its rule module"
        if doc is None:
            found.append(f"{code}: no `{code} {info.name}` block in the docstring of {where}")
            continue
        if doc.name != info.name:
            found.append(
                f"{code}: the docstring of {where} names it {doc.name!r}, the registry {info.name!r}"
            )
        found += [
            f"{code}: no {s!r} section in the docstring of {where}"
            for s in SECTIONS
            if not doc.sections.get(s)
        ]
        if doc.sections.get("Severity") and not re.match(
            r"\s*(error|warning|info)\b", doc.sections["Severity"]
        ):
            found.append(f"{code}: its Severity section must start with error, warning or info")
        if zoo is not None and doc.sections.get("Example") and doc.sections.get("Look-alikes"):
            found += [f"{code}: {problem}" for problem in _zoo_problems(doc, zoo)]
    return found


def _zoo_problems(doc: RuleDoc, zoo: Path) -> list[str]:
    found = []
    name, why = example_of(doc)
    buggy = marked_file(zoo, name, doc.code)
    if buggy is None:
        found.append(f"example {name!r}: no zoo program {name} with a `# expect: {doc.code}` marker")
    elif not why and fixed_twin(zoo, name, buggy) is None:
        found.append(f"example {name!r}: no fixed twin {name}_fixed (or say `(no fixed twin: why)`)")
    for other in lookalikes_of(doc):
        if program_file(zoo, other) is None:
            found.append(f"look-alike {other!r}: no such zoo program")
    return found


def example_of(doc: RuleDoc) -> tuple[str, str]:
    """The example program's name, and the reason it has no fixed twin ("" when it has one)."""
    text = doc.sections.get("Example", "")
    match = re.match(r"(\S+)\s*(?:\(no fixed twin:\s*(.*)\))?", text, re.S)
    return (match.group(1), " ".join((match.group(2) or "").split())) if match else ("", "")


def lookalikes_of(doc: RuleDoc) -> list[str]:
    return [name for name in re.split(r"[,\s]+", doc.sections.get("Look-alikes", "")) if name]


def program_file(zoo: Path, name: str) -> Path | None:
    """A zoo program by name: ``NAME.py``, or a package folder ``NAME/`` (its entry module)."""
    single = zoo / f"{name}.py"
    if single.is_file():
        return single
    folder = zoo / name
    if folder.is_dir():
        entries = [p for p in sorted(folder.glob("*.py")) if "\ndef run(" in p.read_text()]
        return entries[0] if entries else None
    return None


def marked_file(zoo: Path, name: str, code: str) -> Path | None:
    """The file of program ``name`` holding a ``# expect:`` marker for ``code``."""
    first = program_file(zoo, name)
    if first is None:
        return None
    candidates = [first] if first.parent == zoo else sorted(first.parent.glob("*.py"))
    for path in candidates:
        for line in path.read_text().splitlines():
            match = _EXPECT.search(line)
            if match and code in match.group(1).replace(",", " ").split():
                return path
    return None


def fixed_twin(zoo: Path, name: str, buggy: Path) -> Path | None:
    twin = zoo / f"{name}_fixed.py" if buggy.parent == zoo else zoo / f"{name}_fixed" / buggy.name
    return twin if twin.is_file() else None


def render(code: str, zoo: Path | None = ZOO) -> str:
    """The Markdown page of ``code`` (examples from ``zoo`` when it exists, else a pointer to the site)."""
    doc = rule_docs()[code]
    info = rule_info().get(code)
    family = _FAMILIES.get(info.family, info.family) if info else ""
    s = doc.sections
    out = [
        f"# {code} {doc.name}",
        "",
        f"**Severity:** {_one_line(s['Severity'])}  ",
        f"**Family:** {family}  ",
        f"**In the terminal:** `python -m warptrace explain {code}`",
    ]
    for key in ("Proves", "Mechanism", "Evidence"):
        out += ["", f"## {_TITLES[key]}", "", s[key]]
    out += ["", "## Example", ""]
    out += _example(doc, zoo) if zoo is not None and zoo.is_dir() else _no_zoo()
    out += ["", "## Fix", "", s["Fix"]]
    out += ["", f"## {_TITLES['Silent on']}", "", s["Silent on"], ""]
    out += _lookalikes(doc, zoo if zoo is not None and zoo.is_dir() else None)
    out += ["", "## Warp documentation", "", s["Warp documentation"]]
    return "\n".join(out).rstrip() + "\n"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _no_zoo() -> list[str]:
    return [
        "The example programs live in the repository's `tests/programs/` (not installed with the "
        "package); the online page shows them.",
    ]


def _example(doc: RuleDoc, zoo: Path) -> list[str]:
    name, why = example_of(doc)
    buggy = marked_file(zoo, name, doc.code)
    if buggy is None:
        return [f"(no zoo program `{name}` shows {doc.code})"]
    rel = buggy.relative_to(zoo.parent.parent).as_posix()
    prose, code = _split_program(buggy.read_text(), doc.code)
    numerics = " It is recorded with `--check-numerics`." if "# check-numerics" in buggy.read_text() else ""
    out = [
        f"`{rel}`, from the test zoo: the tests check that warptrace reports {doc.code} on the line "
        f"marked `# <- {doc.code}` and that the program's gradient is what its docstring says.{numerics}",
        "",
        *_quote(prose),
        "```python",
        code.rstrip(),
        "```",
    ]
    twin = None if why else fixed_twin(zoo, name, buggy)
    if twin is None:
        return [*out, "", f"No fixed twin: {why}" if why else ""]
    twin_rel = twin.relative_to(zoo.parent.parent).as_posix()
    twin_prose, twin_code = _split_program(twin.read_text(), doc.code)
    diff = difflib.unified_diff(
        code.splitlines(), twin_code.splitlines(), f"{buggy.name}", f"{twin.name}", lineterm="", n=2
    )
    return [
        *out,
        "",
        f"The fixed twin, `{twin_rel}` (the tests check that it gets no error or warning and that its "
        "gradient is right):",
        "",
        *_quote(twin_prose),
        "```diff",
        *list(diff)[2:],
        "```",
    ]


def _quote(prose: str) -> list[str]:
    if not prose:
        return []
    return [*(f"> {line}".rstrip() for line in prose.splitlines()), ""]


def _split_program(text: str, code: str) -> tuple[str, str]:
    """(the module docstring, the code after it) with the zoo's test directives removed and the
    ``# expect:`` markers turned into a note on the line."""
    prose = ""
    match = re.match(r'\s*"""(.*?)"""\n', text, re.S)
    if match:
        prose = textwrap.dedent(match.group(1)).strip().replace("``", "`")
        text = text[match.end() :]
    lines = []
    for line in text.splitlines():
        if _DIRECTIVE.match(line.strip()):
            continue
        marker = _EXPECT.search(line)
        if marker:
            line = f"{line[: marker.start()]}  # <- {marker.group(1).strip()}"
        lines.append(line)
    return prose, "\n".join(lines).strip("\n") + "\n"


def _lookalikes(doc: RuleDoc, zoo: Path | None) -> list[str]:
    out = ["Zoo look-alikes the tests keep silent:", ""]
    for name in lookalikes_of(doc):
        path = program_file(zoo, name) if zoo is not None else None
        summary = _first_sentence(path.read_text()) if path is not None else ""
        out.append(f"- `{name}`" + (f": {summary}" if summary else ""))
    return out


def _first_sentence(text: str) -> str:
    match = re.match(r'\s*"""(.*?)(?:\n\s*\n|""")', text, re.S)
    if not match:
        return ""
    line = " ".join(match.group(1).split()).replace("``", "`")
    return re.sub(r"^Look-alike(?: of [A-Z0-9/ ,and]+)?(?: \(fine\))?:\s*", "", line)


def render_index() -> str:
    """The rule index: one table row per code, grouped by family."""
    docs = rule_docs()
    out = [
        "# Rules",
        "",
        "Every finding carries a code. Each page says what the rule proves, Warp's mechanism "
        "behind it, the evidence the trace holds, a buggy program and its fix from the test zoo, "
        "the look-alikes it stays silent on, and where Warp's documentation explains it. "
        "`python -m warptrace explain CODE` prints the same page in the terminal.",
        "",
        "Severity: `error` = the gradients are wrong; `warning` = likely wrong or fragile; "
        "`info` = worth knowing, gradients fine.",
    ]
    infos = rule_info()
    for family, title in _FAMILIES.items():
        codes = [code for code, info in infos.items() if info.family == family]
        if not codes:
            continue
        out += [
            "",
            f"## {title[:1].upper() + title[1:]}",
            "",
            _FAMILY_NOTES.get(family, ""),
            "",
            "| code | name | severity | what it proves |",
            "|---|---|---|---|",
        ]
        for code in codes:
            doc = docs.get(code)
            summary = doc.summary.replace("|", "\\|") if doc else ""
            level = doc.level if doc else ""
            out.append(f"| [{code}]({code}.md) | {infos[code].name} | {level} | {summary} |")
    return "\n".join(out) + "\n"


def listing() -> str:
    """``explain`` without a code: one line per rule."""
    docs = rule_docs()
    infos = rule_info()
    width = max(len(info.name) for info in infos.values())
    lines = []
    for code, info in infos.items():
        doc = docs.get(code)
        level = doc.level if doc else ""
        summary = doc.summary if doc else ""
        lines.append(f"{code}  {info.name:<{width}}  {level:<7}  {summary}")
    return "\n".join(lines) + "\n"
