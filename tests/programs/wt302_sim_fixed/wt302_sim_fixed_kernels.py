"""Kernels and the controller struct of the wt302_sim_fixed program."""

import warp as wp

DT = 0.1


@wp.struct
class Controller:
    gain: wp.array(dtype=float)
    bias: wp.array(dtype=float)


@wp.kernel
def controlled_step(
    ctrl: Controller,
    q: wp.array(dtype=float),
    qd: wp.array(dtype=float),
    q_out: wp.array(dtype=float),
    qd_out: wp.array(dtype=float),
):
    i = wp.tid()
    u = ctrl.bias[i] - ctrl.gain[i] * q[i]
    v = qd[i] + DT * (u - wp.sin(q[i]))
    qd_out[i] = v
    q_out[i] = q[i] + DT * v


@wp.kernel
def track(q: wp.array(dtype=float), goal: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    d = q[i] - goal
    wp.atomic_add(loss, 0, d * d)
