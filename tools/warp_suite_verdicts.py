"""What ``check_warp_suite.py --all`` leaves out, and the verdict on each error and warning
finding it gets from Warp's own tests (Warp 1.19, CPU). The reasoning and the experiments
behind each verdict are on docs/validation-warp-suite.md.

``SKIPPED``: module -> why it is not run on the CPU (it needs a GPU, a display or a network).
``VERDICTS``: (code, file name, line) -> "true: ..." / "false: ..." with the reasoning. A
finding without an entry is reported "unjudged".
"""

from __future__ import annotations

# Modules every test of which skips on a machine without CUDA (Warp 1.19: "No suitable devices to
# run the test.", "Requires at least two CUDA devices", ...), with the count. No module needs a
# display (test_render_opengl's 10 tests run headless) or a network.
SKIPPED: dict[str, str] = {
    "cuda.test_array_fill_capture": "needs a GPU: its 4 tests skip without CUDA",
    "cuda.test_capture_mode": "needs a GPU: its 3 tests skip without CUDA",
    "cuda.test_capture_release": "needs a GPU: its 6 tests skip without CUDA",
    "cuda.test_clang_cuda": "needs a GPU: its 9 tests skip without CUDA",
    "cuda.test_cuda_arch_suffix": "needs a GPU: its 10 tests skip without CUDA",
    "cuda.test_ipc": "needs a GPU: its 4 tests skip without CUDA",
    "cuda.test_multigpu": "needs a GPU: its 5 tests skip without CUDA",
    "cuda.test_peer": "needs a GPU: its 4 tests skip without CUDA",
    "cuda.test_pinned": "needs a GPU: its 1 test skip without CUDA",
    "cuda.test_sync_errors": "needs a GPU: its 8 tests skip without CUDA",
    "cuda.test_texture_compiler": "needs a GPU: its 28 tests skip without CUDA",
    "deterministic.test_deterministic_graph_capture": "needs a GPU: its 12 tests skip without CUDA",
    "fem.test_fem_examples": "needs a GPU: its 24 tests skip without CUDA",
    "test_block_dim_dispatch": "needs a GPU: its 6 tests skip without CUDA",
    "tile.test_tile_large_offsets": "needs a GPU: its 1 test skip without CUDA",
    "tile.test_tile_low_precision_stack": "needs a GPU: its 1 test skip without CUDA",
}

_RETAIN = (
    "true: the test pins Warp's documented double counting of a retain_grad=True array written "
    "twice on a tape (zoo: wt202_store_twice, wt202_two_launches)"
)
_NO_BACKWARD = (
    "true: the kernel runs with enable_backward=False; the test asserts the zero gradient and "
    "Warp's warning (zoo: wt307_no_backward)"
)
_ROOT = (
    "true by the mechanism: nothing keeps the argument away from zero, where Warp's adjoint of "
    "sqrt/cbrt is infinite; the test's inputs never reach it"
)

VERDICTS: dict[tuple[str, str, int], str] = {
    ("WT202", "test_tape.py", 586): _RETAIN,
    ("WT202", "test_array.py", 3164): _RETAIN,
    ("WT310", "test_array.py", 3139): (
        "true: x_a is read on the tape only by multiply_by_two, whose store into y multiply_by_three "
        "overwrites before the loss; Warp zeroes y.grad between their adjoints (no retain_grad), so "
        "x_a.grad is zero by construction, which the test asserts"
    ),
    ("WT307", "test_options.py", 68): _NO_BACKWARD,
    ("WT307", "test_options.py", 115): _NO_BACKWARD,
    ("WT405", "test_deterministic_counter.py", 113): (
        "true: the returned slot indexes `output`; Warp's deterministic mode refuses this backward "
        "(the test asserts it) and without it d/dx = [2, 0, 0, 0] for truth [2, 4, 6, 8] "
        "(tests/test_warp_mechanisms_atomics.py)"
    ),
    ("WT102", "test_fem_quadrature.py", 334): (
        "true, a Warp bug: finalize_cell_particle_data stores the particle index over the flat "
        "index it read; exact for one element per particle (the test), with 2 (GIMP) every "
        "evaluation point's coordinate gradient lands on particle 0 (measured [[2, 2], [0, 0]], "
        "truth all ones)"
    ),
    ("WT407", "test_marching_cubes.py", 65): _ROOT,
    ("WT407", "test_surface_nets.py", 72): _ROOT,
    ("WT407", "test_sparse_marching_cubes.py", 134): _ROOT,
    ("WT407", "test_arithmetic.py", 508): _ROOT,
    ("WT407", "test_arithmetic.py", 515): _ROOT,
    ("WT407", "test_grad.py", 520): _ROOT,
}
