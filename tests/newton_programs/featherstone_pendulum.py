"""A double pendulum stepped by Newton's SolverFeatherstone, a fresh solver per step (the
gradient-safe way to use it: each step's work buffers are new memory), differentiated with
respect to the initial joint velocities. ``run(force=...)`` applies a constant external
wrench per body (``State.body_f``).

Without external forces the tape's gradient matches central differences. With them it does
not: Newton 1.8's ``eval_rigid_tau`` converts ``body_f_ext[child]`` to its internal frame in
place, and the adjoint re-reads the converted wrench (measured below; removing that store,
which nothing downstream reads in this program, makes the gradient match).
"""

import numpy as np
import warp as wp

wp.config.quiet = True
import newton  # noqa: E402

DEVICE = "cpu"


def build():
    builder = newton.ModelBuilder(gravity=(0.0, 0.0, -9.81))
    inertia = wp.mat33(0.02, 0.0, 0.0, 0.0, 0.02, 0.0, 0.0, 0.0, 0.02)
    upper = builder.add_link(mass=1.0, inertia=inertia, com=wp.vec3(0.0, 0.0, -0.5))
    lower = builder.add_link(mass=0.7, inertia=inertia, com=wp.vec3(0.0, 0.0, -0.5))
    shoulder = builder.add_joint_revolute(-1, upper, axis=(0.0, 1.0, 0.0))
    elbow = builder.add_joint_revolute(
        upper,
        lower,
        axis=(0.0, 1.0, 0.0),
        parent_xform=wp.transform(wp.vec3(0.0, 0.0, -1.0), wp.quat_identity()),
    )
    builder.add_articulation([shoulder, elbow])
    builder.joint_q = [0.4, -0.3]
    return builder.finalize(device=DEVICE, requires_grad=True)


@wp.kernel
def tip_loss(body_q: wp.array(dtype=wp.transform), loss: wp.array(dtype=float)):
    p = wp.transform_point(body_q[1], wp.vec3(0.0, 0.0, -1.0))
    loss[0] = p[0] + 0.5 * p[2] * p[2]


def initial_states(model, qd0, steps, force):
    states = [model.state() for _ in range(steps + 1)]
    states[0].joint_qd.assign(qd0)
    if force is not None:
        for state in states:
            state.body_f.assign(force)
    newton.eval_fk(model, states[0].joint_q, states[0].joint_qd, states[0])
    return states


def simulate(model, states, dt):
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    for k in range(len(states) - 1):
        solver = newton.solvers.SolverFeatherstone(model)
        solver.step(states[k], states[k + 1], None, None, dt)
    wp.launch(tip_loss, dim=1, inputs=[states[-1].body_q], outputs=[loss], device=DEVICE)
    return loss


def run(steps: int = 8, force=None, dt: float = 0.01) -> dict:
    model = build()
    qd0 = np.array([0.3, -0.2], dtype=np.float32)
    force = None if force is None else np.asarray(force, dtype=np.float32)
    states = initial_states(model, qd0, steps, force)
    tape = wp.Tape()
    with tape:
        loss = simulate(model, states, dt)
    tape.backward(loss)
    grad = states[0].joint_qd.grad.numpy().copy()
    eps = 3e-3
    expected = np.zeros(2)
    for j in range(2):
        step = np.zeros(2, dtype=np.float32)
        step[j] = eps
        plus = simulate(model, initial_states(model, qd0 + step, steps, force), dt).numpy()[0]
        minus = simulate(model, initial_states(model, qd0 - step, steps, force), dt).numpy()[0]
        expected[j] = (plus - minus) / (2.0 * eps)
    return {"grad": grad, "expected": expected}


# a constant wrench per body (linear, angular), in the public COM frame
PUSH = [[30.0, 0.0, 20.0, 0.0, 5.0, 0.0], [-20.0, 0.0, 10.0, 0.0, -3.0, 0.0]]


if __name__ == "__main__":
    print(run())
    print(run(steps=20, force=PUSH))
