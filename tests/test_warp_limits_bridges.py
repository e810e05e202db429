"""The Warp (and PyTorch) mechanisms behind WT304, WT311 and WT205, measured on the installed
versions: the experiments of ``docs/warp-limits-bridges.md``. If one of these fails, the rule
built on it describes a Warp that no longer exists: revisit the rule, not the test."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

wp = pytest.importorskip("warp")

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="PyTorch is not installed (CI installs a CPU build)")
DEVICE = "cpu"
N = 4


@wp.kernel
def _square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


@wp.kernel
def _mean(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, y[i] / float(y.shape[0]))


def _taped_square(x_np):
    x = wp.array(x_np, dtype=float, requires_grad=True, device=DEVICE)
    y = wp.zeros(len(x_np), dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(_square, dim=len(x_np), inputs=[x], outputs=[y], device=DEVICE)
    return x, y, tape


X = np.array([0.5, -1.0, 2.0, 1.5])


# ---------------------------------------------------------------- WT304
def test_a_hand_seed_backpropagates_the_seed_weighted_sum():
    """``y.grad.fill_(v)`` + ``tape.backward()`` is the gradient of v * sum(y): with v = 1 it is
    N times the gradient of the mean a ``/ float(N)`` kernel computes; with v = 1/N it is that
    gradient."""
    x, y, tape = _taped_square(X)
    y.grad.fill_(1.0)
    tape.backward()
    seeded_ones = x.grad.numpy().copy()

    x, y, tape = _taped_square(X)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    with tape:
        wp.launch(_mean, dim=N, inputs=[y], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    mean_gradient = x.grad.numpy().copy()

    x, y, tape = _taped_square(X)
    y.grad.fill_(1.0 / N)
    tape.backward()
    np.testing.assert_allclose(seeded_ones, 2.0 * X, rtol=1e-6)
    np.testing.assert_allclose(mean_gradient, 2.0 * X / N, rtol=1e-6)
    np.testing.assert_allclose(seeded_ones, N * mean_gradient, rtol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), mean_gradient, rtol=1e-6)


# ---------------------------------------------------------------- WT311
def test_a_store_adjoint_zeroes_an_installed_seed():
    """``y.grad = seed``: the adjoint of ``y[i] = ...`` reads y.grad[i] and zeroes it (stores
    consume output gradients since Warp 1.13), so the seed buffer itself is zero afterwards
    and a second backward seeded with it gives a zero gradient."""
    seed = wp.full(N, 1.0, dtype=float, device=DEVICE)
    x, y, tape = _taped_square(X)
    y.grad = seed
    tape.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2.0 * X, rtol=1e-6)
    assert not seed.numpy().any()
    x, y, tape = _taped_square(X)
    y.grad = seed
    tape.backward()
    assert not x.grad.numpy().any()


def test_grads_copies_the_seed_into_an_existing_grad_and_retain_grad_keeps_it():
    """The look-alikes: ``grads={y: seed}`` for a y with a gradient copies the seed (the seed
    keeps its ones); ``retain_grad`` turns consumption off."""
    seed = wp.full(N, 1.0, dtype=float, device=DEVICE)
    for _ in range(2):
        x, y, tape = _taped_square(X)
        tape.backward(grads={y: seed})
        np.testing.assert_allclose(x.grad.numpy(), 2.0 * X, rtol=1e-6)
    np.testing.assert_array_equal(seed.numpy(), np.ones(N))
    x, y, tape = _taped_square(X)
    y.retain_grad = True
    y.grad = seed
    tape.backward()
    np.testing.assert_array_equal(seed.numpy(), np.ones(N))


@needs_torch
def test_a_torch_seed_installed_zero_copy_is_zeroed_in_place():
    """``y.grad = wp.from_torch(seed)``: the torch tensor is the memory the store adjoint zeroes;
    torch's version counter does not move (Warp wrote through the pointer)."""
    import torch

    wp.init()
    seed = torch.ones(N)
    grads = []
    for _ in range(2):
        x, y, tape = _taped_square(X)
        y.grad = wp.from_torch(seed)
        tape.backward()
        grads.append(x.grad.numpy().copy())
    np.testing.assert_allclose(grads[0], 2.0 * X, rtol=1e-6)
    assert not grads[1].any() and not seed.any() and seed._version == 0
    # the same through from_torch(out, grad=seed): the output's gradient is the seed's memory
    seed = torch.ones(N)
    x = wp.array(X, dtype=float, requires_grad=True, device=DEVICE)
    y = wp.from_torch(torch.zeros(N), grad=seed)
    tape = wp.Tape()
    with tape:
        wp.launch(_square, dim=N, inputs=[x], outputs=[y], device=DEVICE)
    tape.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2.0 * X, rtol=1e-6)
    assert not seed.any()


# ---------------------------------------------------------------- WT205
def _function(torch, detach: bool):
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.x = wp.from_torch(x.detach(), requires_grad=True) if detach else wp.from_torch(x)
            ctx.y = wp.zeros(x.shape[0], dtype=float, requires_grad=True, device=DEVICE)
            ctx.tape = wp.Tape()
            with ctx.tape:
                wp.launch(_square, dim=x.shape[0], inputs=[ctx.x], outputs=[ctx.y], device=DEVICE)
            return wp.to_torch(ctx.y)

        @staticmethod
        def backward(ctx, adj_y):
            ctx.tape.backward(grads={ctx.y: wp.from_torch(adj_y.contiguous())})
            return wp.to_torch(ctx.x.grad)

    return Square


@needs_torch
def test_from_torch_of_a_leaf_shares_its_grad_and_a_function_counts_it_twice():
    """``wp.from_torch(x)`` of a leaf that requires grad: the Warp grad is x.grad's memory.
    In an autograd Function returning the Warp gradient, one ``backward()`` gives 2x; the
    detached import gives 1x, and so does ``torch.autograd.grad`` (no accumulation)."""
    import torch

    wp.init()
    leaf = torch.tensor(X, dtype=torch.float32, requires_grad=True)
    imported = wp.from_torch(leaf)
    assert leaf.grad is not None and imported.grad.ptr == leaf.grad.data_ptr()

    p = torch.tensor(X, dtype=torch.float32, requires_grad=True)
    _function(torch, detach=False).apply(p).sum().backward()
    np.testing.assert_allclose(p.grad.numpy(), 2.0 * (2.0 * X), rtol=1e-6)

    p = torch.tensor(X, dtype=torch.float32, requires_grad=True)
    _function(torch, detach=True).apply(p).sum().backward()
    np.testing.assert_allclose(p.grad.numpy(), 2.0 * X, rtol=1e-6)

    p = torch.tensor(X, dtype=torch.float32, requires_grad=True)
    (returned,) = torch.autograd.grad(_function(torch, detach=False).apply(p).sum(), p)
    np.testing.assert_allclose(returned.numpy(), 2.0 * X, rtol=1e-6)
