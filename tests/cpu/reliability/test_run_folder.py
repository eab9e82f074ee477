"""Run folders: `optimize --out DIR` never writes over a run already in DIR (one line, exit 2, nothing
touched), an existing empty DIR is used, and a task the probe rejects leaves no half-made run folder
behind (the folder is removed when tritondx made it; in an existing --out folder only what the run
wrote is removed).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tdx_rel import BAD, TASK, Case, base_env, one_line, run_cli

PROBE_BAD = BAD / "reference_raises.py"  # passes the static checks; the sandboxed probe rejects it


def _snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``folder``: (bytes, mtime_ns)."""
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _empty_out_then_again(tmp: Path):
    """A real run into an existing empty folder, then a second `optimize` (and a `diagnose`) into it."""
    out = tmp / "run"
    out.mkdir()
    env = base_env(tmp, TRITONDX_CANDIDATES_PER_ROUND="1", TRITONDX_VERIFIER="noop")   # the folder is tested
    first = run_cli("optimize", str(TASK), "--backend", "interpreter", "--out", str(out), "--max-rounds", "1",
                    tmp=tmp, env=env, timeout=400)
    before = _snapshot(out)
    again = run_cli("optimize", str(TASK), "--backend", "interpreter", "--out", str(out), "--max-rounds", "1",
                    tmp=tmp, env=env, timeout=400)
    diag = run_cli("diagnose", str(TASK), "--backend", "interpreter", "--out", str(out), tmp=tmp, env=env,
                   timeout=400)
    return first, again, diag, before, _snapshot(out), out


def _markers_only(tmp: Path):
    """Folders holding only part of a run (what a run killed early leaves): each is refused too."""
    results = []
    for marker in ("run.json", "checkpoints.sqlite", "report.json"):
        out = tmp / f"only-{marker}"
        out.mkdir()
        (out / marker).write_bytes(b"earlier run: do not touch\n")
        before = _snapshot(out)
        r = run_cli("optimize", str(TASK), "--backend", "interpreter", "--out", str(out), tmp=tmp, timeout=120)
        results.append((marker, r, before, _snapshot(out), out))
    return results


def _probe_rejects(tmp: Path):
    """The probe rejects the task: (default runs/ folder), (--out a new folder), (--out an existing folder
    holding a file of the user's)."""
    runs = tmp / "runs"  # base_env points TRITONDX_RUNS here
    default = run_cli("optimize", str(PROBE_BAD), "--backend", "interpreter", tmp=tmp, timeout=300)
    new = tmp / "new" / "run"
    fresh = run_cli("optimize", str(PROBE_BAD), "--backend", "interpreter", "--out", str(new), tmp=tmp, timeout=300)
    mine = tmp / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("the user's file\n")
    before = _snapshot(mine)
    existing = run_cli("diagnose", str(PROBE_BAD), "--backend", "interpreter", "--out", str(mine), tmp=tmp,
                       timeout=300)
    return {"default": (default, runs), "new": (fresh, new), "existing": (existing, mine, before, _snapshot(mine))}


EMPTY_THEN_AGAIN = Case("runfolder:empty-then-again", _empty_out_then_again, cost=25)
MARKERS = Case("runfolder:markers", _markers_only, cost=8)
PROBE = Case("runfolder:probe-rejects", _probe_rejects, cost=20)


def _refusal(r, folder: Path) -> str:
    lines = one_line(r.stderr)
    assert r.returncode == 2, f"exit {r.returncode}\n{r.stderr[-2000:]}"
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    line = lines[0]
    assert line.startswith(f"tritondx: error: {folder}: already holds a run"), line
    assert f"tritondx resume {folder}" in line and "another --out" in line, line
    return line


@pytest.mark.parametrize("rcase", [EMPTY_THEN_AGAIN], ids=["empty-then-again"])
def test_out_folder_with_a_run_is_refused(rcase, rel_outcomes):
    first, again, diag, before, after, out = rel_outcomes[rcase.id].result()
    assert first.returncode == 0, f"an existing empty --out folder must be usable:\n{first.stderr[-3000:]}"
    assert {"run.json", "checkpoints.sqlite", "report.json"} <= set(before)
    _refusal(again, out)
    _refusal(diag, out)
    assert after == before, "a refused run changed the earlier run's files"


@pytest.mark.parametrize("rcase", [MARKERS], ids=["markers"])
def test_partial_run_folder_is_refused(rcase, rel_outcomes):
    for marker, r, before, after, out in rel_outcomes[rcase.id].result():
        line = _refusal(r, out)
        assert f"({marker})" in line, line
        assert after == before, f"{marker}: the folder was changed"


@pytest.mark.parametrize("rcase", [PROBE], ids=["probe-rejects"])
def test_probe_failure_leaves_no_run_folder(rcase, rel_outcomes):
    res = rel_outcomes[rcase.id].result()
    for how, (r, *_rest) in res.items():
        lines = one_line(r.stderr)
        assert r.returncode == 2 and len(lines) == 1, f"{how}: exit {r.returncode}\n{r.stderr[-2000:]}"
        assert "reference raised ValueError" in lines[0] and str(PROBE_BAD) in lines[0], lines[0]
    r, runs = res["default"]
    assert not runs.exists() or os.listdir(runs) == [], f"half-made run left under runs/: {os.listdir(runs)}"
    r, new = res["new"]
    assert not new.exists(), f"half-made run folder left: {sorted(os.listdir(new))}"
    r, mine, before, after = res["existing"]
    assert mine.is_dir() and after == before, "only what the run wrote may be removed from an existing folder"
