"""The issue-33 figures of a batch's results.json: geomean and median over every task (not finished = 1.00x, the
authors' kernel kept), improved / unchanged / slower, the share at or under the faster of torch eager and
torch.compile, the batch's wall. Usage: python3 bench/scripts/corpus_figures.py results.json [more.json: later
entries replace a task's]"""

import json
import math
import statistics
import sys

entries = {}
meta = None
for path in sys.argv[1:]:
    d = json.load(open(path))
    meta = meta or d["meta"]
    for r in d["results"]:
        entries[r["task"]] = r
sp = {t: (r.get("speedup") if r.get("status") == "done" and r.get("speedup") else None) for t, r in entries.items()}
done = {t: s for t, s in sp.items() if s}
all_ = {t: (s or 1.0) for t, s in sp.items()}
g = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs))
print(f"tasks {len(entries)}, finished {len(done)}, not finished {len(entries) - len(done)}")
print(f"geomean (finished) {g(list(done.values())):.2f}x, median {statistics.median(done.values()):.2f}x")
print(f"geomean (all, not finished = 1.00x) {g(list(all_.values())):.2f}x, median {statistics.median(all_.values()):.2f}x")
print(f"improved (>1.03x) {sum(s > 1.03 for s in done.values())}, unchanged {sum(0.97 <= s <= 1.03 for s in done.values())}, "
      f"slower (<0.97x) {sum(s < 0.97 for s in done.values())}, below 1.00x: "
      + (", ".join(f"{t} {s:.2f}x" for t, s in done.items() if s < 1.0) or "none"))
vs = []
for t, r in entries.items():
    ratios = [x for x in (r.get("vs_torch_eager"), r.get("vs_torch_compile")) if x]
    if t in done and ratios:   # torch time / optimized time: >= 1 against the faster one of those timed
        vs.append(min(ratios) >= 1.0)
print(f"at or under the faster of torch eager and torch.compile: {sum(vs)} of {len(vs)} with torch timed "
      f"({100 * sum(vs) / max(len(vs), 1):.0f}%)")


def _tied(r) -> bool:
    """Slower than the faster torch by less than that torch time's own spread in its baselines job (the relative
    range of its round medians): a tie the timing cannot order. Reported beside the strict count, never in it."""
    ratios = {k: r.get(f"vs_torch_{k}") for k in ("eager", "compile") if r.get(f"vs_torch_{k}")}
    if not ratios or min(ratios.values()) >= 1.0:
        return False
    k = min(ratios, key=ratios.get)
    shape = ((r.get("baselines_bench") or {}).get("shapes") or [{}])[0]
    spread = (shape.get(f"torch_{k}") or {}).get("spread") or 0.0
    return ratios[k] >= 1.0 - spread


ties = sorted(t for t, r in entries.items() if t in done and _tied(r))
print(f"  of the rest, within the faster torch's own measured spread (a tie, not counted above): {len(ties)}"
      + (f" ({', '.join(ties)})" if ties else ""))
# a task whose speedup is its run's own last bench (batch_summary.RUN_BENCH: the final bench stopped at the
# deadline; RUN_DECISIVE: no final bench, the run's figure over batch_task.RECHECK_BELOW)
how = {t: str((r.get("measured_how") or {}).get("speedup", "")) for t, r in entries.items() if t in done}
run_bench = sorted(t for t, h in how.items() if "stopped at the batch's deadline" in h)
decisive = sorted(t for t, h in how.items() if "no final bench" in h)
if run_bench:
    print(f"speedup from the run's own last bench (final bench stopped at the deadline): {', '.join(run_bench)}")
if decisive:
    print(f"speedup from the run's own last bench (no final bench, the gain decisive): {len(decisive)} tasks")
for t in sorted(entries):
    mark = " (run's bench, final stopped)" if t in run_bench else " (run's bench)" if t in decisive else ""
    print(f"  {t}: {('%.2fx' % sp[t]) if sp[t] else entries[t].get('status')}{mark}")
