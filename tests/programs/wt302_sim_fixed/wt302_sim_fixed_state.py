"""Simulation state of the wt302_sim_fixed program."""

import numpy as np
import warp as wp

DEVICE = "cpu"


class State:
    def __init__(self, q_np, qd_np):
        self.q = wp.array(q_np, dtype=float, requires_grad=True, device=DEVICE)
        self.qd = wp.array(qd_np, dtype=float, requires_grad=True, device=DEVICE)

    @classmethod
    def like(cls, other):
        n = other.q.shape[0]
        return cls(np.zeros(n), np.zeros(n))
