"""A torch leaf shared zero-copy with Warp (on the same device), its gradient read in torch.

Correct: the Warp tape fills the shared gradient once; torch reads it through
``wp.to_torch`` and through a DLPack export (``__cuda_array_interface__``/DLPack on a GPU).
"""

import hashlib
import sys

import warp as wp
from _common import device

DEV = device()
try:
    import torch
except ImportError:
    print("skip: torch is not installed")
    sys.exit(77)
if wp.get_device(DEV).is_cuda and not torch.cuda.is_available():
    print("skip: torch has no CUDA")
    sys.exit(77)

tdev = "cuda" if wp.get_device(DEV).is_cuda else "cpu"


@wp.kernel
def energy(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i] * x[i])


leaf = torch.linspace(-1.0, 1.0, 16, device=tdev, requires_grad=True)
leaf.grad = torch.zeros_like(leaf)
x = wp.from_torch(leaf)
loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEV)
tape = wp.Tape()
with tape:
    wp.launch(energy, 16, inputs=[x], outputs=[loss], device=DEV)
tape.backward(loss)
grad = wp.to_torch(x.grad).cpu().numpy()
print("grad", hashlib.sha256(grad.tobytes()).hexdigest()[:16])
exported = torch.utils.dlpack.from_dlpack(wp.to_dlpack(x.grad)).cpu().numpy()
print("dlpack", hashlib.sha256(exported.tobytes()).hexdigest()[:16])
# release the shared memory while both runtimes are alive (torch, Warp 1.19, CPU: a crash at
# interpreter exit otherwise, in plain runs too)
del exported, grad, tape, x, loss
leaf.grad = None
del leaf
