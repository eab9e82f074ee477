"""BatchNorm in inference mode on NCHW: flat elementwise kernel loading four per-channel values per element."""

import torch
import triton
import triton.language as tl

NAME = "batchnorm_inference"
DESCRIPTION = ("out = (x - running_mean[c]) / sqrt(running_var[c] + eps) * weight[c] + bias[c] for x (N, C, H, W), "
               "eps=1e-5 (torch.nn.functional.batch_norm, training=False).")
CATEGORY = "norm"
LEVEL = 2

EPS = 1e-5


@triton.jit
def batchnorm_kernel(x_ptr, mean_ptr, var_ptr, w_ptr, b_ptr, out_ptr, n_elements, C, HW, eps,
                     BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    c = (offs // HW) % C
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    mean = tl.load(mean_ptr + c, mask=mask)
    var = tl.load(var_ptr + c, mask=mask)
    w = tl.load(w_ptr + c, mask=mask)
    b = tl.load(b_ptr + c, mask=mask)
    y = (x - mean) / tl.sqrt(var + eps) * w + b
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def launch(x, running_mean, running_var, weight, bias):
    N, C, H, W = x.shape
    out = torch.empty_like(x)
    n = x.numel()
    BLOCK = 1024
    batchnorm_kernel[(triton.cdiv(n, BLOCK),)](x, running_mean, running_var, weight, bias, out,
                                               n, C, H * W, EPS, BLOCK=BLOCK)
    return out


def reference(x, running_mean, running_var, weight, bias):
    y = torch.nn.functional.batch_norm(x.float(), running_mean, running_var, weight, bias,
                                       training=False, eps=EPS)
    return y.to(x.dtype)


def make_inputs(shape, dtype, seed, device):
    N, C, H, W = shape
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn((N, C, H, W), generator=g) * 2.0).to(device=device, dtype=dtype)
    # per-channel parameters and statistics are kept in fp32, as in mixed-precision inference
    running_mean = (0.5 * torch.randn((C,), generator=g)).to(device=device, dtype=torch.float32)
    running_var = (torch.rand((C,), generator=g) * 2.0 + 0.5).to(device=device, dtype=torch.float32)
    weight = (1.0 + 0.1 * torch.randn((C,), generator=g)).to(device=device, dtype=torch.float32)
    bias = (0.1 * torch.randn((C,), generator=g)).to(device=device, dtype=torch.float32)
    return (x, running_mean, running_var, weight, bias)


def flops(shape, dtype):
    N, C, H, W = shape
    return 5 * N * C * H * W


CHECK_SHAPES = [(2, 3, 5, 7), (4, 16, 9, 11), (1, 64, 8, 8)]
BENCH_SHAPES = [(128, 256, 56, 56)]
DTYPES = [torch.float16, torch.float32]
TOLERANCE = {
    torch.float16: {"atol": 5e-3, "rtol": 5e-3},
    torch.float32: {"atol": 1e-5, "rtol": 1e-5},
}
