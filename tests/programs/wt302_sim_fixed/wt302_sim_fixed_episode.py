"""Episode of the wt302_sim_fixed program: the whole horizon on one tape.

Every step writes a new State (``steps + 1`` distinct buffers), all windows' losses
accumulate into one array, and one backward covers the full horizon.
"""

import warp as wp
import wt302_sim_fixed_kernels as kernels
import wt302_sim_fixed_state as sim_state


class Episode:
    def __init__(self, ctrl, state, steps_per_window):
        self.ctrl = ctrl
        self.state = state
        self.steps_per_window = steps_per_window
        self.tape = wp.Tape()
        self.loss = wp.zeros(1, dtype=float, requires_grad=True, device=sim_state.DEVICE)

    def _simulate(self):
        n = self.state.q.shape[0]
        for _ in range(self.steps_per_window):
            nxt = sim_state.State.like(self.state)
            wp.launch(
                kernels.controlled_step,
                dim=n,
                inputs=[self.ctrl, self.state.q, self.state.qd],
                outputs=[nxt.q, nxt.qd],
                device=sim_state.DEVICE,
            )
            self.state = nxt

    def window(self, goal):
        with self.tape:
            self._simulate()
            wp.launch(
                kernels.track,
                dim=self.state.q.shape[0],
                inputs=[self.state.q, goal],
                outputs=[self.loss],
                device=sim_state.DEVICE,
            )

    def backprop(self):
        self.tape.backward(self.loss)
