"""Fast math kernels compiled without adjoints: the whole module has ``enable_backward=False``."""

import warp as wp

wp.set_module_options({"enable_backward": False})


@wp.kernel
def soft_clip(v: wp.array(dtype=wp.vec2), limit: float, out: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    out[i] = v[i] * (limit / wp.sqrt(limit * limit + wp.dot(v[i], v[i])))
