"""A chain of particles and springs stepped by Newton's SolverSemiImplicit or SolverXPBD on one tape.

The parameters are the initial velocities of the particles; the loss is the height of the
chain's end after ``--steps`` steps. Both solvers are used the way Newton's differentiable
examples use them: one state per step (``steps + 1`` states), one solver for the whole
rollout (SolverXPBD allocates new arrays per iteration when the state requires gradients).
Prints the tape's gradient (of the first three parameters) and central finite differences.

    python tools/real_programs/newton_springs.py --solver semi_implicit [--steps 40]
    python tools/real_programs/newton_springs.py --solver xpbd [--steps 20]
"""

import argparse

import newton
import numpy as np
import warp as wp

wp.config.quiet = True
N = 5


@wp.kernel
def set_velocity(p: wp.array(dtype=wp.vec3), qd: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    qd[i] = p[i]


@wp.kernel
def end_height(q: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    loss[0] = q[N - 1][2] + 0.25 * q[N - 1][0]


def build_model() -> newton.Model:
    builder = newton.ModelBuilder(gravity=(0.0, 0.0, -9.81))
    for i in range(N):
        builder.add_particle((0.3 * i, 0.0, 1.0), (0.0, 0.0, 0.0), mass=0.0 if i == 0 else 0.2, radius=0.05)
    for i in range(N - 1):
        builder.add_spring(i, i + 1, ke=200.0, kd=1.0, control=0.0)
    return builder.finalize(device="cpu", requires_grad=True)


def make_solver(name: str, model: newton.Model):
    if name == "xpbd":
        return newton.solvers.SolverXPBD(model, iterations=2)
    return newton.solvers.SolverSemiImplicit(model)


def rollout(model, solver_name: str, p_np: np.ndarray, steps: int, dt: float, backward: bool):
    p = wp.array(p_np, dtype=wp.vec3, requires_grad=True)
    states = [model.state() for _ in range(steps + 1)]
    solver = make_solver(solver_name, model)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(set_velocity, N, inputs=[p], outputs=[states[0].particle_qd])
        for k in range(steps):
            states[k].clear_forces()
            solver.step(states[k], states[k + 1], None, None, dt)
        wp.launch(end_height, 1, inputs=[states[-1].particle_q], outputs=[loss])
    if not backward:
        return float(loss.numpy()[0]), None
    tape.backward(loss)
    return float(loss.numpy()[0]), p.grad.numpy().copy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--solver", choices=("semi_implicit", "xpbd"), default="semi_implicit")
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()
    dt = 1.0 / 240.0
    model = build_model()
    p0 = np.zeros((N, 3), dtype=np.float32)
    p0[:, 2] = 0.5
    loss, grad = rollout(model, args.solver, p0, args.steps, dt, backward=True)
    eps = 1e-2
    fd = np.zeros((N, 3))
    tape = np.zeros((N, 3))
    for i in range(1, N):  # the first particle is fixed (mass 0)
        for c in (0, 2):
            e = np.zeros((N, 3), dtype=np.float32)
            e[i, c] = eps
            plus = rollout(model, args.solver, p0 + e, args.steps, dt, backward=False)[0]
            minus = rollout(model, args.solver, p0 - e, args.steps, dt, backward=False)[0]
            fd[i, c] = (plus - minus) / (2 * eps)
            tape[i, c] = grad[i, c]
    print(f"{args.solver}: loss {loss:.6f}")
    print(
        "tape gradient (x, z of particles 1..)     ", np.array2string(tape[1:, [0, 2]].ravel(), precision=4)
    )
    print("finite differences (x, z of particles 1..)", np.array2string(fd[1:, [0, 2]].ravel(), precision=4))


if __name__ == "__main__":
    main()
