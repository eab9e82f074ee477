import importlib.util, sys, time, os, traceback
import torch, triton
HERE = os.path.dirname(os.path.abspath(__file__))


def load(name):
    spec = importlib.util.spec_from_file_location(name.replace(".py", ""), os.path.join(HERE, name))
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m


def outs(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


def bench(fn, inputs):
    return triton.testing.do_bench(lambda: fn(*inputs), warmup=50, rep=300, return_mode="median")


for line in open(os.path.join(HERE, "pairs.txt")):
    if not line.strip():
        continue
    task, cand, params = line.split(maxsplit=2)
    try:
        t = load(task); c = load(cand)
        shape = t.BENCH_SHAPES[0]; dtype = t.DTYPES[0]
        inputs = t.make_inputs(shape, dtype, 0, "cuda")
        inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
        ref = outs(t.reference(*[i.clone() for i in inputs]))
        got = outs(c.launch(*[i.clone() for i in inputs]))
        ok = all(torch.allclose(g.float(), r.float(), atol=1e-2, rtol=1e-2) for g, r in zip(got, ref))
        a = bench(t.launch, inputs); b = bench(c.launch, inputs)
        print(f"{cand:60} {params.strip()[:50]:50} orig {a*1e3:9.1f} us  cand {b*1e3:9.1f} us  x{a/b:6.2f}  match={ok}", flush=True)
    except Exception as e:
        print(f"{cand:60} ERROR {type(e).__name__}: {str(e)[:200]}", flush=True)
