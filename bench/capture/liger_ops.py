"""A small program calling a few Liger-Kernel ops (an installed library, not vendored) on realistic shapes.

`tritondx capture -- python bench/capture/liger_ops.py --size real` on a GPU; `--size small` under
TRITON_INTERPRET=1 on CPU (only the ops the 3.6 interpreter runs: softmax, cross entropy, rope; RMSNorm and
SwiGLU call `.to` on a float scalar argument, which the interpreter passes as a plain Python float: capture
names such a kernel in its last line and exits with the program's status). `bench/capture/step.py` is the
whole-model program (a Llama-style training step).
"""

import argparse

import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", choices=["small", "real"], default="small")
    ap.add_argument("--steps", type=int, default=2)
    args = ap.parse_args()
    real = args.size == "real"
    dev = "cuda" if real else "cpu"
    dt = torch.bfloat16 if real else torch.float32
    from liger_kernel.ops.cross_entropy import LigerCrossEntropyFunction
    from liger_kernel.ops.rope import LigerRopeFunction
    from liger_kernel.ops.softmax import LigerSoftmaxFunction
    bt, hidden, vocab = (8192, 4096, 32000) if real else (6, 96, 100)
    b, heads, t, d = (4, 32, 2048, 128) if real else (1, 2, 8, 16)
    for _ in range(args.steps):
        x = torch.randn(bt, hidden, device=dev, dtype=dt, requires_grad=True)
        y = LigerSoftmaxFunction.apply(x)
        y.sum().backward()
        logits = torch.randn(bt, vocab, device=dev, dtype=dt, requires_grad=True)
        target = torch.randint(0, vocab, (bt,), device=dev)
        loss = LigerCrossEntropyFunction.apply(logits, target, None)[0]
        loss.backward()
        q = torch.randn(b, heads, t, d, device=dev, dtype=dt)
        k = torch.randn(b, heads // 4 if real else heads, t, d, device=dev, dtype=dt)
        cos = torch.randn(1, t, d, device=dev, dtype=dt)
        sin = torch.randn(1, t, d, device=dev, dtype=dt)
        LigerRopeFunction.apply(q, k, cos, sin)
        if real:
            from liger_kernel.ops.rms_norm import LigerRMSNormFunction
            from liger_kernel.ops.swiglu import LigerSiLUMulFunction
            h = torch.randn(bt, hidden, device=dev, dtype=dt, requires_grad=True)
            w = torch.randn(hidden, device=dev, dtype=dt, requires_grad=True)
            LigerRMSNormFunction.apply(h, w, 1e-6).sum().backward()
            a = torch.randn(bt, 14336, device=dev, dtype=dt)
            g = torch.randn(bt, 14336, device=dev, dtype=dt)
            LigerSiLUMulFunction.apply(a, g)
    if real:
        torch.cuda.synchronize()
    print("liger ops done")


if __name__ == "__main__":
    main()
