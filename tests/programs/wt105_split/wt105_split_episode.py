"""Episode runner of the wt105_split program: ``finish`` carries the final state over."""

import warp as wp

DT = 0.2
RESTITUTION = 0.5


@wp.kernel
def pendulum_step(
    q: wp.array(dtype=float),
    v: wp.array(dtype=float),
    stiffness: wp.array(dtype=float),
    q_next: wp.array(dtype=float),
    v_next: wp.array(dtype=float),
):
    i = wp.tid()
    vn = v[i] - DT * stiffness[i] * wp.sin(q[i])
    v_next[i] = vn
    q_next[i] = q[i] + DT * vn


@wp.kernel
def carry_over(
    q_final: wp.array(dtype=float),
    v_final: wp.array(dtype=float),
    q_start: wp.array(dtype=float),
    v_start: wp.array(dtype=float),
):
    i = wp.tid()
    q_start[i] = q_final[i]
    v_start[i] = -RESTITUTION * v_final[i]


class Episode:
    def __init__(self, q0, v0, steps: int, device: str):
        n = len(q0)
        self.n = n
        self.device = device
        self.q = [wp.array(q0, dtype=float, requires_grad=True, device=device)]
        self.v = [wp.array(v0, dtype=float, requires_grad=True, device=device)]
        for _ in range(steps):
            self.q.append(wp.zeros(n, dtype=float, requires_grad=True, device=device))
            self.v.append(wp.zeros(n, dtype=float, requires_grad=True, device=device))

    def simulate(self, stiffness):
        for t in range(len(self.q) - 1):
            wp.launch(
                pendulum_step,
                dim=self.n,
                inputs=[self.q[t], self.v[t], stiffness],
                outputs=[self.q[t + 1], self.v[t + 1]],
                device=self.device,
            )
        return self.q[-1]

    def finish(self):
        """Start the next episode where this one ended (bounced)."""
        final, start = [self.q[-1], self.v[-1]], [self.q[0], self.v[0]]
        wp.launch(carry_over, dim=self.n, inputs=final, outputs=start, device=self.device)  # expect: WT105
