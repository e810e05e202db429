"""The runner runs a program exactly as ``python`` does: a differential test.

tests/probe_env.py prints what a program sees (argv, __main__, __file__, sys.path[0],
cwd, ...) and ends as told. It runs under plain ``python`` and under each launcher
below; stdout, exit status and (where Python's own output has no frames of its
launcher) stderr must be identical.

Launchers: ``runner`` runs the probe through ``warptrace.runner.run_script`` alone
(no recording, so it runs before the recorder exists); ``cli`` is the real
``python -m warptrace -q --no-analyze`` and needs the recorder.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from warptrace.errors import ScriptError
from warptrace.runner import ScriptRunner, run_script

REPO = Path(__file__).resolve().parent.parent
PROBE = Path(__file__).resolve().parent / "probe_env.py"

# The recorder is written in parallel; the cli launcher runs once it can record.
HAS_RECORDER = all(
    importlib.util.find_spec(f"warptrace.record.{name}") is not None for name in ("recorder", "install")
)

RUNNER_HARNESS = """\
import sys
from warptrace.runner import run_script
args = sys.argv[1:]
as_module = args[0] == "-m"
if as_module:
    args = args[1:]
sys.exit(run_script(args[0], args[1:], as_module=as_module))
"""

LAUNCHERS = {
    "runner": [sys.executable, "-c", RUNNER_HARNESS],
    "cli": [sys.executable, "-m", "warptrace", "-q", "--no-analyze"],
}
LAUNCHER_PARAMS = [
    pytest.param("runner"),
    pytest.param(
        "cli", marks=pytest.mark.skipif(not HAS_RECORDER, reason="warptrace.record.recorder not written yet")
    ),
]


@pytest.fixture
def sandbox(tmp_path: Path) -> Path:
    """A working directory holding the probe as a script (sub/) and inside a package (probepkg/)."""
    (tmp_path / "sub").mkdir()
    shutil.copy(PROBE, tmp_path / "sub" / "probe_env.py")
    (tmp_path / "probepkg").mkdir()
    (tmp_path / "probepkg" / "__init__.py").write_text("")
    shutil.copy(PROBE, tmp_path / "probepkg" / "probe_env.py")
    return tmp_path


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.pop("PYTHONSAFEPATH", None)
    return env


def _run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=120)


def _both(launcher: str, program: list[str], cwd: Path):
    """(plain python, launcher) results for the same program words."""
    return _run([sys.executable, *program], cwd), _run([*LAUNCHERS[launcher], *program], cwd)


def _no_warptrace_frames(stderr: str) -> bool:
    package = str(REPO / "warptrace")
    return package not in stderr and "warptrace/" not in stderr and "<frozen runpy>" not in stderr


# --------------------------------------------------------------- the environment


@pytest.mark.parametrize("launcher", LAUNCHER_PARAMS)
@pytest.mark.parametrize(
    "program",
    [
        ["sub/probe_env.py"],
        ["sub/probe_env.py", "a", "--b", "-c=3"],
        ["sub/probe_env.py", "--help"],  # belongs to the program, not to warptrace
        ["sub/probe_env.py", "-q", "-o", "x", "--no-analyze"],  # warptrace's own option names too
        ["./sub/../sub/probe_env.py", "x"],  # __file__ keeps the path as given, made absolute
        ["-m", "probepkg.probe_env", "x", "--help"],
        ["sub/probe_env.py", "--", "-q", "x"],  # Python passes a `--` after the script on
        ["-m", "probepkg.probe_env", "-o", "x", "--", "y"],
    ],
    ids=["plain", "args", "help", "our-options", "unnormalized", "module", "dashdash", "module-dashdash"],
)
def test_program_sees_what_python_gives_it(launcher, program, sandbox):
    python, ours = _both(launcher, program, sandbox)
    assert python.returncode == 0, python.stderr
    assert ours.stdout == python.stdout
    assert ours.returncode == python.returncode
    assert ours.stderr == python.stderr == ""


@pytest.mark.parametrize("launcher", LAUNCHER_PARAMS)
def test_absolute_path_and_other_cwd(launcher, sandbox):
    elsewhere = sandbox / "elsewhere"
    elsewhere.mkdir()
    python, ours = _both(launcher, [str(sandbox / "sub" / "probe_env.py"), "1"], elsewhere)
    assert ours.stdout == python.stdout
    seen = json.loads(ours.stdout)
    assert seen["cwd"] == str(elsewhere)
    assert seen["path0"] == str(sandbox / "sub")


@pytest.mark.parametrize("launcher", LAUNCHER_PARAMS)
def test_symlinked_script_puts_its_real_folder_first(launcher, sandbox):
    (sandbox / "link.py").symlink_to(sandbox / "sub" / "probe_env.py")
    python, ours = _both(launcher, ["link.py"], sandbox)
    assert ours.stdout == python.stdout
    assert json.loads(ours.stdout)["path0"] == str(sandbox / "sub")


# --------------------------------------------------------------- how it ends


@pytest.mark.parametrize("launcher", LAUNCHER_PARAMS)
@pytest.mark.parametrize(
    "ending",
    [["--exit", "0"], ["--exit", "3"], ["--exit", "42"], ["--exit-none"], ["--exit-msg", "bye now"]],
    ids=["exit0", "exit3", "exit42", "exit-none", "exit-msg"],
)
def test_exit_status_and_message_like_python(launcher, ending, sandbox):
    python, ours = _both(launcher, ["sub/probe_env.py", *ending], sandbox)
    assert ours.returncode == python.returncode
    assert ours.stdout == python.stdout
    assert ours.stderr == python.stderr
    if ending[0] == "--exit-msg":
        assert ours.returncode == 1
        assert ours.stderr == "bye now\n"


@pytest.mark.parametrize("launcher", LAUNCHER_PARAMS)
def test_traceback_is_pythons_own(launcher, sandbox):
    python, ours = _both(launcher, ["sub/probe_env.py", "--raise", "boom"], sandbox)
    assert ours.returncode == python.returncode == 1
    assert ours.stdout == python.stdout
    assert ours.stderr == python.stderr
    assert 'probe_env.py", line' in ours.stderr and ", in fail" in ours.stderr
    assert ours.stderr.rstrip().endswith("ValueError: boom")
    assert _no_warptrace_frames(ours.stderr)


@pytest.mark.parametrize("launcher", LAUNCHER_PARAMS)
def test_module_traceback_has_no_launcher_frames(launcher, sandbox):
    python, ours = _both(launcher, ["-m", "probepkg.probe_env", "--raise", "boom"], sandbox)
    assert ours.returncode == python.returncode == 1
    # python -m shows its own runpy frames; ours are peeled, the rest is identical.
    expected = "".join(
        line for line in python.stderr.splitlines(keepends=True) if "<frozen runpy>" not in line
    )
    assert ours.stderr == expected
    assert _no_warptrace_frames(ours.stderr)


@pytest.mark.parametrize("launcher", LAUNCHER_PARAMS)
def test_syntax_error_like_python(launcher, sandbox):
    (sandbox / "bad.py").write_text("print('never')\ndef (\n")
    python, ours = _both(launcher, ["bad.py"], sandbox)
    assert ours.returncode == python.returncode == 1
    assert ours.stderr == python.stderr
    assert "SyntaxError" in ours.stderr and _no_warptrace_frames(ours.stderr)


@pytest.mark.parametrize("launcher", LAUNCHER_PARAMS)
def test_non_daemon_threads_finish_inside_the_run(launcher, sandbox):
    python, ours = _both(launcher, ["sub/probe_env.py", "--thread"], sandbox)
    assert ours.stdout == python.stdout
    assert ours.stdout.rstrip().endswith("thread done")


@pytest.mark.parametrize("launcher", LAUNCHER_PARAMS)
def test_keyboard_interrupt(launcher, sandbox):
    # python kills itself with SIGINT (-2); a function returning an int reports 130 (= 128 + 2).
    ours = _run([*LAUNCHERS[launcher], "sub/probe_env.py", "--interrupt"], sandbox)
    assert ours.returncode == 130
    assert ours.stderr.rstrip().endswith("KeyboardInterrupt")
    assert "probe_env.py" in ours.stderr and _no_warptrace_frames(ours.stderr)


# ------------------------------------------------------ programs that cannot start


@pytest.mark.parametrize(
    "words, message",
    [
        (["missing.py"], "no such script: missing.py"),
        (["sub"], "is a directory"),
        (["notes.txt"], "is not a Python script"),
        (["-m", "no_such_module_xyz"], "No module named no_such_module_xyz"),
        (["-m"], "-m needs a MODULE"),
        (["--bogus", "sub/probe_env.py"], "unknown option --bogus"),
        (["--fail-on", "error", "sub/probe_env.py"], "--fail-on is an option of 'warptrace analyze'"),
        ([], "nothing to run"),
    ],
    ids=[
        "missing",
        "directory",
        "not-python",
        "unknown-module",
        "m-without-module",
        "bad-option",
        "fail-on",
        "empty",
    ],
)
def test_bad_program_is_one_line_and_exit_2(words, message, sandbox):
    (sandbox / "notes.txt").write_text("not python\n")
    result = _run([sys.executable, "-m", "warptrace", *words], sandbox)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("warptrace: error: ")
    assert message in lines[0]
    assert not list(sandbox.glob("*.wtrace")), "no trace is written for a program that cannot start"


def test_help_and_version():
    result = _run([sys.executable, "-m", "warptrace", "--help"], REPO)
    assert result.returncode == 0
    assert result.stdout.startswith("usage: python -m warptrace [options] SCRIPT.py")
    version = _run([sys.executable, "-m", "warptrace", "--version"], REPO)
    assert version.returncode == 0 and version.stdout.startswith("warptrace ")


# ------------------------------------------------------------------ in-process


def test_in_process_run_restores_sys(sandbox, capsys, monkeypatch):
    monkeypatch.chdir(sandbox)
    argv, path, main = sys.argv, sys.path[:], sys.modules["__main__"]
    assert run_script("sub/probe_env.py", ["--exit", "7"]) == 7
    seen = json.loads(capsys.readouterr().out)
    assert seen["argv"] == ["sub/probe_env.py", "--exit", "7"]
    assert seen["main_is_self"] and seen["name"] == "__main__"
    assert (sys.argv, sys.path, sys.modules["__main__"]) == (argv, path, main)


def test_in_process_module_run(sandbox, capsys, monkeypatch):
    monkeypatch.chdir(sandbox)
    assert run_script("probepkg.probe_env", ["x"], as_module=True) == 0
    seen = json.loads(capsys.readouterr().out)
    assert seen["argv"] == [str(sandbox / "probepkg" / "probe_env.py"), "x"]
    assert seen["spec"] == "probepkg.probe_env" and seen["package"] == "probepkg"
    assert seen["path0"] == str(sandbox)
    sys.modules.pop("probepkg", None)
    sys.modules.pop("probepkg.probe_env", None)


def test_missing_submodule_is_a_script_error(sandbox, monkeypatch):
    monkeypatch.chdir(sandbox)
    runner = ScriptRunner("probepkg.nope", as_module=True)
    runner.prepare()  # the package exists; the submodule is looked up when the run starts
    with pytest.raises(ScriptError, match=r"No module named probepkg\.nope"):
        runner.run()
    sys.modules.pop("probepkg", None)


@pytest.mark.parametrize("target", ["nope.py", "sub", "notes.txt"])
def test_prepare_rejects_without_running_anything(target, sandbox, monkeypatch):
    monkeypatch.chdir(sandbox)
    (sandbox / "notes.txt").write_text("x")
    with pytest.raises(ScriptError):
        ScriptRunner(target).prepare()


WRAPPER_SCRIPT = """\
    # A stand-in for the recorder's wrapper around a Warp call: a function whose module is
    # warptrace's, calling back into user code.
    wrapper_module = {"__name__": "warptrace._fake_wrapper"}
    exec("def wrapper(fn):\\n    return fn()\\ndef broken(fn):\\n    raise RuntimeError('our bug')\\n", wrapper_module)

    def warp_call():
        raise RuntimeError("from warp")

    wrapper_module[WHICH](warp_call)
"""


@pytest.mark.parametrize("which, keeps_wrapper", [("wrapper", False), ("broken", True)])
def test_wrapper_frames_peeled_unless_the_error_is_ours(which, keeps_wrapper, tmp_path, capsys):
    script = tmp_path / "wrapped.py"
    script.write_text(textwrap.dedent(WRAPPER_SCRIPT).replace("WHICH", repr(which)))
    assert run_script(str(script)) == 1
    stderr = capsys.readouterr().err
    assert f'"{script}", line' in stderr
    assert ("in wrapper" in stderr or "in broken" in stderr) is keeps_wrapper
    assert "runner.py" not in stderr


def test_bool_exit_code_is_an_int():
    # unittest.main() ends with sys.exit(not success): the trace's meta needs an int status
    from warptrace.runner import _system_exit_status

    for code, status in ((False, 0), (True, 1)):
        result = _system_exit_status(SystemExit(code))
        assert result == status and type(result) is int
