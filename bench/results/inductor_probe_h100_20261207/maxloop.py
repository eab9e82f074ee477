import torch, triton, triton.language as tl, math, json, sys
sys.path.insert(0, '.corpus')
import importlib.util
spec = importlib.util.spec_from_file_location("t", ".corpus/tbg_flaggems_max.py"); t = importlib.util.module_from_spec(spec); spec.loader.exec_module(t)

@triton.jit
def k1_loop(inp, mid, M, BLOCK_SIZE: tl.constexpr, CH: tl.constexpr):
    pid = tl.program_id(0)
    offset = pid * BLOCK_SIZE + tl.arange(0, CH)
    acc = tl.load(inp + offset, mask=offset < M, other=-float("inf"))
    for c in tl.range(CH, BLOCK_SIZE, CH):
        offset = pid * BLOCK_SIZE + c + tl.arange(0, CH)
        v = tl.load(inp + offset, mask=offset < M, other=-float("inf"))
        acc = tl.maximum(acc, v)
    tl.store(mid + pid, tl.max(acc))

@triton.jit
def k1_ef(inp, mid, M, BLOCK_SIZE: tl.constexpr, EF: tl.constexpr):
    pid = tl.program_id(0)
    offset = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    if EF:
        v = tl.load(inp + offset, mask=offset < M, other=-float("inf"), eviction_policy="evict_first")
    else:
        v = tl.load(inp + offset, mask=offset < M, other=-float("inf"))
    tl.store(mid + pid, tl.max(v))

@triton.jit
def k1_loop_ef(inp, mid, M, BLOCK_SIZE: tl.constexpr, CH: tl.constexpr):
    pid = tl.program_id(0)
    acc = tl.full([CH], -float("inf"), tl.float32)
    for c in tl.range(0, BLOCK_SIZE, CH):
        offset = pid * BLOCK_SIZE + c + tl.arange(0, CH)
        v = tl.load(inp + offset, mask=offset < M, other=-float("inf"), eviction_policy="evict_first")
        acc = tl.maximum(acc, v)
    tl.store(mid + pid, tl.max(acc))

def run_k(k, inp, bs, extra, nw):
    M = inp.numel()
    mid_size = triton.cdiv(M, bs)
    mid = torch.empty((mid_size,), dtype=inp.dtype, device=inp.device)
    out = torch.empty([], dtype=inp.dtype, device=inp.device)
    k[(mid_size,)](inp, mid, M, bs, extra, num_warps=nw)
    t.max_kernel_2[(1,)](mid, out, mid_size, triton.next_power_of_2(mid_size))
    return out

def run(inp, bs, ch, nw, ns):
    M = inp.numel()
    mid_size = triton.cdiv(M, bs)
    mid = torch.empty((mid_size,), dtype=inp.dtype, device=inp.device)
    out = torch.empty([], dtype=inp.dtype, device=inp.device)
    k1_loop[(mid_size,)](inp, mid, M, bs, ch, num_warps=nw, num_stages=ns)
    t.max_kernel_2[(1,)](mid, out, mid_size, triton.next_power_of_2(mid_size))
    return out

inp = t.make_inputs(("full",), torch.float32, 0, "cuda")[0]
ref = torch.amax(inp)
comp = torch.compile(t.reference)
res = {}
res["orig"] = triton.testing.do_bench(lambda: t.launch(inp), return_mode="median")
res["compile"] = triton.testing.do_bench(lambda: comp(inp), return_mode="median")
for bs in [4096, 8192, 16384]:
    for nw in [4, 8, 16]:
        for ef in [0, 1]:
            o = run_k(k1_ef, inp, bs, ef, nw); assert torch.equal(o, ref)
            res[f"oneshot_bs{bs}_w{nw}_ef{ef}"] = triton.testing.do_bench(lambda: run_k(k1_ef, inp, bs, ef, nw), return_mode="median")
for bs in [16384, 32768, 65536]:
    for ch in [1024, 2048, 4096]:
        for nw in [4, 8, 16]:
            o = run_k(k1_loop_ef, inp, bs, ch, nw); assert torch.equal(o, ref)
            res[f"loopef_bs{bs}_ch{ch}_w{nw}"] = triton.testing.do_bench(lambda: run_k(k1_loop_ef, inp, bs, ch, nw), return_mode="median")
res["orig2"] = triton.testing.do_bench(lambda: t.launch(inp), return_mode="median")
res["compile2"] = triton.testing.do_bench(lambda: comp(inp), return_mode="median")
for k, v in sorted(res.items(), key=lambda kv: kv[1])[:14]: print(k, round(v*1e3, 2))
for k in ["orig", "compile", "orig2", "compile2", "oneshot_bs4096_w4_ef0", "oneshot_bs4096_w4_ef1"]: print(k, round(res[k]*1e3, 2))
