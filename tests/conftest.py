"""Session-wide fixtures."""

from __future__ import annotations

import pytest

from tests.zoo import TraceCache


@pytest.fixture(scope="session")
def zoo_traces(tmp_path_factory: pytest.TempPathFactory) -> TraceCache:
    """``zoo_traces(program)`` -> path of the program's trace, recorded once per session."""
    return TraceCache(tmp_path_factory.mktemp("zoo_traces"))
