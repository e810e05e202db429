"""Training step of the wt203_split_fixed program: gradients zeroed after each update."""

import warp as wp
import wt203_split_fixed_kernels as kernels
import wt203_split_fixed_state as state

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
        self.tape.backward(loss)

    def step(self):
        """One optimizer step; returns the gradients it used."""
        loss = wp.zeros(1, dtype=float, requires_grad=True, device=state.DEVICE)
        self.tape = wp.Tape()
        with self.tape:
            self.forward(loss)
        self.backward(loss)
        used = [p.grad.numpy().astype(float) for p in self.model.params]
        for p, g in zip(self.model.params, used):
            p.assign(p.numpy() - LR * g)
        self.tape.zero()
        return used
