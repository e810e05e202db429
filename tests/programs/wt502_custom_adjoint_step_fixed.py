"""Fixed twin of ``wt502_custom_adjoint_step.py``: the custom adjoint of ``soft_clamp`` is ``1 - tanh^2``."""

# grad: right
import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 4
STEPS = 6
IMPACT = 3
DT = 0.1
VMAX = 1.0


@wp.func
def soft_clamp(x: float, limit: float):
    return limit * wp.tanh(x / limit)


@wp.func_grad(soft_clamp)
def adj_soft_clamp(x: float, limit: float, adj_ret: float):
    t = wp.tanh(x / limit)
    wp.adjoint[x] += adj_ret * (1.0 - t * t)


@wp.kernel
def drift(
    q: wp.array(dtype=float),
    v: wp.array(dtype=float),
    q_out: wp.array(dtype=float),
    v_out: wp.array(dtype=float),
):
    i = wp.tid()
    v_out[i] = v[i] - DT * q[i]
    q_out[i] = q[i] + DT * v[i]


@wp.kernel
def bounce(v: wp.array(dtype=float), v_out: wp.array(dtype=float)):
    i = wp.tid()
    v_out[i] = soft_clamp(v[i], VMAX)


@wp.kernel
def sum_squares(q: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, q[i] * q[i])


def reference_loss(v0: np.ndarray, q0: np.ndarray) -> float:
    q, v = q0.astype(np.float64), v0.astype(np.float64)
    for step in range(STEPS):
        q, v = q + DT * v, v - DT * q
        if step == IMPACT:
            v = VMAX * np.tanh(v / VMAX)
    return float(np.sum(q * q))


def central_differences(f, p: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    grad = np.zeros_like(p)
    for j in range(p.size):
        step = np.zeros_like(p)
        step[j] = eps
        grad[j] = (f(p + step) - f(p - step)) / (2.0 * eps)
    return grad


def run() -> dict:
    q0_np = np.array([0.5, -0.2, 0.1, 0.8])
    v0_np = np.array([1.2, -0.9, 1.6, 0.4])
    q0 = wp.array(q0_np, dtype=float, device=DEVICE)
    v0 = wp.array(v0_np, dtype=float, requires_grad=True, device=DEVICE)
    qs = [wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE) for _ in range(STEPS)]
    vs = [wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE) for _ in range(STEPS)]
    bounced = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        q, v = q0, v0
        for step in range(STEPS):
            wp.launch(drift, dim=N, inputs=[q, v], outputs=[qs[step], vs[step]], device=DEVICE)
            q, v = qs[step], vs[step]
            if step == IMPACT:
                wp.launch(bounce, dim=N, inputs=[v], outputs=[bounced], device=DEVICE)
                v = bounced
        wp.launch(sum_squares, dim=N, inputs=[q], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    expected = central_differences(lambda p: reference_loss(p, q0_np), v0_np)
    return {"grad": v0.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
