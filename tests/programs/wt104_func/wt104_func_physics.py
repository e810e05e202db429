"""Physics of the wt104_func program: a Body struct and a drag update done by a ``@wp.func``."""

import warp as wp

DT = 0.25


@wp.struct
class Body:
    x: wp.array(dtype=float)
    drag: wp.array(dtype=float)


@wp.func
def apply_quadratic_drag(body: Body, i: int):
    x = body.x[i]
    body.x[i] = x - DT * body.drag[i] * x * wp.abs(x)


@wp.kernel
def drag_step(body: Body):
    i = wp.tid()
    apply_quadratic_drag(body, i)


@wp.kernel
def distance_loss(body: Body, target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = body.x[i] - target[i]
    wp.atomic_add(loss, 0, d * d)
