"""WT104 behind a divergence: a state advanced in place through a struct field inflates a gradient.

A sensor gain is calibrated against observations of a growing trajectory (each step scales
the state by 1.5). The state is one array in a ``@wp.struct``, advanced in place, so when the
backward runs, the adjoint of every ``fit`` launch reads the final state instead of its own:
the gradient is several times too large (Warp's overwrite tracker does not look into structs). The step size 3.4e-4 is stable for the true gradient
(the fixed twin converges), but not for the inflated one: the gain overshoots further at
every update, and the squared misfit overflows float32 after about thirty updates. The
divergence warning names WT104 as the likely cause; no WT501 on the overflowing kernel.
"""
# check-numerics

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
N = 3
T = 8
GROWTH = 1.5
STEPS = 40
LR = 3.4e-4
TRUE_GAIN = 0.8


@wp.struct
class State:
    x: wp.array(dtype=float)


@wp.kernel
def advance(state: State):
    i = wp.tid()
    state.x[i] = GROWTH * state.x[i]


@wp.kernel
def fit(
    state: State, gain: wp.array(dtype=float), obs: wp.array(dtype=float), t: int, loss: wp.array(dtype=float)
):
    i = wp.tid()
    d = gain[0] * state.x[i] - obs[t * N + i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd(p: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * grad[i]


def run() -> dict:
    x0 = np.array([0.4, 1.1, 0.7], dtype=np.float32)
    path = np.array([x0 * GROWTH**t for t in range(1, T + 1)], dtype=np.float64)
    obs = wp.array((TRUE_GAIN * path).reshape(-1).astype(np.float32), dtype=float, device=DEVICE)
    gain = wp.array([0.2], dtype=float, requires_grad=True, device=DEVICE)
    state = State()
    state.x = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    first = None
    for _ in range(STEPS):
        state.x.assign(x0)
        loss.zero_()
        tape.reset()
        with tape:
            for t in range(T):
                wp.launch(advance, dim=N, inputs=[state], device=DEVICE)  # expect: WT104
                wp.launch(fit, dim=N, inputs=[state, gain, obs, t], outputs=[loss], device=DEVICE)
        tape.backward(loss)
        if first is None:
            g = float(gain.numpy()[0])
            expected = np.array([np.sum(2.0 * (g * path - TRUE_GAIN * path) * path)])
            first = (gain.grad.numpy().copy(), expected)
        wp.launch(sgd, dim=1, inputs=[gain, gain.grad, LR], device=DEVICE)  # expect: WT505
        tape.zero()
    return {"grad": first[0], "expected": first[1]}


if __name__ == "__main__":
    run()
