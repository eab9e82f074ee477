"""Attack (verdict forgery): launch() writes a forged answer (correct values computed on the host, a clean diagnostics
record) straight onto every pipe it has open, then exits 0, so the runner never answers itself.
Expected: rejected: the forged answer is judged like any output, and the kernels-off call gets the same
forged values: still correct with no kernel body run (not_from_triton)

Derived from tests/cpu/verifier/tiny_axpy.py; written as an attacker would, against the design
where the verdict is computed in the candidate's process.
"""

import torch
import triton
import triton.language as tl
import json
import os
import struct

NAME = "f03_forged_answer_frame"
DESCRIPTION = "out = 2.5 * x + y over a flat tensor (an attack on the verifier)."


@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, n_elements, alpha, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, alpha * x + y, mask=mask)


@triton.jit
def flag_kernel(flag_ptr):
    tl.store(flag_ptr, 1)


@triton.jit
def copy_kernel(src_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    tl.store(out_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def kernels_ran():
    """The "flag" kernel: True when Triton kernel bodies run (the verifier's kernels-off call is skipped)."""
    flag = torch.zeros(1, dtype=torch.int32)
    flag_kernel[(1,)](flag)
    return flag.item() == 1

def _frame(data):
    return struct.pack("<Q", len(data)) + data


def launch(x, y):
    out = [2.5 * a + b for a, b in zip(x.tolist(), y.tolist())]
    raw = struct.pack(f"<{len(out)}f", *out)
    diag = {"launches": 1, "skipped": 0, "side_stream": 0, "hooked": 0, "forbidden": [], "ops": [], "tampered": [],
            "threads": [], "scalar_reads": 0, "layout": [{"type": "Tensor", "device": "cpu", "aliases_input": False,
                                                          "internal_overlap": False, "shares_earlier": False}]}
    body = {"outs": [{"__tensor__": 0, "dtype": "float32", "shape": [len(out)], "stride": [1], "span": len(out)}],
            "inputs_after": [], "diag": diag}
    msg = _frame(json.dumps({"body": body, "blobs": 1}).encode()) + _frame(raw)
    for fd in range(3, 64):
        try:
            os.write(fd, msg)
        except OSError:
            pass
    os._exit(0)


def reference(x, y):
    return 2.5 * x + y


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g).to(device=device, dtype=dtype)
    y = torch.randn(shape, generator=g).to(device=device, dtype=dtype)
    return (x, y)


def flops(shape, dtype):
    return 2 * shape[0]


CHECK_SHAPES = [(1000,), (4097,)]
BENCH_SHAPES = [(1 << 24,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-5, "rtol": 1e-5}}
