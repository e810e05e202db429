"""An activation with a hand-written adjoint that assigns instead of accumulating."""

import warp as wp


@wp.func
def cubic(x: float):
    return x * x * x


@wp.func_grad(cubic)
def adj_cubic(x: float, adj_ret: float):
    wp.adjoint[x] = 3.0 * x * x * adj_ret  # expect: WT404


@wp.kernel
def activate(pre: wp.array[float], post: wp.array[float]):
    i = wp.tid()
    v = pre[i]
    post[i] = cubic(v) + 2.0 * v
