"""Library code in a trace: which buffers a library made, and which library object keeps them.

The recorder pairs a call site inside an installed package (Newton's solvers, any
``site-packages`` code) with the first *user* line above it (``sites.library_site``, schema
6): findings point at the user's line and keep the library line beside it. This module
answers the questions about the library side that the messages and fixes need:

- :func:`library_name`: "newton" for ``.../site-packages/newton/_src/...``;
- :func:`buffer_owner`: for an array allocated inside a library, which library function
  made it, when (the user line that called into the library), and, for a buffer stored on
  ``self`` in a method (``self.M = wp.zeros(...)`` in ``SolverFeatherstone``), the class of
  the object that keeps it. A buffer that an object keeps and rewrites on every call is
  the typical overwrite inside a library: a solver reused across taped steps overwrites
  its work buffers, and a fresh object per step (or the library's gradient-safe mode) is
  the fix.

Pure: works on the model alone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from warptrace.analysis.model import Model

_PACKAGE_DIRS = ("site-packages", "dist-packages")


def library_name(path: str) -> str:
    """The top-level package of a file inside an installed-package folder ("newton"), else the
    name of the folder holding it ("" for an empty path)."""
    parts = path.replace("\\", "/").split("/")
    for i, part in enumerate(parts[:-1]):
        if part in _PACKAGE_DIRS and i + 1 < len(parts):
            top = parts[i + 1]
            return top[:-3] if top.endswith(".py") else top
    return os.path.basename(os.path.dirname(path)) if path else ""


@dataclass(frozen=True)
class Owner:
    """Where a library made a buffer."""

    library: str  # "newton"
    function: str  # the library function that allocated it ("SolverFeatherstone._allocate_model_aux_vars")
    owner_class: str  # the class whose instance keeps it (``self.M``), or "" when not on ``self``
    user_line: int  # the user line that called into the library when it was made (0: none)
    user_text: str  # that line's text

    def phrase(self) -> str:
        """ "`SolverFeatherstone` (newton) allocated it once, when line 43 ran (`solver = ...`)"."""
        who = (
            f"`{self.owner_class}` ({self.library})"
            if self.owner_class
            else f"`{self.function}` ({self.library})"
        )
        when = f", when line {self.user_line} ran (`{self.user_text}`)" if self.user_line else ""
        return f"{who} allocated it{when}"


def library_site(model: Model, site_id: int) -> int:
    """The site id of the library line behind a user call site (-1: the user line calls Warp)."""
    row = model.sites.get(int(site_id))
    inner = row.get("library_site") if row is not None else None
    return int(inner) if inner is not None else -1


def buffer_owner(model: Model, array_id: int) -> Owner | None:
    """The library allocation behind ``array_id``, or None when the user's own line made it."""
    site = model.allocation_site(array_id)
    inner = library_site(model, site)
    if inner < 0:
        return None
    row = model.sites.get(inner)
    user = model.sites.get(site)
    if row is None or user is None:
        return None
    function = row["function"] or ""
    label = row["label"] or ""
    owner_class = ""
    if label.startswith("self.") and "." in function:
        # the class part of the method's qualified name ("Outer.<locals>.Inner.method" -> "Inner")
        owner_class = [part for part in function.split(".")[:-1] if part != "<locals>"][-1]
    return Owner(
        library=library_name(row["file"] or ""),
        function=function,
        owner_class=owner_class,
        user_line=int(user["line"] or 0),
        user_text=user["text"] or "",
    )


def kept_buffer_fix(owner: Owner) -> str:
    """The fix when the overwritten buffer is one a library object keeps across calls."""
    return (
        f"`{owner.owner_class}` keeps this buffer and rewrites it on every call: create a fresh "
        f"`{owner.owner_class}` for each taped step (or use {owner.library}'s gradient-safe mode, if it has "
        "one), so that each step's values live in memory of their own until tape.backward()"
    )
