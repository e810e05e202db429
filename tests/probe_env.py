"""Probe: prints what a program sees of its environment, then ends as told.

Run under ``python`` and under ``python -m warptrace``, its output must be identical
(tests/test_runner.py). Arguments are read by hand, not with argparse, so that
``--help`` and any other option reach the probe untouched and get printed.

Ending, chosen by the first argument (everything is printed first):
  --exit N        sys.exit(N)
  --exit-none     sys.exit(None)
  --exit-msg MSG  sys.exit(MSG)
  --raise MSG     raise ValueError(MSG) from a nested function
  --interrupt     raise KeyboardInterrupt
  --thread        start a non-daemon thread that prints after the main code ends
anything else: fall off the end (exit status 0).
"""

import json
import os
import sys
import threading
import time


def describe() -> dict:
    main = sys.modules["__main__"]
    spec = globals().get("__spec__")
    return {
        "argv": sys.argv,
        "name": __name__,
        "file": globals().get("__file__"),
        "path0": sys.path[0],
        "cwd": os.getcwd(),
        "globals": sorted(k for k in globals() if k.startswith("__")),
        "package": globals().get("__package__"),
        "spec": spec.name if spec is not None else None,
        "loader": type(globals().get("__loader__")).__name__,
        "builtins_is_module": globals().get("__builtins__") is __import__("builtins"),
        "main_is_self": main.__dict__ is globals(),
        "doc": __doc__.splitlines()[0],
    }


def fail(message: str) -> None:
    raise ValueError(message)  # the line a traceback must point at


def late_print() -> None:
    time.sleep(0.2)
    print("thread done", flush=True)


def end(args: list) -> None:
    if not args:
        return
    if args[0] == "--exit":
        sys.exit(int(args[1]))
    if args[0] == "--exit-none":
        sys.exit(None)
    if args[0] == "--exit-msg":
        sys.exit(args[1])
    if args[0] == "--raise":
        fail(args[1])
    if args[0] == "--interrupt":
        raise KeyboardInterrupt
    if args[0] == "--thread":
        threading.Thread(target=late_print).start()


print(json.dumps(describe(), indent=1), flush=True)
end(sys.argv[1:])
