"""A Llama-style training step built from Liger-Kernel's Triton kernels (an installed library, not vendored).

One step: token embeddings -> ``--layers`` decoder blocks (RMSNorm, q/k/v projections, RoPE, causal attention
with grouped KV heads, output projection, RMSNorm, SwiGLU MLP) -> final RMSNorm -> LM head with fused linear
cross-entropy, then the backward pass through all of it. The Triton kernels are Liger-Kernel's:

- ``LigerRMSNormFunction`` (forward and backward), ``LigerSiLUMulFunction`` (SwiGLU, forward and backward),
- ``LigerRopeFunction`` (forward and backward), ``LigerFusedLinearCrossEntropyFunction`` (its cross-entropy
  and gradient-scaling kernels run in the forward pass);

the matrix products and attention are PyTorch's (cuBLAS, SDPA), as in a real model. Sizes:

- ``--size h200``: Llama-3-8B's block (hidden 4096, 32 query / 8 KV heads of 128, MLP 14336, vocabulary 128256),
  batch 4 x 2048 tokens, bf16, on CUDA: 4.7 GiB of parameters and gradients (the 128256 x 4096 embedding and LM
  head are most of it) plus a few GiB of activations; ~37 TFLOP a step (the LM head two thirds of it), so on the
  order of 0.1 s on an H200, Liger's kernels a minor share of it (Amdahl);
- ``--size tiny``: the same structure at toy sizes (CPU tests, the capture flow under ``TRITON_INTERPRET=1``).

Where a Liger kernel cannot run (``--impl auto``): on CUDA every op is Liger's; under the Triton interpreter
Liger's RMSNorm and SwiGLU fail (they call ``.to`` on a float scalar argument, which the interpreter passes as
a plain Python float), so those two fall back to PyTorch and RoPE and the fused cross-entropy stay Liger's; on a
CPU without the interpreter every op is PyTorch's. ``--impl torch`` is the PyTorch reference everywhere.

``--pkg`` names the Liger package to import (``liger_kernel``, or a patched copy importable under another name,
as ``bench/capture/bench_step.py`` loads the original and the patched library side by side in one process).

    python bench/capture/step.py --size h200 --steps 3          # on the GPU (what `tritondx capture` runs)
    TRITON_INTERPRET=1 python bench/capture/step.py --size tiny  # on a CPU
"""

from __future__ import annotations

import argparse
import importlib
import os
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F

SIZES = {
    # hidden, q heads, kv heads, head dim, mlp, vocab, batch, seq
    "h200": dict(hidden=4096, heads=32, kv_heads=8, head_dim=128, mlp=14336, vocab=128256, batch=4, seq=2048),
    "small": dict(hidden=1024, heads=8, kv_heads=2, head_dim=128, mlp=3584, vocab=32000, batch=2, seq=512),
    "tiny": dict(hidden=64, heads=4, kv_heads=2, head_dim=16, mlp=160, vocab=256, batch=2, seq=8),
}
OPS = ("rms_norm", "swiglu", "rope", "cross_entropy")
# Liger kernels the Triton 3.x interpreter cannot run (a method called on a float scalar argument)
NOT_UNDER_INTERPRETER = ("rms_norm", "swiglu")


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


# ---- the four ops: PyTorch references -------------------------------------------------------------------------

def torch_rms_norm(x, w, eps):
    """Llama's RMSNorm as Liger's ``casting_mode="llama"``: the normalization in fp32, cast back, times w."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


def torch_swiglu(a, b):
    return (F.silu(a.float()) * b.float()).to(a.dtype)


def _rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def torch_rope(q, k, cos, sin):
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


def torch_linear_cross_entropy(h, w, target):
    return F.cross_entropy((h @ w.t()).float(), target)


# ---- the same ops from a Liger package --------------------------------------------------------------------------

@dataclass
class Ops:
    rms_norm: object
    swiglu: object
    rope: object
    cross_entropy: object
    impl: dict                   # op -> "liger_kernel" (the package) or "torch"

    def describe(self) -> str:
        return ", ".join(f"{op}: {self.impl[op]}" for op in OPS)


def make_ops(impl: str = "auto", pkg: str = "liger_kernel", device: str = "cuda") -> Ops:
    """The step's four ops: Liger's (from package ``pkg``) where they can run here, else PyTorch's."""
    if impl == "torch":
        use = dict.fromkeys(OPS, False)
    elif impl == "liger":
        use = dict.fromkeys(OPS, True)
    elif device == "cuda":
        use = dict.fromkeys(OPS, True)
    elif interpreting():
        use = {op: op not in NOT_UNDER_INTERPRETER for op in OPS}
    else:
        use = dict.fromkeys(OPS, False)
    ops = {"rms_norm": torch_rms_norm, "swiglu": torch_swiglu, "rope": torch_rope,
           "cross_entropy": torch_linear_cross_entropy}
    if use["rms_norm"]:
        fn = importlib.import_module(f"{pkg}.ops.rms_norm").LigerRMSNormFunction
        ops["rms_norm"] = lambda x, w, eps, _f=fn: _f.apply(x, w, eps)
    if use["swiglu"]:
        fn = importlib.import_module(f"{pkg}.ops.swiglu").LigerSiLUMulFunction
        ops["swiglu"] = lambda a, b, _f=fn: _f.apply(a, b)
    if use["rope"]:
        fn = importlib.import_module(f"{pkg}.ops.rope").LigerRopeFunction
        ops["rope"] = lambda q, k, cos, sin, _f=fn: _f.apply(q, k, cos, sin)
    if use["cross_entropy"]:
        fn = importlib.import_module(f"{pkg}.ops.fused_linear_cross_entropy").LigerFusedLinearCrossEntropyFunction
        ops["cross_entropy"] = lambda h, w, t, _f=fn: _f.apply(h, w, t)[0]
    return Ops(**ops, impl={op: pkg if use[op] else "torch" for op in OPS})


# ---- the model --------------------------------------------------------------------------------------------------

class Model:
    """Parameters of an embedding, ``layers`` decoder blocks, a final norm and an LM head (untied)."""

    def __init__(self, size: dict, layers: int, device: str, dtype: torch.dtype, seed: int = 0):
        g = torch.Generator(device=device).manual_seed(seed)   # drawn where they live (1.3e9 values at h200)
        H, V = size["hidden"], size["vocab"]
        q, kv = size["heads"] * size["head_dim"], size["kv_heads"] * size["head_dim"]
        self.size, self.eps = size, 1e-5

        def p(*shape, std=0.02, ones=False):
            if ones:
                return torch.ones(*shape, device=device, dtype=dtype).requires_grad_()
            t = torch.randn(*shape, generator=g, device=device, dtype=torch.float32) * std
            return t.to(dtype).requires_grad_()

        self.embed = p(V, H)
        self.blocks = [dict(ln1=p(H, ones=True), wq=p(q, H), wk=p(kv, H), wv=p(kv, H), wo=p(H, q),
                            ln2=p(H, ones=True), wg=p(size["mlp"], H), wu=p(size["mlp"], H), wd=p(H, size["mlp"]))
                       for _ in range(layers)]
        self.norm = p(H, ones=True)
        self.head = p(V, H)
        d = size["head_dim"]
        inv = 1.0 / (500000.0 ** (torch.arange(0, d, 2).float() / d))
        ang = torch.outer(torch.arange(size["seq"]).float(), inv)
        emb = torch.cat((ang, ang), dim=-1)
        self.cos = emb.cos()[None].to(device=device, dtype=dtype)     # (1, T, D)
        self.sin = emb.sin()[None].to(device=device, dtype=dtype)

    def parameters(self) -> list[torch.Tensor]:
        out = [self.embed]
        for b in self.blocks:
            out += list(b.values())
        return out + [self.norm, self.head]

    def named(self) -> dict[str, torch.Tensor]:
        out = {"embed": self.embed}
        for i, b in enumerate(self.blocks):
            out.update({f"blocks.{i}.{k}": v for k, v in b.items()})
        return out | {"norm": self.norm, "head": self.head}

    def block(self, x: torch.Tensor, p: dict, ops: Ops) -> torch.Tensor:
        s = self.size
        B, T, H = x.shape
        nh, nkv, d = s["heads"], s["kv_heads"], s["head_dim"]
        h = ops.rms_norm(x, p["ln1"], self.eps)
        q = (h @ p["wq"].t()).view(B, T, nh, d).transpose(1, 2)
        k = (h @ p["wk"].t()).view(B, T, nkv, d).transpose(1, 2)
        v = (h @ p["wv"].t()).view(B, T, nkv, d).transpose(1, 2)
        q, k = ops.rope(q, k, self.cos, self.sin)
        rep = nh // nkv
        a = F.scaled_dot_product_attention(q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1),
                                           is_causal=True)
        x = x + a.transpose(1, 2).reshape(B, T, nh * d) @ p["wo"].t()
        h = ops.rms_norm(x, p["ln2"], self.eps)
        return x + ops.swiglu(h @ p["wg"].t(), h @ p["wu"].t()) @ p["wd"].t()

    def loss(self, tokens: torch.Tensor, target: torch.Tensor, ops: Ops) -> torch.Tensor:
        x = F.embedding(tokens, self.embed)
        for p in self.blocks:
            x = self.block(x, p, ops)
        h = ops.rms_norm(x, self.norm, self.eps)
        return ops.cross_entropy(h.reshape(-1, h.shape[-1]), self.head, target.reshape(-1))


def batch(size: dict, device: str, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator(device="cpu").manual_seed(seed)
    tokens = torch.randint(0, size["vocab"], (size["batch"], size["seq"] + 1), generator=g)
    return tokens[:, :-1].contiguous().to(device), tokens[:, 1:].contiguous().to(device)


def memory_gib(size: dict, layers: int) -> float:
    """Parameters and their gradients in bf16, GiB (activations come on top: a few GiB at h200)."""
    H, V, q = size["hidden"], size["vocab"], size["heads"] * size["head_dim"]
    kv, m = size["kv_heads"] * size["head_dim"], size["mlp"]
    per_layer = 2 * H + H * q * 2 + 2 * H * kv + 3 * H * m
    return 2 * 2 * (2 * V * H + H + layers * per_layer) / 2 ** 30


def step(model: Model, tokens, target, ops: Ops) -> torch.Tensor:
    """One training step's forward and backward; the gradients land in the parameters' ``.grad``."""
    for t in model.parameters():
        t.grad = None
    loss = model.loss(tokens, target, ops)
    loss.backward()
    return loss.detach()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="h200")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--impl", choices=["auto", "liger", "torch"], default="auto")
    ap.add_argument("--pkg", default="liger_kernel", help="the Liger package to import (a patched copy's name)")
    ap.add_argument("--device", default=None, help="default: cuda when available, else cpu")
    args = ap.parse_args(argv)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    size = SIZES[args.size]
    ops = make_ops(args.impl, args.pkg, device)
    print(f"step: size {args.size}, {args.layers} block(s), {device} {str(dtype).replace('torch.', '')}, "
          f"{memory_gib(size, args.layers):.1f} GiB of parameters and gradients; ops: {ops.describe()}", flush=True)
    if "torch" in ops.impl.values() and args.impl == "auto":
        why = ("Liger's kernels cannot run under the Triton interpreter (they call .to on a float scalar "
               "argument)" if interpreting() else "no GPU and no TRITON_INTERPRET=1")
        print(f"  torch fallback for {', '.join(op for op in OPS if ops.impl[op] == 'torch')}: {why}")
    model = Model(size, args.layers, device, dtype)
    tokens, target = batch(size, device)
    for i in range(args.steps):
        t0 = time.perf_counter()
        loss = step(model, tokens, target, ops)
        if device == "cuda":
            torch.cuda.synchronize()
        print(f"  step {i}: loss {float(loss):.4f}  {1e3 * (time.perf_counter() - t0):.1f} ms", flush=True)
    print("step done")


if __name__ == "__main__":
    main()
