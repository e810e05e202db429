"""Sphinx configuration of the documentation site (Markdown pages read by MyST-Parser).

Build: ``python -m sphinx -W --keep-going -n -b dirhtml docs site`` (CI: warnings, broken
cross-references and missing anchors fail). The navigation is the toctrees of ``index.md``:
a new page is one line there. ``tools/sphinx_checks.py`` fails the build when a rule's
documentation is incomplete or a generated page is stale.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tools")]

from warptrace import __version__  # noqa: E402
from warptrace.analysis.ruledocs import DOCS_URL  # noqa: E402

project = "warptrace"
author = "the warptrace authors"
copyright = "the warptrace authors"
release = version = __version__

extensions = ["myst_parser", "sphinx_checks"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
root_doc = "index"

myst_heading_anchors = 3  # `page.md#a-heading` links, checked (a missing anchor is a warning)
myst_enable_extensions = ["attrs_inline"]

html_theme = "furo"
html_title = f"warptrace {__version__}"
html_baseurl = DOCS_URL  # the one place the site's address is written: warptrace.analysis.ruledocs
html_show_sourcelink = False
html_static_path: list[str] = []
pygments_style = "friendly"
