"""``gradcheck`` and ``bisect --run``: measure a gradient on the unmodified script.

- :mod:`~warptrace.probe.driver` (no Warp) plans the runs from a recording and starts
  each one as a fresh process;
- :mod:`~warptrace.probe.child` is that process: it runs the script like ``python``;
- :mod:`~warptrace.probe.hooks` (imports Warp) perturbs, reads and stops inside it;
- :mod:`~warptrace.probe.objective` reads each backward's objective there (``loss=`` and
  hand seeds, Σ seed·y);
- :mod:`~warptrace.probe.verdict` (no Warp) turns the numbers into a verdict.
"""
