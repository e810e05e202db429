"""Only the optional compiled module (the launch, copy, zero_, fill_, numpy, _init_new,
_alloc_grad and Tape wrappers, the Tape.zero rows, the call-site frame walk, the packing of
the rows for the trace-writer process); everything else is in
pyproject.toml.

``warptrace/record/_fastlaunch.c`` is built with the machine's own C compiler for the
Python versions it was tested with (``COMPILED_FOR``). It is optional: without a
compiler or Python's headers, on another version or with ``WARPTRACE_PURE_PYTHON=1``,
the install goes on without it and the recorder uses its pure-Python code.
"""

import os
import sys

from setuptools import Extension, setup

COMPILED_FOR = ((3, 11),)  # keep in step with warptrace/record/compiled.py

ext_modules = []
if (
    sys.implementation.name == "cpython"
    and sys.version_info[:2] in COMPILED_FOR
    and os.environ.get("WARPTRACE_PURE_PYTHON", "") in ("", "0")
):
    ext_modules.append(
        Extension("warptrace.record._fastlaunch", ["warptrace/record/_fastlaunch.c"], optional=True)
    )

setup(ext_modules=ext_modules)
