"""Simulator of the wt101_split program: kernels and a class that hides the launches."""

import warp as wp

DT = 0.1
KE = 40.0
DAMPING = 2.0


@wp.kernel
def ground_contact(q: wp.array(dtype=float), contact: wp.array(dtype=float)):
    i = wp.tid()
    depth = wp.max(-q[i], 0.0)
    contact[i] = KE * depth * depth


@wp.kernel
def integrate(
    q: wp.array(dtype=float),
    v: wp.array(dtype=float),
    contact: wp.array(dtype=float),
    gravity: wp.array(dtype=float),
    q_next: wp.array(dtype=float),
    v_next: wp.array(dtype=float),
):
    i = wp.tid()
    fn = contact[i]
    # contact damping grows with the normal force (implicit, so it stays stable)
    vn = (v[i] + DT * (fn - gravity[0])) / (1.0 + DT * DAMPING * fn)
    v_next[i] = vn
    q_next[i] = q[i] + DT * vn


class Simulator:
    """Owns the per-step state and one contact-force buffer shared by all steps."""

    def __init__(self, num_particles: int, device: str):
        self.n = num_particles
        self.device = device
        self.contact = wp.zeros(num_particles, dtype=float, requires_grad=True, device=device)

    def new_state(self):
        return (
            wp.zeros(self.n, dtype=float, requires_grad=True, device=self.device),
            wp.zeros(self.n, dtype=float, requires_grad=True, device=self.device),
        )

    def _contacts(self, q):
        out = self.contact
        wp.launch(ground_contact, dim=self.n, inputs=[q], outputs=[out], device=q.device)  # expect: WT101
        return out

    def step(self, state, gravity):
        q, v = state
        q_next, v_next = self.new_state()
        contact = self._contacts(q)
        wp.launch(
            integrate,
            dim=self.n,
            inputs=[q, v, contact, gravity],
            outputs=[q_next, v_next],
            device=self.device,
        )
        return q_next, v_next
