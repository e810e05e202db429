"""Recording: the only package that imports Warp.

``recorder.start(path)`` installs the wrappers (``install.py``/``patches.py``) that turn
every Warp memory effect into rows of the trace; ``recorder.stop()`` restores Warp and
finishes the trace. Importing this package patches nothing.
"""
