"""A finished run after the fact: `resume` is a no-op that says so; `history`, `show` and `replay --fork`
read a run folder on a read-only mount; `--out` on one is refused with one line."""

import hashlib
import json
import shutil
import subprocess

import pytest


@pytest.fixture(scope="module")
def finished(tmp_path_factory, ops):
    tmp = tmp_path_factory.mktemp("finished")
    out = tmp / "runs" / "done"
    # a family that passed is proposed again on the interpreter: the fork below needs a round 2 to check
    env = {**ops.cli_env(tmp / "runs"), "TRITONDX_CANDIDATES_PER_ROUND": "1", "TRITONDX_UNTIMED_REPEAT": "1"}
    r = subprocess.run([ops.exe(), "optimize", str(ops.EXAMPLES / "add_tiny_block.py"), "--backend", "interpreter",
                        "--max-rounds", "1", "--out", str(out)], capture_output=True, text=True, env=env, cwd=tmp,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return out


def _digests(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def test_resume_of_a_finished_run_is_a_noop(finished, cli):
    before = _digests(finished)
    r = cli("resume", str(finished))
    assert r.returncode == 0, r.stderr
    best = json.loads((finished / "report.json").read_text())["best"]["id"]
    assert r.stdout.strip().splitlines() == [f"run {finished} is finished (best {best}): nothing to resume; "
                                             "its report is unchanged"]
    assert _digests(finished) == before  # report.* and log.jsonl untouched


def test_history_error_has_no_header(cli, tmp_path):
    r = cli("history", str(tmp_path / "nope"))
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and "no run folder" in r.stderr


def _read_only_shell(folder, script, ops, tmp):
    """Run ``script`` (bash, $T = the CLI) with ``folder`` bind-mounted read-only (a private mount namespace)."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"no mount namespace here: {probe.stderr.decode()[:200]}")
    mount = f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder} {folder}"
    return subprocess.run(["unshare", "-m", "bash", "-c", f"{mount} && T={ops.exe()} && {script}"],
                          capture_output=True, text=True, env=ops.cli_env(tmp / "runs"), cwd=tmp, timeout=600)


def test_read_only_run_folder_is_read(finished, ops, tmp_path):
    ro = tmp_path / "ro"
    shutil.copytree(finished, ro)
    before = _digests(ro)
    r = _read_only_shell(ro, f"touch {ro}/x; $T history {ro} > hist.txt && $T show {ro} > show.txt", ops, tmp_path)
    assert "Read-only file system" in r.stderr, r.stderr  # the mount is really read-only
    assert r.returncode == 0, r.stderr[-2000:]
    rows = (tmp_path / "hist.txt").read_text().splitlines()[1:]
    assert [row.split()[2] for row in rows][:3] == ["(input)", "__start__", "triage"]
    assert "written by report" in (tmp_path / "show.txt").read_text()   # the last step of every run
    cp = [row.split()[1] for row in rows if row.split()[2] == "select"][0]
    fork = tmp_path / "fork"
    r = _read_only_shell(ro, f"$T replay {ro} -c {cp} --fork --tier profile --max-rounds 2 --backend interpreter "
                             f"--out {fork}", ops, tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"forked from checkpoint {cp}" in r.stdout and (fork / "report.json").exists()
    # replay writes into the run: on a read-only folder that is one line, pointing at --fork
    r = _read_only_shell(ro, f"$T replay {ro} -c {cp}", ops, tmp_path)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--fork" in r.stderr, r.stderr
    assert _digests(ro) == before


def test_out_on_a_read_only_folder_is_one_line(finished, ops, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    r = _read_only_shell(ro, f"$T optimize {ops.EXAMPLES / 'add_tiny_block.py'} --out {ro}/new", ops, tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines() == [f"tritondx: error: {ro}/new: cannot write a run folder there "
                                             "(Read-only file system); choose another --out"]
    assert not (ro / "new").exists()


def test_fork_of_a_copied_read_only_archive_runs_in_the_fork(finished, cli, tmp_path):
    """A run folder copied elsewhere (an archive) and made read-only (chmod -R a-w): the fork's state
    points into the fork, not at the folder the run was made in (was: the round's candidates were
    written into the fork but the judge was given the old folder's task: FileNotFoundError for each),
    and the fork's own files are writable by their owner (copytree kept the source's read-only modes)."""
    import os
    import stat
    ro = tmp_path / "archive" / "done"
    shutil.copytree(finished, ro)
    subprocess.run(["chmod", "-R", "a-w", str(ro)], check=True)
    try:
        rows = cli("history", str(ro)).stdout.splitlines()[1:]
        cp = [row.split()[1] for row in rows if row.split()[2] == "select"][0]
        fork = tmp_path / "fork"
        r = cli("replay", str(ro), "-c", cp, "--fork", "--tier", "profile", "--max-rounds", "2", "--backend",
                "interpreter", "--out", str(fork))
        assert r.returncode == 0, r.stderr[-2000:]
        rep = json.loads((fork / "report.json").read_text())
        assert rep["task_path"].startswith(str(fork.resolve()))
        assert all(c["path"].startswith(str(fork.resolve())) for c in rep["candidates"])
        later = [c for c in rep["candidates"] if c["round"] == 2]
        assert later and all(c["rejection"] != "exception" for c in later), later
        assert all(p.stat().st_mode & stat.S_IWUSR for p in [fork, *fork.rglob("*")] if not p.is_symlink())
    finally:
        os.system(f"chmod -R u+w {ro}")
