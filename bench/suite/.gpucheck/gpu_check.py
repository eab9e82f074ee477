import importlib.util, sys, os, glob, time, json, traceback
import torch, triton
from triton.testing import do_bench

torch.set_num_threads(16)
SUITE = os.path.join(os.path.dirname(__file__), "..")
OUT = os.environ.get("OUT", "/tmp")
sel = sys.argv[1:]

def load(path):
    spec = importlib.util.spec_from_file_location("t_" + os.path.basename(path)[:-3], path)
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m

def tol_for(mod, dtype):
    t = mod.TOLERANCE
    return t[dtype] if dtype in t else t[str(dtype).replace("torch.", "")]

def as_tuple(o):
    return tuple(o) if isinstance(o, (tuple, list)) else (o,)

def compare(mod, dtype, out, ref):
    tol = tol_for(mod, dtype)
    out, ref = as_tuple(out), as_tuple(ref)
    assert len(out) == len(ref)
    worst = 0.0
    for o, r in zip(out, ref):
        assert o.shape == r.shape and o.dtype == r.dtype, f"{o.shape} {o.dtype} vs {r.shape} {r.dtype}"
        od, rd = o.double(), r.double()
        ok = torch.isclose(od, rd, atol=tol["atol"], rtol=tol["rtol"], equal_nan=True)
        if not ok.all():
            err = (od - rd).abs().nan_to_num(0).max().item()
            raise AssertionError(f"mismatch: {(~ok).sum().item()} of {o.numel()} bad, max err {err:.3g}")
        worst = max(worst, (od - rd).abs().nan_to_num(0).max().item() if o.numel() else 0)
    return worst

files = sorted(glob.glob(os.path.join(SUITE, "*.py")))
if sel:
    files = [f for f in files if any(s in os.path.basename(f) for s in sel)]
res = open(os.path.join(OUT, "results.jsonl"), "a")
for f in files:
    name = os.path.basename(f)
    try:
        mod = load(f)
    except Exception as e:
        print(name, "IMPORT FAIL", e, flush=True); continue
    for dtype in mod.DTYPES:
        # compiled check shapes
        try:
            for shape in mod.CHECK_SHAPES:
                inp = mod.make_inputs(shape, dtype, 0, "cuda")
                compare(mod, dtype, mod.launch(*inp), mod.reference(*inp))
            cstat = "ok"
        except Exception as e:
            cstat = "FAIL " + str(e).splitlines()[0][:200] if str(e) else "FAIL " + type(e).__name__
            traceback.print_exc()
        for shape in mod.BENCH_SHAPES:
            rec = {"task": name, "dtype": str(dtype), "shape": list(shape), "check": cstat}
            try:
                torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats()
                t0 = time.time()
                inp = mod.make_inputs(shape, dtype, 0, "cuda")
                rec["gen_s"] = round(time.time() - t0, 1)
                in_bytes = sum(t.numel() * t.element_size() for t in inp)
                out = mod.launch(*inp); torch.cuda.synchronize()
                ref = mod.reference(*inp)
                rec["maxerr"] = compare(mod, dtype, out, ref)
                out_bytes = sum(t.numel() * t.element_size() for t in as_tuple(out))
                del ref, out
                torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
                mod.launch(*inp); torch.cuda.synchronize()
                rec["peak_gb"] = round(torch.cuda.max_memory_allocated() / 1e9, 2)
                ms = do_bench(lambda: mod.launch(*inp), warmup=25, rep=100)
                mb = mod.min_bytes(shape, dtype) if hasattr(mod, "min_bytes") else in_bytes + out_bytes
                rec.update(us=round(ms * 1e3, 1), min_bytes_mb=round(mb / 1e6, 1),
                           gbps=round(mb / (ms * 1e-3) / 1e9, 1), in_mb=round(in_bytes / 1e6, 1))
                if hasattr(mod, "flops"):
                    rec["tflops"] = round(mod.flops(shape, dtype) / (ms * 1e-3) / 1e12, 1)
                rec["status"] = "ok"
                del inp
            except Exception as e:
                rec["status"] = "FAIL " + (str(e).splitlines()[0][:300] if str(e) else type(e).__name__)
                traceback.print_exc()
            print(json.dumps(rec), flush=True)
            res.write(json.dumps(rec) + "\n"); res.flush()
