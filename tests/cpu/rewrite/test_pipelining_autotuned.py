"""pipelining never puts num_stages on the launch of an autotuned kernel: its configs carry num_stages
and Triton then raises "got multiple values for keyword argument 'num_stages'" (seen on the H200 on
l3_skinny_gemm after an autotune round); the loop itself is still staged."""

from __future__ import annotations

from tritondx.tools.rewrite.pipelining import pipeline_source

SRC = '''
import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK_K": 64}, num_warps=4, num_stages=3)], key=["K"])
@triton.jit
def gemv_kernel(a_ptr, b_ptr, c_ptr, K, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    rm = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    acc = tl.zeros((BLOCK_M, 16), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        rk = k + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
        b = tl.load(b_ptr + rk[:, None] * 16 + tl.arange(0, 16)[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * 16 + tl.arange(0, 16)[None, :], acc)


@triton.jit
def plain_kernel(a_ptr, b_ptr, c_ptr, K, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    rm = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    acc = tl.zeros((BLOCK_M, 16), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        rk = k + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
        b = tl.load(b_ptr + rk[:, None] * 16 + tl.arange(0, 16)[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * 16 + tl.arange(0, 16)[None, :], acc)


def launch(a, b):
    c = torch.empty((a.shape[0], 16), device=a.device, dtype=torch.float32)
    gemv_kernel[(a.shape[0] // 64,)](a, b, c, a.shape[1], BLOCK_M=64)
    plain_kernel[(a.shape[0] // 64,)](a, b, c, a.shape[1], BLOCK_M=64, BLOCK_K=64)
    return c
'''


def test_autotuned_launch_gets_no_num_stages_but_plain_one_does():
    out, changed = pipeline_source(SRC, 3, False)
    assert set(changed) == {"gemv_kernel", "plain_kernel"}, changed
    launch = out[out.index("def launch"):]
    auto_line = next(ln for ln in launch.splitlines() if "gemv_kernel[" in ln)
    plain_line = next(ln for ln in launch.splitlines() if "plain_kernel[" in ln)
    assert "num_stages" not in auto_line, auto_line
    assert "num_stages=3" in plain_line, plain_line
    assert out.count("tl.range(") == 2
