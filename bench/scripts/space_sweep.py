"""Developer check (CPU, no GPU): what the tuner's static analysis makes of real launchers.

Usage: python bench/scripts/space_sweep.py MODULE.py [MODULE.py ...] > sweep.txt

For every top-level host function of each module that launches a ``@triton.jit`` kernel, the module gets a one-line
``launch(...)`` calling that host (its parameters passed through), and ``tools/tune/space.py`` builds the search space
as it would for a task: the knobs found and, for every launch value left alone, why. The last lines count the hosts,
the hosts with a tile or grid knob and the reasons for skips. An analysis that raises is printed as ERROR (a launcher
shape the tuner cannot read at all). Sources: an installed library's op modules (``liger_kernel/ops/*.py``) or an
unpacked wheel (``fla/ops/**/*.py``). Values that come in through the synthetic launch's parameters are unknown here
(a task's launch() passes real tensors), so "unresolved" skips of host parameters are the sweep's own, not gaps.
"""

from __future__ import annotations

import collections
import sys
import traceback

import libcst as cst

from tritondx.tools.rewrite.launch_sites import host_launch_sites
from tritondx.tools.tune.space import build


def sweep(paths: list[str]) -> None:
    why: collections.Counter[str] = collections.Counter()
    hosts = tiled = errors = 0
    for path in paths:
        src = open(path).read()
        if "triton.jit" not in src:
            continue
        try:
            module = cst.parse_module(src)
        except Exception as exc:   # noqa: BLE001 - a module libcst cannot read is reported, not fatal
            print(f"PARSE {path}: {exc}")
            continue
        for name in sorted({h.name.value for h, _ in host_launch_sites(module)}):
            fn = next(s for s in module.body if isinstance(s, cst.FunctionDef) and s.name.value == name)
            params = ", ".join(p.name.value for p in fn.params.params)
            try:
                space = build(f"{src}\n\ndef launch({params}):\n    return {name}({params})\n")
            except Exception as exc:   # noqa: BLE001
                errors += 1
                print(f"ERROR {path}:{name}: {exc!r}"[:300])
                traceback.print_exc(limit=-2)
                continue
            hosts += 1
            tiled += any(k.kind in ("tile", "grid") for k in space.knobs)
            knobs = " ".join(f"{k.key.split('.')[-1]}:{k.kind}" for k in space.knobs)
            print(f"{path.split('/')[-1][:32]:32s} {name[:36]:36s} knobs={len(space.knobs)} {knobs[:150]}")
            for s in space.skipped:
                print(f"    skip {s.param.split('.')[-1]}: {s.why[:140]}")
                why[s.why.split(":")[0][:70]] += 1
    print(f"\n{hosts} hosts, {tiled} with a tile or grid knob, {errors} analyses raised")
    for reason, n in why.most_common():
        print(f"{n:5d}  {reason}")


if __name__ == "__main__":
    sweep(sys.argv[1:])
