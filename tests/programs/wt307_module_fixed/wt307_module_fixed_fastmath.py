"""Fast math kernels of the wt307_module_fixed program, compiled with their adjoints."""

import warp as wp


@wp.kernel
def soft_clip(v: wp.array(dtype=wp.vec2), limit: float, out: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    out[i] = v[i] * (limit / wp.sqrt(limit * limit + wp.dot(v[i], v[i])))
