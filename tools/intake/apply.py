"""``tritondx apply RUN``: the optimized kernel of a captured task, written back into the user's source file.

A captured task (tools/intake/taskgen.py) records in ``ORACLE`` where its kernel and copied helpers came
from (file, lines, sha256 of those lines) and where the program launched it. From the run's
``optimized_task.py`` this module computes:

- function edits: every copied function whose optimized source differs replaces the user's definition
  (the user's decorators are kept; decorators the optimizer added are put above them); functions the
  optimizer added are inserted before the kernel;
- call-site edits: a changed constexpr or launch option of the kernel call (``BLOCK=...``,
  ``num_warps=...``) is written where the user's launcher sets it: the literal in the call, or the literal a
  plain ``NAME = <literal>`` assignment gives the name used there (so a grid computed from that name stays
  consistent); an option the call did not pass is added. Anything else (a changed grid, a computed value,
  another kernel launched) is listed in the patch header for review, not guessed.

The result is a unified diff in ``RUN/apply.patch`` (paths relative to the repository root when the file
is in a git repository, so ``git apply RUN/apply.patch`` works); ``--commit`` applies it and commits it
with a message carrying the evidence and the measured speedup (or saying speed was not measured).
"""

from __future__ import annotations

import ast
import difflib
import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritondx.errors import TritonDXError
from tritondx.tools.rewrite.taskinfo import safe_eval


class ApplyError(TritonDXError):
    def __init__(self, what: str, problem: str):
        self.problem = problem
        super().__init__(f"{what}: {problem}")


@dataclass
class ApplyResult:
    run: Path
    task: str
    patch_path: Path | None = None
    files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    commit: str | None = None
    unchanged: bool = False
    why_unchanged: str = ""
    written: bool = False

    def summary(self) -> str:
        if self.unchanged:
            return f"{self.task}: the optimized kernel equals the original: nothing to apply" + \
                (f" ({self.why_unchanged})" if self.why_unchanged else "")
        head = f"{self.task}: patch {self.patch_path} ({', '.join(self.files)})"
        if self.commit:
            head += f", committed {self.commit[:12]}"
        elif self.written:
            head += ", written into the files"
        return "\n".join([head] + [f"  review: {n}" for n in self.notes])


# ---- reading the run -----------------------------------------------------------------------------------------

def _oracle(task_source: str, path: str) -> dict[str, Any]:
    tree = ast.parse(task_source)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "ORACLE" for t in node.targets):
            return ast.literal_eval(node.value)
    raise ApplyError(path, "not a captured task (no ORACLE): apply writes back kernels made by `tritondx capture`")


def _functions(source: str) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)}


def _segment(source: str, node: ast.FunctionDef, with_decorators: bool) -> str:
    lines = source.splitlines(keepends=True)
    start = (node.decorator_list[0].lineno if with_decorators and node.decorator_list else node.lineno) - 1
    return "".join(lines[start:node.end_lineno])


def _decorators(source: str, node: ast.FunctionDef) -> list[str]:
    return [ast.get_source_segment(source, d) or "" for d in node.decorator_list]


@dataclass
class KernelCall:
    kernel: str
    grid: str
    positional: list[str]
    keywords: dict[str, str]   # resolved through the launcher's simple assignments


def _launch_call(source: str) -> KernelCall | None:
    fn = _functions(source).get("launch")
    if fn is None:
        return None
    assigned: dict[str, ast.expr] = {}
    call = None
    for stmt in fn.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            assigned[stmt.targets[0].id] = stmt.value
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript):
                call = node

    def resolve(e: ast.expr, depth: int = 0) -> str:
        if isinstance(e, ast.Name) and e.id in assigned and depth < 4:
            return resolve(assigned[e.id], depth + 1)
        return ast.unparse(e)

    if call is None:
        return None
    return KernelCall(kernel=ast.unparse(call.func.value), grid=resolve(call.func.slice),
                      positional=[resolve(a) for a in call.args],
                      keywords={k.arg: resolve(k.value) for k in call.keywords if k.arg})


# ---- edits of the user's file ----------------------------------------------------------------------------------

def _offset(text: str, line: int, col: int) -> int:
    lines = text.splitlines(keepends=True)
    return sum(len(x) for x in lines[:line - 1]) + col


def _replace(text: str, node: ast.AST, new: str) -> str:
    a = _offset(text, node.lineno, node.col_offset)
    b = _offset(text, node.end_lineno, node.end_col_offset)
    return text[:a] + new + text[b:]


def _find_call(tree: ast.Module, kernel: str, func: str, line: int) -> ast.Call | None:
    best = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript):
            name = ast.unparse(node.func.value).split(".")[-1]
            if name == kernel and (best is None or abs(node.lineno - line) < abs(best.lineno - line)):
                best = node
    return best


def _enclosing_assign(tree: ast.Module, name: str, before_line: int) -> ast.Assign | None:
    """The last ``name = <literal>`` before the call: in the enclosing function, else at module level."""
    found = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id == name and node.lineno < before_line:
            try:
                safe_eval(node.value)
            except (ValueError, TypeError, ZeroDivisionError):
                continue
            if found is None or node.lineno > found.lineno:
                found = node
    return found


def call_site_edits(text: str, site: str, kernel: str, old: KernelCall, new: KernelCall,
                    constexprs: list[str], notes: list[str]) -> str:
    """Write changed constexpr / launch-option values into the user's kernel call at ``site``."""
    _, line, func = _split_site(site)
    changed = {k: v for k, v in new.keywords.items() if old.keywords.get(k) != v}
    if new.kernel != old.kernel:
        notes.append(f"launch() now launches {new.kernel} instead of {old.kernel}: change the launcher at {site} "
                     f"by hand (see optimized_task.py launch())")
        return text
    if new.grid != old.grid:
        notes.append(f"the grid changed from {old.grid} to {new.grid}: not written back (launcher at {site})")
    if new.positional != old.positional:
        notes.append(f"positional arguments changed ({len(old.positional)} -> {len(new.positional)}): "
                     f"not written back (launcher at {site})")
    removed = [k for k in old.keywords if k not in new.keywords]
    if removed:
        notes.append(f"keywords {removed} no longer passed: not written back")
    for key, value in sorted(changed.items()):
        try:
            safe_eval(ast.parse(value, mode="eval").body)
        except (ValueError, SyntaxError, TypeError, ZeroDivisionError):
            notes.append(f"{key} is now `{value}` (an expression of the captured launch): not written back")
            continue
        tree = ast.parse(text)
        call = _find_call(tree, kernel, func, line)
        if call is None:
            notes.append(f"no call of {kernel} found near {site}: {key}={value} not written back")
            return text
        kw = next((k for k in call.keywords if k.arg == key), None)
        if kw is None:
            if key in constexprs or key.startswith("num_") or key in ("maxnreg",):
                end = _offset(text, call.end_lineno, call.end_col_offset) - 1   # before the closing paren
                sep = ", " if (call.args or call.keywords) else ""
                text = text[:end] + f"{sep}{key}={value}" + text[end:]
            continue
        try:
            safe_eval(kw.value)
            text = _replace(text, kw.value, value)
            continue
        except (ValueError, TypeError, ZeroDivisionError):
            pass
        if isinstance(kw.value, ast.Name):
            assign = _enclosing_assign(tree, kw.value.id, call.lineno)
            if assign is not None:
                text = _replace(text, assign.value, value)
                notes.append(f"{key}: `{kw.value.id} = {value}` at line {assign.lineno} (the launcher passes "
                             f"{key}={kw.value.id}); other uses of {kw.value.id} see the new value too")
                continue
        notes.append(f"{key}={value} verified on the captured signatures; the launcher computes it as "
                     f"`{ast.unparse(kw.value)}`: replaced by the literal")
        text = _replace(text, kw.value, value)
    return text


def _split_site(site: str) -> tuple[str, int, str]:
    path, line, func = site.rsplit(":", 2)
    return path, int(line), func


def function_edits(text: str, originals: dict[str, str], task_src: str, opt_src: str, kernel: str,
                   notes: list[str]) -> str:
    """Replace each copied function whose optimized source differs; insert new functions before the kernel."""
    old_fns, new_fns = _functions(task_src), _functions(opt_src)
    skip = {"launch", "reference", "make_inputs", "torch_reference", "flops", "min_bytes"}
    for name, node in new_fns.items():
        if name in skip or name not in originals or name not in old_fns:
            continue
        before = _segment(task_src, old_fns[name], with_decorators=False)
        after = _segment(opt_src, node, with_decorators=False)
        if before == after and _decorators(task_src, old_fns[name]) == _decorators(opt_src, node):
            continue
        user_fn = originals[name]
        user_tree = ast.parse(user_fn.lstrip("\n"))
        user_node = user_tree.body[0]
        user_decos = "".join(user_fn.splitlines(keepends=True)[:user_node.lineno - 1])
        added = [d for d in _decorators(opt_src, node) if d not in _decorators(task_src, old_fns[name])]
        indent = user_fn[:len(user_fn) - len(user_fn.lstrip(" "))]
        body = "".join(indent + ln if ln.strip() else ln for ln in after.splitlines(keepends=True))
        new_text = "".join(f"{indent}@{d}\n" for d in added) + user_decos + body
        if added:
            notes.append(f"{name}: decorators added by the optimizer: {', '.join('@' + d for d in added)}")
        text = text.replace(user_fn, new_text, 1)
    fresh = [n for n in new_fns if n not in old_fns and n not in skip]
    if fresh and kernel in originals:
        anchor = originals[kernel]
        pos = text.find(_first_line(anchor)) if anchor not in text else text.find(anchor)
        block = "".join(_segment(opt_src, new_fns[n], with_decorators=True) + "\n\n" for n in fresh)
        if pos >= 0:
            text = text[:pos] + block + text[pos:]
            notes.append(f"new functions from the optimizer inserted before {kernel}: {', '.join(fresh)}")
    return text


def _first_line(s: str) -> str:
    return s.splitlines(keepends=True)[0] if s else ""


# ---- one run -------------------------------------------------------------------------------------------------

def _user_lines(origin: dict[str, Any]) -> str:
    """The function's text as captured, checked to be in its file exactly once (lines may have moved)."""
    path = Path(origin["file"])
    if not path.exists():
        raise ApplyError(str(path), "the kernel's source file no longer exists")
    text = origin.get("text") or ""
    if not text or path.read_text().count(text) != 1:
        raise ApplyError(str(path), f"{origin['name']} (captured at line {origin['start_line']}) changed since "
                                    "capture: capture again, then apply")
    return text


def _git_root(path: Path) -> Path | None:
    try:
        out = subprocess.run(["git", "-C", str(path.parent), "rev-parse", "--show-toplevel"], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return Path(out.stdout.strip()) if out.returncode == 0 and out.stdout.strip() else None


def _tag(f: dict[str, Any]) -> str:
    """A finding, one line, with the version it was read from (the report's "read from")."""
    msg = " ".join(str(f.get("message", "")).split())[:160]
    return f"[{f.get('tier')}] {f.get('detector')}: {msg} [read from {f.get('subject') or 'initial'}]"


def evidence_for_change(report: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The findings that argue for the chosen version, and those read from the chosen version itself.

    For the change: the findings the chosen candidate and its parents were made for (``motivated_by``), and
    those the report's closure marks fixed (gone when the detector was re-run on the chosen version). A
    finding read from the chosen version is about the result (``grid_too_small`` on the block the rewrite
    picked argues against it, not for it): listed apart, never as evidence. Each is tagged with the version
    it was read from."""
    best_id = (report.get("best") or {}).get("id") or "initial"
    cands = {c.get("id"): c for c in report.get("candidates", [])}
    chain, cid = [], best_id
    while cid in cands and cid not in chain:
        chain.append(cid)
        cid = cands[cid].get("parent")
    cited = {fid: c for c in chain for fid in cands[c].get("motivated_by") or []}
    fixed = {r.get("finding"): r for r in report.get("closure") or [] if r.get("status") == "fixed"}
    why, about = [], []
    for f in report.get("findings") or []:
        fid = f.get("id")
        read_from = f.get("subject") or "initial"
        if best_id != "initial" and read_from != best_id and (fid in cited or fid in fixed):
            how = [f"cited by {cited[fid]}"] if fid in cited else []
            how += [f"gone from {best_id}"] if fid in fixed else []
            why.append(f"{_tag(f)} ({'; '.join(how)})")
        elif best_id != "initial" and read_from == best_id:
            about.append(_tag(f))
    return why, about


def _evidence(report: dict[str, Any], speed: dict[str, Any]) -> str:
    best = report.get("best") or {}
    lines = []
    sp = speed.get("speedup")
    if sp:
        lines.append(f"Measured speedup: {sp:.2f}x ({speed.get('where', 'side by side with the original kernel')}).")
    else:
        lines.append(f"Speed not measured (backend {report.get('backend')}): verified correct only.")
    fams = [c["family"] for c in report.get("candidates", []) if c["id"] == best.get("id")]
    lines.append(f"Rewrite: {fams[0] if fams else best.get('family', 'initial')} (candidate {best.get('id')}); "
                 f"kernel class {report.get('kernel_class')}; tiers used: {', '.join(report.get('tiers_used', []))}.")
    ok = sum(1 for c in report.get("candidates", []) if c.get("verified"))
    rej = sum(1 for c in report.get("candidates", []) if c.get("verified") is False)
    lines.append(f"Verified against the original kernel (oracle mode): {ok} candidates passed, {rej} rejected.")
    why, about = evidence_for_change(report)
    if why:
        lines.append("Evidence for the change:")
        lines += [f"- {w}" for w in why[:6]]
    else:
        lines.append("Evidence for the change: no finding cited by this candidate or fixed by it "
                     "(see the run's report.md).")
    if about:
        lines.append(f"Still reported on the chosen version {best.get('id')} (about the result, not evidence "
                     "for it):")
        lines += [f"- {a}" for a in about[:3]]
    return "\n".join(lines)


def _why_initial(report: dict[str, Any]) -> str:
    """Why a run kept the initial kernel, when the reason is that nothing could be timed."""
    best = (report.get("best") or {}).get("id") or "initial"
    verified = [c["id"] for c in report.get("candidates", []) if c.get("verified")]
    if best == "initial" and verified and report.get("speed") != "measured":
        return (f"speed was not measured on {report.get('backend')}, so the run kept the initial kernel although "
                f"{len(verified)} candidate(s) verified ({', '.join(verified[:3])}); `--accept-unmeasured` on "
                "batch or optimize takes the first verified one")
    return ""


def apply_one(run: Path, commit: bool = False, speed: dict[str, Any] | None = None,
              write: bool = False) -> ApplyResult:
    report_p, opt_p = run / "report.json", run / "optimized_task.py"
    if not report_p.exists() or not opt_p.exists():
        raise ApplyError(str(run), "not a finished run folder (no report.json / optimized_task.py)")
    report = json.loads(report_p.read_text())
    if report.get("verifier") == "noop" and (report.get("best") or {}).get("id") not in (None, "initial"):
        raise ApplyError(str(run), "its candidates were not checked (the run used the no-op verifier): nothing to "
                                   "write back")
    task_path = Path(report.get("task_path") or "")
    initial = run / "task_initial.py"
    task_src = (initial if initial.exists() else task_path).read_text()
    opt_src = opt_p.read_text()
    oracle = _oracle(task_src, str(task_path))
    name = report.get("task") or oracle["kernel"]
    res = ApplyResult(run=run, task=name)
    if opt_src == task_src:
        res.unchanged = True
        res.why_unchanged = _why_initial(report)
        return res
    speed = speed or ({"speedup": report.get("speedup"), "where": f"tritondx optimize, backend {report.get('backend')}"}
                      if report.get("speed") == "measured" else {})
    origins = [oracle["origin"]] + list(oracle.get("helpers", []))
    by_file: dict[str, dict[str, str]] = {}
    for o in origins:
        by_file.setdefault(o["file"], {})[o["name"]] = _user_lines(o)
    kernel = oracle["kernel"]
    old_call, new_call = _launch_call(task_src), _launch_call(opt_src)
    constexprs = [a.arg for a in _functions(task_src)[kernel].args.args
                  if a.annotation is not None and "constexpr" in ast.unparse(a.annotation)]
    sites = [s for s in oracle.get("call_sites", {}) if Path(_split_site(s)[0]).exists()]
    new_texts: dict[str, str] = {}
    for path in set(by_file) | {_split_site(s)[0] for s in sites}:
        new_texts[path] = Path(path).read_text()
    if old_call and new_call:
        for s in sites:
            p = _split_site(s)[0]
            new_texts[p] = call_site_edits(new_texts[p], s, kernel, old_call, new_call, constexprs, res.notes)
    for path, originals in by_file.items():
        new_texts[path] = function_edits(new_texts[path], originals, task_src, opt_src, kernel, res.notes)
    diffs = []
    for path, new in sorted(new_texts.items()):
        old = Path(path).read_text()
        if old == new:
            continue
        root = _git_root(Path(path))
        rel = str(Path(path).resolve().relative_to(root.resolve())) if root else path
        diffs.append("".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                                  f"a/{rel}", f"b/{rel}")))
        res.files.append(rel)
    if not diffs:
        res.unchanged = True
        return res
    header = [f"# tritondx apply: {name} ({kernel}) from {run}", *[f"# {ln}" for ln in _evidence(report, speed).splitlines()]]
    header += [f"# review: {n}" for n in res.notes]
    res.patch_path = run / "apply.patch"
    res.patch_path.write_text("\n".join(header) + "\n" + "".join(diffs))
    if commit:
        res.commit = _commit(new_texts, name, kernel, report, speed, res)
    elif write:   # the files changed in place, no git needed (a library's copy, a host without git)
        for path, new in new_texts.items():
            if Path(path).read_text() != new:
                Path(path).write_text(new)
        res.written = True
    return res


def _commit(new_texts: dict[str, str], name: str, kernel: str, report: dict, speed: dict, res: ApplyResult) -> str:
    roots = {_git_root(Path(p)) for p in new_texts if Path(p).read_text() != new_texts[p]}
    if None in roots or len(roots) != 1:
        raise ApplyError(", ".join(res.files), "--commit needs the changed files inside one git repository")
    root = roots.pop()
    changed = [p for p in new_texts if Path(p).read_text() != new_texts[p]]
    for p in changed:
        Path(p).write_text(new_texts[p])
    sp = speed.get("speedup")
    title = f"tritondx: optimize {kernel}" + (f" ({sp:.2f}x measured)" if sp else " (speed not measured)")
    msg = title + "\n\n" + _evidence(report, speed) + "\n" + "".join(f"\nReview: {n}" for n in res.notes) + \
        f"\n\nRun: {res.run}\n"
    git = ["git", "-C", str(root)]
    subprocess.run(git + ["add", "--"] + changed, check=True, capture_output=True)
    out = subprocess.run(git + ["commit", "-q", "-m", msg, "--"] + changed, capture_output=True, text=True)
    if out.returncode != 0:
        raise ApplyError(str(root), f"git commit failed: {(out.stderr or out.stdout).strip()[:200]}")
    return subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


def apply_run(run: Path, commit: bool = False, write: bool = False) -> list[ApplyResult]:
    """One run folder, or every captured task's run of a batch folder (its results.json)."""
    if (run / "report.json").exists():
        return [apply_one(run, commit, write=write)]
    results_p = run / "results.json"
    if not results_p.exists():
        raise ApplyError(str(run), "neither a run folder (report.json) nor a batch folder (results.json)")
    out = []
    for entry in json.loads(results_p.read_text()).get("results", []):
        rd = run / "runs" / entry["task"]
        if entry.get("status") != "done" or not (rd / "report.json").exists():
            continue
        speed = {"speedup": entry["speedup"], "where": "tritondx batch final bench, side by side"} \
            if entry.get("speedup") else None
        try:
            out.append(apply_one(rd, commit, speed, write=write))
        except ApplyError as exc:
            if "not a captured task" not in exc.problem:
                raise
    return out
