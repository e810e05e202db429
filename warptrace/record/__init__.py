"""Recording: the only package that imports Warp.

``recorder.start(path)`` creates the session (``session.py``: buffers, ids, flush) and
installs the wrappers (``install.py``; one module per thing wrapped under ``wrap/``)
that turn every Warp memory effect into rows of the trace; ``recorder.stop()`` restores
Warp and finishes the trace. ``state.py`` is the session as the wrappers see it;
``identity.py`` maps arrays to memory, ``callsite.py`` finds the user's line,
``kernels.py`` says what a kernel reads and writes. Importing this package patches
nothing; it chooses between the compiled and the source form of the recorder's hot
modules (``native.py``), before any of them is imported.
"""

from warptrace.record import native  # noqa: F401  (first: see native.py)
