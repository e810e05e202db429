"""Look-alike of WT307: an ``enable_backward=False`` kernel on the tape that no parameter reaches.

``visibility_mask`` is compiled without an adjoint and recorded on the tape; its
output feeds the loss. But it reads only constant inputs (positions of fixed
occluders) and writes a mask without ``requires_grad``: there is no gradient to carry
through it, so skipping its adjoint loses nothing. (Warp still prints its warning.)
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel(enable_backward=False)
def visibility_mask(occluder: wp.array(dtype=float), threshold: float, mask: wp.array(dtype=float)):
    i = wp.tid()
    mask[i] = wp.where(occluder[i] > threshold, 0.0, 1.0)


@wp.kernel
def shade(
    albedo: wp.array(dtype=float),
    light: wp.array(dtype=float),
    mask: wp.array(dtype=float),
    radiance: wp.array(dtype=float),
):
    i = wp.tid()
    radiance[i] = mask[i] * albedo[i] * light[i]


@wp.kernel
def photometric(
    radiance: wp.array(dtype=float), observed: wp.array(dtype=float), loss: wp.array(dtype=float)
):
    i = wp.tid()
    d = radiance[i] - observed[i]
    wp.atomic_add(loss, 0, d * d)


def run() -> dict:
    occ_np = np.array([0.1, 0.9, 0.4, 0.7, 0.2])
    a_np = np.array([0.5, 0.8, 0.3, 0.9, 0.6])
    l_np = np.array([1.0, 2.0, 1.5, 0.5, 1.2])
    o_np = np.array([0.4, 1.0, 0.6, 0.2, 0.9])
    n = len(a_np)
    occluder = wp.array(occ_np, dtype=float, device=DEVICE)
    albedo = wp.array(a_np, dtype=float, requires_grad=True, device=DEVICE)
    light = wp.array(l_np, dtype=float, device=DEVICE)
    observed = wp.array(o_np, dtype=float, device=DEVICE)
    mask = wp.zeros(n, dtype=float, device=DEVICE)
    radiance = wp.zeros(n, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(visibility_mask, dim=n, inputs=[occluder, 0.5], outputs=[mask], device=DEVICE)
        wp.launch(shade, dim=n, inputs=[albedo, light, mask], outputs=[radiance], device=DEVICE)
        wp.launch(photometric, dim=n, inputs=[radiance, observed], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    m_np = (occ_np <= 0.5).astype(np.float64)
    expected = 2.0 * (m_np * a_np * l_np - o_np) * m_np * l_np
    return {"grad": albedo.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
