"""Windowed training episode of the wt302_sim program.

``Episode.window`` simulates a few steps on its own tape, backpropagates the window's
tracking loss at once and carries the final state into the next window. The next
window's tape sees that state as a constant input, so the controller's influence on
later windows through the carried state is lost (a truncated horizon).
"""

import warp as wp
import wt302_sim_kernels as kernels
import wt302_sim_state as sim_state


class Episode:
    def __init__(self, ctrl, state, steps_per_window):
        self.ctrl = ctrl
        self.state = state
        self.steps_per_window = steps_per_window

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

    def _backprop(self, tape, loss):
        tape.backward(loss)  # expect: WT302

    def window(self, goal):
        loss = wp.zeros(1, dtype=float, requires_grad=True, device=sim_state.DEVICE)
        tape = wp.Tape()
        with tape:
            self._simulate()
            wp.launch(
                kernels.track,
                dim=self.state.q.shape[0],
                inputs=[self.state.q, goal],
                outputs=[loss],
                device=sim_state.DEVICE,
            )
        self._backprop(tape, loss)
        return float(loss.numpy()[0])
