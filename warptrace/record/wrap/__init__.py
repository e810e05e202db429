"""The wrappers: every Warp entry point that touches memory, turned into events.

One module per thing wrapped, each with ``make_*`` factories that take the original
object and return the wrapper :mod:`warptrace.record.install` puts in its place:

- :mod:`.launch`: ``wp.launch`` and ``Launch.launch`` (record_cmd replays); access roles
  per kernel come from :mod:`.plans`;
- :mod:`.memory`: ``wp.copy``, ``zero_``/``fill_``, native utilities (``array_scan``,
  radix sort, ...), value reads (``numpy()``/``list()``);
- :mod:`.allocation`: array allocation, views, gradient allocation, and the
  ``requires_grad``/``retain_grad``/``grad`` attributes;
- :mod:`.tape`: ``wp.Tape`` (creation, scope, backward, zero/reset, record_func);
- :mod:`.capture`: graph capture begin/end/launch.

Every wrapper uses one guard idiom: read the session global once (``rec =
state.rec``; ``None``: exactly the original call), then this thread's state (``ts =
rec.local.state``, or ``rec.thread_state()`` on a thread's first event); ``ts.guard``
up means warptrace's own call into Warp or a Warp call nested in a recorded one: the
original call, unrecorded. Wrappers that must see a nested call (the grad copy inside
``wp.copy``, the allocation of a grad, a tape entry added by a copy) say so where they
read the guard. Recording code runs in ``try``/``except`` blocks that hand errors to
``Recorder.fail``: a warptrace bug must never change what the user's program does.

Objects keep small ``_warptrace_*`` attributes after ``stop()`` (arrays, tapes,
graphs, record_cmd launches); every value carries its session token, so a later
session ignores them.
"""
