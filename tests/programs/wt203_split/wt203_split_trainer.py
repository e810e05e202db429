"""Training step of the wt203_split program.

A fresh tape per step, and a ``tape.zero()`` that looks like gradient hygiene but runs
on the *new* tape before anything was recorded: it knows no gradient buffers yet and
zeroes nothing. The parameters' ``.grad`` are never cleared, so every backward adds the
new gradient onto all the previous ones while the parameters move in between.
"""

import warp as wp
import wt203_split_kernels as kernels
import wt203_split_state as state

LR = 0.1


class Trainer:
    def __init__(self, model, x, y):
        self.model = model
        self.x = x
        self.y = y
        self.tape = None

    def forward(self, loss):
        m = self.model
        w1, w2 = m.params
        wp.launch(kernels.hidden_layer, dim=m.n, inputs=[self.x, w1], outputs=[m.h], device=state.DEVICE)
        wp.launch(kernels.output_layer, dim=m.n, inputs=[m.h, w2], outputs=[m.pred], device=state.DEVICE)
        wp.launch(kernels.mse, dim=m.n, inputs=[m.pred, self.y], outputs=[loss], device=state.DEVICE)

    def backward(self, loss):
        self.tape.backward(loss)  # expect: WT203

    def step(self):
        """One optimizer step; returns the gradients it used."""
        loss = wp.zeros(1, dtype=float, requires_grad=True, device=state.DEVICE)
        self.tape = wp.Tape()
        self.tape.zero()
        with self.tape:
            self.forward(loss)
        self.backward(loss)
        used = [p.grad.numpy().astype(float) for p in self.model.params]
        for p, g in zip(self.model.params, used):
            p.assign(p.numpy() - LR * g)
        return used
