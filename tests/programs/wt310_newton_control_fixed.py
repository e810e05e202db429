"""Fixed twin of wt310_newton_control: the filled Control is passed to the solver.

``solver.step(..., control, None, DT)``: ``SolverSemiImplicit`` reads ``control.joint_f``
on the tape, and the backward carries the gradient on to ``torques``.
"""

# requires-module: newton

import newton
import numpy as np
import warp as wp

wp.config.quiet = True
STEPS, DT = 60, 1.0 / 600.0


@wp.kernel
def set_torques(torques: wp.array(dtype=float), joint_f: wp.array(dtype=float)):
    i = wp.tid()
    joint_f[i] = torques[i]


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


def rollout(model: newton.Model, torques_np: np.ndarray, backward: bool, pass_control: bool):
    torques = wp.array(torques_np, dtype=float, requires_grad=True)
    states = [model.state() for _ in range(STEPS + 1)]
    newton.eval_fk(model, model.joint_q, model.joint_qd, states[0])
    solver = newton.solvers.SolverSemiImplicit(model)
    control = model.control()
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(set_torques, 2, inputs=[torques], outputs=[control.joint_f])
        for k in range(STEPS):
            states[k].clear_forces()
            solver.step(states[k], states[k + 1], control if pass_control else None, None, DT)
        wp.launch(tip_loss, 1, inputs=[states[-1].body_q], outputs=[loss])
    if backward:
        tape.backward(loss)
    return torques, float(loss.numpy()[0])


def run() -> dict:
    model = build_model()
    t0 = np.array([2.0, -1.0], dtype=np.float32)
    torques, _ = rollout(model, t0, backward=True, pass_control=True)
    grad = torques.grad.numpy().copy()
    eps = 1e-2
    expected = np.zeros(2)
    for i in range(2):  # what the program meant: the torques drive the pendulum
        e = np.zeros(2, dtype=np.float32)
        e[i] = eps
        plus = rollout(model, t0 + e, backward=False, pass_control=True)[1]
        minus = rollout(model, t0 - e, backward=False, pass_control=True)[1]
        expected[i] = (plus - minus) / (2 * eps)
    return {"grad": grad, "expected": expected}


if __name__ == "__main__":
    run()
