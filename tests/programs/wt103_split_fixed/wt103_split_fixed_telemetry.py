"""Telemetry of the wt103_split_fixed program: heights relative to the ground, in a copy."""

import warp as wp


@wp.kernel
def subtract_ground(q: wp.array(dtype=float), ground: float, heights: wp.array(dtype=float)):
    i = wp.tid()
    heights[i] = q[i] - ground


class Telemetry:
    def __init__(self, ground_height: float):
        self.ground_height = ground_height
        self.rows = []

    def log(self, step: int, q: wp.array):
        heights = wp.empty(q.shape[0], dtype=float, device=q.device)
        wp.launch(
            subtract_ground,
            dim=q.shape[0],
            inputs=[q, self.ground_height],
            outputs=[heights],
            device=q.device,
        )
        self.rows.append((step, heights.numpy().copy()))
