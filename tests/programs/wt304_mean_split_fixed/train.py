"""Fixed twin of wt304_mean_split: the trainer seeds each loss with 1/n, the average it reports."""

import numpy as np
import warp as wp
from wt304_mean_split_fixed_trainer import Trainer

wp.config.quiet = True


def run() -> dict:
    x_np = np.linspace(-1.0, 1.0, 7)
    y_np = 1.5 * x_np * x_np - 0.25
    trainer = Trainer(x_np, y_np, (0.5, 0.5))
    for _ in range(2):
        p_now = trainer.p.numpy()[0].astype(np.float64).copy()
        grad = trainer.gradient()
        trainer.evaluate()
    r = p_now[0] * x_np * x_np + p_now[1] - y_np
    expected = np.array([np.mean(r * x_np * x_np), np.mean(r)])
    return {"grad": grad, "expected": expected}


if __name__ == "__main__":
    run()
