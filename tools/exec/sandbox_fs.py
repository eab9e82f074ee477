"""The file system a sandboxed job sees: all of it read-only, except a private scratch folder.

A job (``tools/exec/sandbox.py``) gets a scratch folder (its cwd, HOME and TMPDIR, deleted after the job),
everything else read-only, empty private /tmp, /var/tmp, /run, /dev/shm and temp folder (no host temp
file, no other job's scratch, no socket there is reachable), its own PID, network, IPC and UTS
namespaces, and no capabilities. Two ways to build it:

- ``bwrap`` (bubblewrap): preferred; a few ms per job.
- ``unshare`` (util-linux) and a shell script: in a private mount namespace every mount is remounted
  read-only, the hidden folders get fresh tmpfs mounts, then ``setpriv`` drops every capability (so
  the job cannot remount anything writable) before the job starts; about 100 ms per job.

Paths a job must read that lie under a hidden folder (a task in /tmp, a venv under TMPDIR) are bound
back read-only. The few outputs a job writes outside its scratch (an IR capture's folder, the ceilings
cache) are stage folders inside the scratch, bound at the real path and copied back (regular files
only) by ``copy_back`` after the job and every process it started have ended.
"""

from __future__ import annotations

import glob
import os
import shlex
import shutil
import stat
import sys
import tempfile
from pathlib import Path

import structlog
from pydantic import BaseModel

log = structlog.get_logger(__name__)

# Emptied for every job: host temp files, other jobs' scratch folders, sockets (/run: D-Bus, systemd).
HIDDEN_DIRS = ("/tmp", "/var/tmp", "/run", "/dev/shm")
# Device nodes a job may open (bwrap's /dev holds only null, zero, random, tty and the like).
DEVICE_GLOBS = ("/dev/nvidia*", "/dev/nvidia-caps", "/dev/dxg", "/dev/davinci*", "/dev/devmm_svm", "/dev/hisi_hdc")
# Environment variables holding paths (':'-separated) a job reads from.
PATH_VARS = ("PYTHONPATH", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "ASCEND_HOME_PATH", "VIRTUAL_ENV")
# The most bytes ``copy_back`` copies out of one stage folder.
MAX_COPY_BACK = 2 << 30
SETUP_FAILED = "tritondx-sandbox: could not"


class Bind(BaseModel):
    """``src`` (a host path) seen at ``dest`` inside the job."""

    src: str
    dest: str
    writable: bool = False


class View(BaseModel):
    """What one job sees beyond the read-only root: its scratch folder and the binds."""

    scratch: str
    binds: list[Bind] = []
    network: bool = False


def hidden_dirs() -> list[str]:
    found = []
    for d in (*HIDDEN_DIRS, tempfile.gettempdir()):
        try:
            p = Path(d).resolve()
        except OSError:
            continue
        if p != Path("/") and p.is_dir() and str(p) not in found:
            found.append(str(p))
    return found


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def read_paths(python: str, env: dict[str, str], extra: list[str]) -> list[str]:
    """Folders a job reads: its interpreter and import path, paths named in its environment,
    ``extra`` (its task and candidate folders)."""
    paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, str(Path(python).parent.parent),
             str(Path(os.path.realpath(python)).parent.parent), str(Path(__file__).resolve().parents[2]),
             *sys.path]
    for var in PATH_VARS:
        paths += env.get(var, "").split(os.pathsep)
    return [p for p in paths + extra if p]


def view_for(scratch: Path, reads: list[str], writes: list[Bind], network: bool) -> View:
    """The scratch folder read-write, each of ``reads`` that a hidden folder would hide bound back
    read-only, then ``writes``; parents before children (a write inside a read-only bind)."""
    hidden = [Path(d) for d in hidden_dirs()]
    binds: dict[str, Bind] = {}
    for r in reads:
        try:
            p = Path(r).resolve()
        except (OSError, RuntimeError):
            continue
        # a hidden folder itself is never bound back (a script run from /tmp puts /tmp on sys.path: binding
        # it showed the job every other job's folder there and left it no writable /tmp)
        if p.exists() and p not in hidden and any(_within(p, h) for h in hidden) and not _within(p, scratch):
            binds.setdefault(str(p), Bind(src=str(p), dest=str(p)))
    for b in [Bind(src=str(scratch), dest=str(scratch), writable=True), *writes]:
        binds[b.dest] = b
    ordered = sorted(binds.values(), key=lambda b: len(Path(b.dest).parts))
    # a read-only bind inside another read-only bind adds nothing
    kept = [b for b in ordered if b.writable or not any(
        o is not b and not o.writable and _within(Path(b.dest), Path(o.dest)) and o.dest != b.dest for o in ordered)]
    return View(scratch=str(scratch), binds=kept, network=network)


def devices() -> list[str]:
    return sorted({p for g in DEVICE_GLOBS for p in glob.glob(g)})


#: the user a bubblewrap job runs as inside its user namespace (mapped to the user that started it, as uid 0 was):
#: not uid 0, because uid 0 with no capabilities may not write a child user namespace's uid_map, so a judge job's
#: candidate runners could get no namespaces of their own (``spawn.runner_prefix``); 65534 (nobody) is in almost
#: every image's /etc/passwd, for tools that look the user up (``getpass.getuser()``)
JOB_UID = 65534
#: another user for bubblewrap jobs; "0": as before 2026-12-02 (its runners then get no namespaces of their own)
JOB_UID_ENV = "TRITONDX_JOB_UID"


def job_uid() -> int:
    v = os.environ.get(JOB_UID_ENV, "").strip()
    return int(v) if v.isdigit() else JOB_UID


def bwrap_command(view: View) -> list[str]:
    uid = str(job_uid())
    cmd = ["bwrap", "--uid", uid, "--gid", uid, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
           # sysctls are plain files: uid 0 could write e.g. kernel.core_pattern without any capability
           "--ro-bind", "/proc/sys", "/proc/sys"]
    for d in hidden_dirs():
        if d != "/dev/shm":  # bwrap's own /dev already holds a private, empty shm folder
            cmd += ["--tmpfs", d]
    for b in view.binds:
        cmd += ["--bind" if b.writable else "--ro-bind", b.src, b.dest]
    for dev in devices():
        cmd += ["--dev-bind", dev, dev]
    cmd += ["--chdir", view.scratch, "--unshare-all"] + (["--share-net"] if view.network else [])
    # --as-pid-1: the job is PID 1 (as under unshare): it sees no parent; when it ends, the namespace ends
    return cmd + ["--as-pid-1", "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--"]


UNSHARE = ["unshare", "-r", "--pid", "--fork", "--kill-child", "--mount-proc", "--ipc", "--uts"]
# Inside the namespace: every mount read-only (/proc is the namespace's own), /proc/sys read-only,
# a private /dev/shm holding a copy of the (read-only) tree from which the binds are taken once the
# hidden folders are emptied, then no capability left for the job.
_SETUP = """set -u
fail() {{ echo "{failed} $1" >&2; exit 125; }}
while read -r _ _ _ _ mp _; do
  mp=$(printf '%b' "$mp")
  case "$mp" in /proc|/proc/*) continue;; esac
  mount -o remount,bind,ro "$mp" 2>/dev/null || fail "make $mp read-only"
done < /proc/self/mountinfo
{{ mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys; }} || fail "make /proc/sys read-only"
mount -t tmpfs -o nosuid,nodev,mode=1777 tritondx /dev/shm || fail "empty /dev/shm"
{{ mkdir /dev/shm/.host && mount --rbind / /dev/shm/.host; }} || fail "keep the host tree"
# a hidden folder below another (a job's TMPDIR under /tmp) is gone once its parent is emptied: made again
for d in {hidden}; do mkdir -p "$d" 2>/dev/null; mount -t tmpfs -o nosuid,nodev,mode=1777 tritondx "$d" || fail "empty $d"; done
{binds}umount -l /dev/shm/.host && rmdir /dev/shm/.host || fail "drop the host tree"
cd {scratch} || fail "enter the scratch folder"
exec setpriv --bounding-set=-all --inh-caps=-all --no-new-privs -- "$@"
"""


def unshare_command(view: View) -> list[str]:
    binds = ""
    for b in view.binds:
        src, dest = shlex.quote("/dev/shm/.host" + b.src), shlex.quote(b.dest)
        mode = "rw" if b.writable else "ro"
        binds += (f"{{ mkdir -p {dest} && mount --bind {src} {dest} && mount -o remount,bind,{mode} {dest}; }} "
                  f"|| fail {shlex.quote('bind ' + b.dest)}\n")
    hidden = " ".join(shlex.quote(d) for d in hidden_dirs() if d != "/dev/shm")
    script = _SETUP.format(failed=SETUP_FAILED, hidden=hidden, binds=binds, scratch=shlex.quote(view.scratch))
    return UNSHARE + ([] if view.network else ["-n"]) + ["sh", "-c", script, "tritondx-sandbox"]


def command(mechanism: str, view: View) -> list[str]:
    """The prefix that runs a command in ``view`` (empty for ``net``/``none``: see ``tools/exec/sandbox.py``)."""
    if mechanism == "bwrap":
        return bwrap_command(view)
    if mechanism == "unshare":
        return unshare_command(view)
    return []


class Stage(BaseModel):
    """An output folder of a job: written in ``stage`` (inside the scratch), seen by the job at
    ``dest``, copied back to ``dest`` after the job; ``names``: only these files (None: all)."""

    stage: str
    dest: str
    names: list[str] | None = None

    def bind(self) -> Bind:
        return Bind(src=self.stage, dest=self.dest, writable=True)


def make_stage(scratch: Path, index: int, dest: Path, names: list[str] | None = None) -> Stage:
    """A stage for ``dest`` (created on the host, so that it can be a mount point); the named files
    that already exist are copied in, so that the job reads them as before."""
    dest.mkdir(parents=True, exist_ok=True)
    stage = scratch / ".stage" / str(index)
    stage.mkdir(parents=True)
    for n in names or []:
        if (dest / n).is_file() and not (dest / n).is_symlink():
            shutil.copyfile(dest / n, stage / n)
    return Stage(stage=str(stage), dest=str(dest), names=names)


def copy_back(st: Stage) -> int:
    """Copy the regular files the job left in a stage to their destination (never a link, a device
    or a file outside the stage); returns how many."""
    root, dest = Path(st.stage), Path(st.dest)
    copied, total = 0, 0
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in files:
            src = Path(folder) / name
            rel = src.relative_to(root)
            if st.names is not None and str(rel) not in st.names:
                continue
            info = src.lstat()
            if not stat.S_ISREG(info.st_mode):
                continue
            total += info.st_size
            if total > MAX_COPY_BACK:
                log.warning("sandbox_copy_back_truncated", dest=str(dest), limit=MAX_COPY_BACK)
                return copied
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_symlink():
                target.unlink()
            shutil.copyfile(src, target)
            copied += 1
    return copied
