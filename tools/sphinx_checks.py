"""A Sphinx extension of the documentation build (``docs/conf.py``): the build fails when the
rule reference is incomplete (a rule without every documented section, an example program
that does not show its code) or when a generated page (rules, commands, trace tables) differs
from what ``tools/regen_docs.py`` would write. Command output is checked by
``tools/regen_docs.py --check`` (it runs the commands; the build does not)."""

from __future__ import annotations

from typing import Any

from sphinx.errors import ExtensionError


def _check(app: Any) -> None:
    import regen_docs  # tools/, put on sys.path by docs/conf.py

    problems = regen_docs.ruledocs.problems()
    if problems:
        raise ExtensionError("the rule reference is incomplete:\n  " + "\n  ".join(problems))
    stale = regen_docs.stale(check_output=False)
    if stale:
        names = ", ".join(str(path.relative_to(regen_docs.ROOT)) for path in sorted(stale))
        raise ExtensionError(f"generated pages are stale ({names}): run python tools/regen_docs.py")


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", _check)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
