"""analysis.pages.small_pages: NumPy's huge-page advice is off inside, restored after."""

from __future__ import annotations

import pytest

from warptrace.analysis import pages


@pytest.mark.parametrize("enabled", [True, False])
def test_small_pages_turns_advice_off_and_restores_it(enabled: bool) -> None:
    setter = pages._advice_setter()
    if setter is None:
        pytest.skip("this NumPy has no huge-page advice switch")
    outside = setter(enabled)
    try:
        with pages.small_pages():
            assert setter(False) is False  # off inside the block
        assert setter(enabled) is enabled  # the setting from before the block is back
    finally:
        setter(outside)


def test_small_pages_restores_after_an_exception() -> None:
    setter = pages._advice_setter()
    if setter is None:
        pytest.skip("this NumPy has no huge-page advice switch")
    outside = setter(True)
    try:
        with pytest.raises(RuntimeError), pages.small_pages():
            raise RuntimeError("rule failed")
        assert setter(True) is True
    finally:
        setter(outside)


def test_reuse_freed_memory_where_glibc_has_mallopt() -> None:
    # in a subprocess: the setting is process-wide and cannot be undone
    import ctypes
    import subprocess
    import sys

    try:
        has_mallopt = sys.platform.startswith("linux") and hasattr(ctypes.CDLL(None), "mallopt")
    except OSError:
        has_mallopt = False
    code = (
        "import pyarrow as pa; from warptrace.analysis.pages import reuse_freed_memory; "
        "print(reuse_freed_memory(), pa.default_memory_pool().backend_name)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    done, pool = out.split()
    assert done == str(has_mallopt)
    # Arrow's buffers from the same heap, where glibc keeps freed memory for reuse
    assert (pool == "system") == has_mallopt
