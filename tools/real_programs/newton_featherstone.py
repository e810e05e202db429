"""A double pendulum stepped by Newton's SolverFeatherstone on one tape, differentiated correctly.

The parameters are the two initial joint velocities; the loss is a weighted position of the
tip after ``--steps`` steps. Featherstone keeps its mass matrix and factor buffers
(``M``/``J``/``P``/``H``/``L``) on the solver and rewrites them on every ``step``, so a
differentiable rollout builds a fresh solver for each step (one solver reused across the
taped steps gives wrong gradients: see ``--reuse``, for the buggy variant). Prints the
tape's gradient and central finite differences of the same rollout.

    python tools/real_programs/newton_featherstone.py [--steps 30] [--reuse]
"""

import argparse

import newton
import numpy as np
import warp as wp

wp.config.quiet = True


@wp.kernel
def set_joint_qd(p: wp.array(dtype=float), qd: wp.array(dtype=float)):
    i = wp.tid()
    qd[i] = p[i]


@wp.kernel
def tip_loss(body_q: wp.array(dtype=wp.transform), loss: wp.array(dtype=float)):
    x = wp.transform_get_translation(body_q[1])
    loss[0] = x[0] + 0.5 * x[2]


def build_model() -> newton.Model:
    builder = newton.ModelBuilder(gravity=(0.0, 0.0, -9.81))
    upper = builder.add_link(mass=1.0, inertia=wp.mat33(np.eye(3) * 0.1))
    lower = builder.add_link(mass=1.0, inertia=wp.mat33(np.eye(3) * 0.1))
    half = wp.transform((0.0, 0.0, 0.5), wp.quat_identity())
    shoulder = builder.add_joint_revolute(-1, upper, axis=(0.0, 1.0, 0.0), child_xform=half)
    elbow = builder.add_joint_revolute(
        upper, lower, axis=(0.0, 1.0, 0.0), parent_xform=wp.transform((0.0, 0.0, -0.5), wp.quat_identity()),
        child_xform=half,
    )  # fmt: skip
    builder.add_articulation([shoulder, elbow])
    builder.joint_q = [0.3, -0.2]
    return builder.finalize(device="cpu", requires_grad=True)


def rollout(model: newton.Model, p_np: np.ndarray, steps: int, reuse: bool, backward: bool):
    p = wp.array(p_np, dtype=float, requires_grad=True)
    states = [model.state() for _ in range(steps + 1)]
    newton.eval_fk(model, model.joint_q, model.joint_qd, states[0])
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    shared = newton.solvers.SolverFeatherstone(model) if reuse else None
    tape = wp.Tape()
    with tape:
        wp.launch(set_joint_qd, 2, inputs=[p], outputs=[states[0].joint_qd])
        for k in range(steps):
            solver = shared if reuse else newton.solvers.SolverFeatherstone(model)
            states[k].clear_forces()
            solver.step(states[k], states[k + 1], None, None, 1.0 / 120.0)
        wp.launch(tip_loss, 1, inputs=[states[-1].body_q], outputs=[loss])
    if not backward:
        return float(loss.numpy()[0]), None
    tape.backward(loss)
    return float(loss.numpy()[0]), p.grad.numpy().copy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--reuse", action="store_true", help="one solver for every step (the buggy variant)")
    args = parser.parse_args()
    model = build_model()
    p0 = np.array([0.5, -0.3], dtype=np.float32)
    loss, grad = rollout(model, p0, args.steps, args.reuse, backward=True)
    eps = 1e-2
    fd = []
    for i in range(2):
        e = np.zeros(2, dtype=np.float32)
        e[i] = eps
        plus = rollout(model, p0 + e, args.steps, False, backward=False)[0]
        minus = rollout(model, p0 - e, args.steps, False, backward=False)[0]
        fd.append((plus - minus) / (2 * eps))
    print(f"loss {loss:.6f}")
    print("tape gradient       ", np.array2string(grad, precision=4))
    print("finite differences  ", np.array2string(np.array(fd), precision=4))


if __name__ == "__main__":
    main()
