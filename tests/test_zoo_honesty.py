"""The zoo is honest: buggy programs really compute a wrong gradient, twins and look-alikes a right one."""

from __future__ import annotations

import numpy as np
import pytest

from tests.zoo import discover, load

PROGRAMS = discover()


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_gradient_is_wrong_exactly_when_declared(program):
    import warp

    if program.skip_reason():
        pytest.skip(program.skip_reason())
    result = load(program).run()
    grad = np.asarray(result["grad"], dtype=np.float64)
    expected = np.asarray(result["expected"], dtype=np.float64)
    assert grad.shape == expected.shape
    right = np.allclose(grad, expected, rtol=2e-2, atol=1e-4)
    version = tuple(int(part) for part in warp.__version__.split(".")[:2])
    if program.gradient_wrong_on(version):
        assert not right, f"{program.name} declares a wrong gradient but computed the true one"
    else:
        assert right, f"{program.name}: gradient {grad} differs from expected {expected}"
