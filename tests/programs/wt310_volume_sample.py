"""WT310 through a volume: a parameter reaches the loss only through ``wp.volume_sample_f``.

The program writes a field into a ``wp.Volume`` from ``gain`` (``wp.volume_store_f``) and
samples it at probe points. Warp differentiates ``volume_sample_*`` with respect to the
query point only, never the volume's voxels: ``gain.grad`` is 0, the true derivative is the
sum of the field's shape at the probes (7.9).
"""
# requires-warp: 1.19  (wp.Volume.allocate on the CPU: CUDA-only on 1.13; versions between not measured)

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
N = 4
PROBES = np.array([[1.2, 1.5, 1.7], [0.5, 2.0, 1.0]], dtype=np.float32)


@wp.kernel
def fill(vid: wp.uint64, gain: wp.array(dtype=float)):
    i, j, k = wp.tid()
    wp.volume_store_f(vid, i, j, k, gain[0] * float(i + j + k))


@wp.kernel
def probe(vid: wp.uint64, pts: wp.array(dtype=wp.vec3), out: wp.array(dtype=float)):
    t = wp.tid()
    q = wp.volume_world_to_index(vid, pts[t])
    wp.atomic_add(out, 0, wp.volume_sample_f(vid, q, wp.Volume.LINEAR))


def run() -> dict:
    vol = wp.Volume.allocate(min=[0, 0, 0], max=[N - 1] * 3, voxel_size=1.0, bg_value=0.0, device=DEVICE)
    gain = wp.array([0.5], dtype=float, requires_grad=True, device=DEVICE)  # expect: WT310
    pts = wp.array(PROBES, dtype=wp.vec3, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(fill, (N, N, N), inputs=[vol.id, gain], device=DEVICE)
        wp.launch(probe, 2, inputs=[vol.id, pts], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    return {"grad": gain.grad.numpy().copy(), "expected": np.array([float(PROBES.sum())])}


if __name__ == "__main__":
    run()
