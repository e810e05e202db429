"""Run a user's program the way ``python script.py`` / ``python -m module`` would.

A recording is only worth something if the recorded run *is* the user's run: the
program must see the same ``sys.argv``, ``__main__`` module, ``sys.path[0]`` and working
directory, and the user must get back the same exit status and tracebacks that point at
their own lines. This module does that and nothing else; it knows nothing about
recording, so it can be tested on its own (``run_script``) against plain ``python``.

Modelled on coverage.py's ``execfile.PyRunner``: ``prepare()`` does everything that can
fail before the program starts (so a typo is one line and exit 2, not a traceback),
``run()`` executes it and turns its ending (normal, exception, ``sys.exit``, Ctrl-C)
into a :class:`RunResult`, printing what Python itself would have printed.
"""

from __future__ import annotations

import builtins
import importlib.machinery
import importlib.util
import os
import runpy
import sys
import threading
import traceback
import types
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from warptrace.errors import ScriptError

# Exit status of a run ended by Ctrl-C. Python itself re-raises SIGINT so the shell
# sees 128 + 2; a function returning an int can only report the number.
INTERRUPTED_STATUS = 130

# Module names whose frames sit between our ``exec`` and the user's first line when a
# module is run with -m (runpy) or its parent package is imported (importlib).
_MACHINERY_MODULES = frozenset({"runpy", "importlib._bootstrap", "importlib._bootstrap_external"})

_BaseExceptionGroup: Any = getattr(builtins, "BaseExceptionGroup", None)


@dataclass(frozen=True)
class RunResult:
    """How the program ended. ``error`` is a one-line description of an uncaught exception."""

    exit_status: int
    error: str | None = None
    interrupted: bool = False
    stopped: bool = False  # ended on purpose by one of ``run(stop_on=...)``'s exceptions


class ScriptRunner:
    """Runs one program (a ``.py`` file, or a module with ``as_module=True``) in this process."""

    def __init__(self, target: str, args: Sequence[str] = (), *, as_module: bool = False) -> None:
        self.target = target
        self.args = list(args)
        self.as_module = as_module
        self._source: bytes | None = None
        self._prepared = False

    @property
    def name(self) -> str:
        """Short program name, used for the default trace name: script stem or last module component."""
        if self.as_module:
            return self.target.rsplit(".", 1)[-1]
        return os.path.splitext(os.path.basename(self.target))[0]

    @property
    def command(self) -> list[str]:
        """The program's command line as typed after ``python`` (for the trace's metadata)."""
        if self.as_module:
            return ["-m", self.target, *self.args]
        return [self.target, *self.args]

    # ------------------------------------------------------------------ prepare

    def prepare(self) -> None:
        """Check that the program exists and can be read, without running any of its code.

        Raises :class:`ScriptError` with a one-line message (a missing script, a directory,
        a file that is not Python, an unknown module)."""
        if self.as_module:
            self._check_module()
        else:
            self._read_script()
        self._prepared = True

    def _read_script(self) -> None:
        path = self.target
        if not os.path.exists(path):
            raise ScriptError(f"no such script: {path}")
        if os.path.isdir(path):
            raise ScriptError(
                f"{path} is a directory, not a Python script (give its .py file, or run a package with -m)"
            )
        if os.path.splitext(path)[1].lower() not in (".py", ".pyw"):
            raise ScriptError(f"{path} is not a Python script (expected a .py file, or -m MODULE)")
        try:
            with open(path, "rb") as source_file:
                self._source = source_file.read()
        except OSError as exc:
            raise ScriptError(f"can't open file {path}: {exc.strerror or exc}") from None

    def _check_module(self) -> None:
        """Look up the top-level package only: deeper names need their parents imported,
        which runs user code, so that part of the lookup happens in ``run()`` like Python's."""
        name = self.target
        if not name or name.startswith("."):
            raise ScriptError(f"-m needs an absolute module name, not {name!r}")
        if name.endswith(".py") and os.path.isfile(name):
            raise ScriptError(f"-m takes a module name: use '-m {name[:-3]}', or give {name} without -m")
        top = name.partition(".")[0]
        saved_path = sys.path[:]
        try:
            _set_path0(os.getcwd())
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            spec = None
        finally:
            sys.path[:] = saved_path
        if spec is None:
            raise ScriptError(f"No module named {top}")

    # ---------------------------------------------------------------------- run

    def run(self, stop_on: tuple[type[BaseException], ...] = ()) -> RunResult:
        """Run the program to its end and restore ``sys`` afterwards.

        Exceptions in the program are printed the way Python prints them (through
        ``sys.excepthook``, warptrace frames peeled) and become the exit status, like
        ``python`` would; only :class:`ScriptError` escapes (``-m`` names a missing
        submodule). An exception of a ``stop_on`` type is warptrace ending the run on
        purpose (the probe stops a script at a chosen backward): it prints nothing and
        gives ``RunResult(0, stopped=True)``."""
        if not self._prepared:
            self.prepare()
        saved = _SysState()
        threads_before = set(threading.enumerate())
        try:
            result = self._execute(stop_on)
            try:
                # Python waits for non-daemon threads before it exits; the program's
                # threads belong to the run, so the recording must wait for them too.
                _join_new_threads(threads_before)
            except KeyboardInterrupt:
                result = RunResult(INTERRUPTED_STATUS, "KeyboardInterrupt", interrupted=True)
            return result
        finally:
            saved.restore()

    def _execute(self, stop_on: tuple[type[BaseException], ...] = ()) -> RunResult:
        main_globals: dict[str, Any] = {}
        if self.as_module:
            self._install_module_sys()
        else:
            main_globals = self._install_script_sys()
        try:
            if self.as_module:
                runpy.run_module(
                    self.target, init_globals=_main_extras(), run_name="__main__", alter_sys=True
                )
            else:
                # A SyntaxError here is the program's failure, reported like python's (exit 1).
                code = compile(self._source or b"", main_globals["__file__"], "exec", dont_inherit=True)
                exec(code, main_globals)
        except SystemExit as exc:
            return RunResult(_system_exit_status(exc))
        except BaseException as exc:
            if stop_on and isinstance(exc, stop_on):
                return RunResult(0, stopped=True)
            if self.as_module and _is_module_lookup_error(exc):
                raise ScriptError(str(exc)) from None
            print_uncaught(exc)
            if isinstance(exc, KeyboardInterrupt):
                return RunResult(INTERRUPTED_STATUS, "KeyboardInterrupt", interrupted=True)
            return RunResult(1, _one_line(exc))
        return RunResult(0)

    def _install_script_sys(self) -> dict[str, Any]:
        """Set up ``sys`` and a fresh ``__main__`` exactly as ``python script.py`` does (3.9+)."""
        sys.argv = [self.target, *self.args]
        # python: sys.path[0] is the folder of the script with symlinks resolved ...
        _set_path0(os.path.dirname(os.path.realpath(self.target)))
        # ... while __file__ is the path as given, made absolute but not normalized.
        main_file = self.target if os.path.isabs(self.target) else os.path.join(os.getcwd(), self.target)
        module = types.ModuleType("__main__")
        main_globals = module.__dict__
        main_globals.update(_main_extras())
        main_globals["__file__"] = main_file
        main_globals["__cached__"] = None
        main_globals["__loader__"] = importlib.machinery.SourceFileLoader("__main__", main_file)
        sys.modules["__main__"] = module
        return main_globals

    def _install_module_sys(self) -> None:
        """``python -m``: cwd first on sys.path; runpy puts the module's path in argv[0] once found."""
        sys.argv = ["-m", *self.args]
        _set_path0(os.getcwd())


def run_script(target: str, args: Sequence[str] = (), *, as_module: bool = False) -> int:
    """Run a program like ``python`` would, without recording; returns its exit status."""
    runner = ScriptRunner(target, args, as_module=as_module)
    runner.prepare()
    return runner.run().exit_status


# ---------------------------------------------------------------------- sys state


class _SysState:
    """What running a program changes in ``sys``, saved so that an in-process run leaves no trace."""

    def __init__(self) -> None:
        self.argv = sys.argv
        self.path = sys.path[:]
        self.main = sys.modules.get("__main__")

    def restore(self) -> None:
        sys.argv = self.argv
        sys.path[:] = self.path
        if self.main is not None:
            sys.modules["__main__"] = self.main


def _main_extras() -> dict[str, Any]:
    """Names the interpreter's own ``__main__`` holds before any code runs, beyond a module's."""
    extras: dict[str, Any] = {}
    # An empty __annotations__ dict, until PEP 649 (3.14) made module annotations lazy.
    if sys.version_info < (3, 14):
        extras["__annotations__"] = {}
    # The builtins *module* (exec alone would insert the builtins dict).
    extras["__builtins__"] = builtins
    return extras


def _set_path0(folder: str) -> None:
    # With -P / PYTHONSAFEPATH python prepends nothing, so the launcher's sys.path[0] is
    # not ours to replace either.
    if getattr(sys.flags, "safe_path", False):
        return
    if sys.path:
        sys.path[0] = folder
    else:
        sys.path.insert(0, folder)


def _join_new_threads(before: set[threading.Thread]) -> None:
    current = threading.current_thread()
    while True:
        pending = [
            thread
            for thread in threading.enumerate()
            if thread not in before and thread is not current and not thread.daemon and thread.is_alive()
        ]
        if not pending:
            return
        for thread in pending:
            thread.join()


# ------------------------------------------------------------------- exits, errors


def _system_exit_status(exc: SystemExit) -> int:
    """Python's rule: None is 0, an int is itself, anything else is printed to stderr and is 1.

    A bool is an int to Python (``unittest.main`` exits with ``sys.exit(False)``): 0 or 1.
    """
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return int(code)
    stderr = sys.stderr
    if stderr is not None:
        try:
            stderr.write(f"{code}\n")
            stderr.flush()
        except (OSError, ValueError):
            pass
    return 1


def _one_line(exc: BaseException) -> str:
    message = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {message[0]}" if message else type(exc).__name__


def _is_module_lookup_error(exc: BaseException) -> bool:
    """True for runpy's own "No module named ..." (raised by runpy itself, not by user code)."""
    if type(exc) is not ImportError:
        return False
    innermost = exc.__traceback__
    while innermost is not None and innermost.tb_next is not None:
        innermost = innermost.tb_next
    return innermost is not None and innermost.tb_frame.f_globals.get("__name__") == "runpy"


def _is_own(entry: types.TracebackType) -> bool:
    name = entry.tb_frame.f_globals.get("__name__", "")
    return name == "warptrace" or name.startswith("warptrace.")


def peel_traceback(tb: types.TracebackType | None) -> types.TracebackType | None:
    """Drop warptrace's frames so a traceback reads as if ``python`` had run the program.

    The leading frames (this runner, runpy, importlib) always go. warptrace frames in the
    middle (the recorder's wrappers around Warp calls) go too, unless the exception was
    raised *inside* warptrace: then it may be our bug and the frames stay visible."""
    entries: list[types.TracebackType] = []
    while tb is not None:
        entries.append(tb)
        tb = tb.tb_next
    start = 0
    while start < len(entries) and (
        _is_own(entries[start]) or entries[start].tb_frame.f_globals.get("__name__") in _MACHINERY_MODULES
    ):
        start += 1
    kept = entries[start:]
    if kept and not _is_own(kept[-1]):
        kept = [entry for entry in kept if not _is_own(entry)]
    peeled = None
    for entry in reversed(kept):
        peeled = types.TracebackType(peeled, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return peeled


def _peel_chain(exc: BaseException | None, seen: set[int]) -> None:
    if exc is None or id(exc) in seen:
        return
    seen.add(id(exc))
    exc.__traceback__ = peel_traceback(exc.__traceback__)
    _peel_chain(exc.__cause__, seen)
    _peel_chain(exc.__context__, seen)
    if _BaseExceptionGroup is not None and isinstance(exc, _BaseExceptionGroup):
        for inner in exc.exceptions:
            _peel_chain(inner, seen)


def print_uncaught(exc: BaseException) -> None:
    """Report an exception that ended the program, the way the interpreter does at top level.

    Goes through ``sys.excepthook`` (the program may have installed its own) and sets
    ``sys.last_*`` like ``PyErr_Print`` so post-mortem tools find it."""
    _peel_chain(exc, set())
    tb = exc.__traceback__
    sys.last_type, sys.last_value, sys.last_traceback = type(exc), exc, tb
    if sys.version_info >= (3, 12):
        sys.last_exc = exc
    hook = getattr(sys, "excepthook", None) or sys.__excepthook__
    try:
        hook(type(exc), exc, tb)
    except BaseException as hook_exc:
        # What PyErr_Print does when the hook itself fails.
        stderr = sys.stderr or sys.__stderr__
        if stderr is None:
            return
        stderr.write("Error in sys.excepthook:\n")
        traceback.print_exception(type(hook_exc), hook_exc, hook_exc.__traceback__, file=stderr)
        stderr.write("\nOriginal exception was:\n")
        traceback.print_exception(type(exc), exc, tb, file=stderr)
