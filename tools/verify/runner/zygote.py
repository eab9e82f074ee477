"""A warm runner (untrusted side): imports torch and Triton once, then forks one fresh runner per
candidate, one at a time.

Run as a script, ``python -P zygote.py``, by the judge (``judge/warm.py``) exactly where a cold runner
would run (``spawn.RunnerProcess``: scrubbed environment, its own namespaces); it imports no
``tritondx.tools.verify`` module and never imports candidate code itself. Requests come on a Unix
socket (fd in ``TRITONDX_RUNNER_FDS``) with the child's protocol descriptors attached (SCM_RIGHTS):
``fork`` starts a child that runs ``runner.serve`` on them; ``wait`` / ``kill`` end it.

What one candidate could leave for the next, and why it cannot:
- files: at start the zygote makes every mount read-only and puts fresh tmpfs mounts over /tmp,
  /var/tmp, /dev/shm and /run (where its namespace lets it); it then checks that every writable
  mount is one of those and refuses to serve otherwise (the judge falls back to a cold runner per
  candidate). Each child gets an empty folder there (cwd, HOME, TMPDIR, its Triton cache); after the
  child ends, everything in those mounts is deleted before the next child starts.
- processes: the zygote is the subreaper of everything a child starts; after the child ends, every
  process left under the zygote is killed. Children run one at a time.
- System V IPC objects (they outlive processes) are removed after each child.
- memory: the zygote is non-dumpable (and so are its children), so a child cannot read or write
  another process's memory or ``/proc`` details.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import stat
import signal
import socket
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
#: the tritondx package (this checkout): this file is tools/verify/runner/zygote.py in it
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
PRIVATE_MOUNTS = ("/tmp", "/var/tmp", "/dev/shm", "/run")
#: mounts a process may keep writable and that hold no files a child could leave (kernel views)
KERNEL_MOUNTS = ("/proc", "/sys", "/dev/pts", "/dev/mqueue")
CHILD_DIR = "/tmp/tritondx-candidate"
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_CHILD_SUBREAPER = 1, 4, 36
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND = 1, 2, 4, 8, 32, 4096
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
_LOCKED_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
                 "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME}
MAX_MSG = 1 << 16

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]


def _prctl(option: int, arg: int) -> None:
    _libc.prctl(option, arg, 0, 0, 0)


def _mounts() -> list[tuple[str, list[str], str]]:
    """(mount point, per-mount options, fs type) from /proc/self/mountinfo."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            parts = left.split()
            mp = parts[4].encode().decode("unicode_escape")
            out.append((mp, parts[5].split(","), right.split()[0] if right else ""))
    return out


def _under(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r + "/") for r in roots)


#: paths under a private mount that the runners still need there (a venv or checkout under /tmp), bound back
#: read-only over the fresh tmpfs (``make_private``) and left alone by ``_wipe``
_KEPT: list[str] = []
_MS_REC = 16384


def topmost(paths: list[str]) -> list[str]:
    """``paths`` without those inside another one of them, sorted."""
    return sorted(p for p in set(paths) if not any(q != p and _under(p, (q,)) for q in paths))


def _needed() -> list[str]:
    """What a runner imports from: the interpreter's prefixes, this checkout, sys.path and PYTHONPATH entries."""
    paths = [sys.prefix, sys.base_prefix, os.path.realpath(sys.executable), PACKAGE_ROOT,
             *sys.path, *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    return sorted({os.path.realpath(p) for p in paths if p and os.path.exists(p)})


def make_private() -> list[str]:
    """Every mount read-only, fresh tmpfs over ``PRIVATE_MOUNTS`` (where the namespace allows it);
    returns the writable mounts this zygote owns (those it empties between children). What the runners
    import from under one of them (``_needed``: a venv in /tmp) is bound back read-only over the tmpfs; a private
    mount that is itself such a path stays as it is (then not this zygote's own)."""
    own = []
    for mp, opts, _ in _mounts():
        if "rw" in opts and not _under(mp, KERNEL_MOUNTS):
            flags = MS_REMOUNT | MS_BIND | MS_RDONLY
            for o in opts:
                flags |= _LOCKED_FLAGS.get(o, 0)
            _libc.mount(None, mp.encode(), None, flags, None)  # checked below, through mountinfo
    needed = _needed()
    for d in PRIVATE_MOUNTS:
        if not os.path.isdir(d) or any(_under(d, (n,)) for n in needed):
            continue
        keep = topmost([n for n in needed if _under(n, (d,)) and os.path.isdir(n)])
        fds = {n: os.open(n, os.O_PATH | os.O_DIRECTORY) for n in keep}
        try:
            if _libc.mount(b"tritondx", d.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=1777,size=2g") != 0:
                continue
            for n, fd in fds.items():
                os.makedirs(n, exist_ok=True)
                src = f"/proc/self/fd/{fd}".encode()
                if _libc.mount(src, n.encode(), None, MS_BIND | _MS_REC, None) == 0:
                    _libc.mount(None, n.encode(), None, MS_REMOUNT | MS_BIND | MS_RDONLY, None)
                    _KEPT.append(n)
            own.append(d)
        finally:
            for fd in fds.values():
                os.close(fd)
    return own


def visible_mounts() -> dict[str, bool]:
    """The mount points a path lookup can reach, each with whether it is writable: in mount order, a
    later mount hides what lies on or under it (bubblewrap's /dev hides the host's /dev/shm mount; its
    shm is a plain folder of that /dev)."""
    seen: dict[str, bool] = {}
    for mp, opts, _ in _mounts():
        for old in [m for m in seen if m == mp or m.startswith(mp.rstrip("/") + "/")]:
            del seen[old]
        seen[mp] = "rw" in opts
    return seen


def unsafe_mounts(own: list[str]) -> list[str]:
    """Writable mounts that are not this zygote's own fresh tmpfs (where a child could leave a file)."""
    return [mp for mp, rw in visible_mounts().items() if rw and mp not in own and not _under(mp, KERNEL_MOUNTS)]


def _wipe(own: list[str]) -> None:
    for d in own:
        _wipe_around(d)


def _wipe_around(p: str) -> None:
    """Empty folder ``p`` of everything but the way to the paths bound back under it (``_KEPT``, make_private)."""
    if p in _KEPT:
        return
    for name in os.listdir(p):
        q = os.path.join(p, name)
        if any(_under(k, (q,)) for k in _KEPT):
            _wipe_around(q)
        elif os.path.isdir(q) and not os.path.islink(q):
            shutil.rmtree(q, ignore_errors=True)
        else:
            try:
                os.unlink(q)
            except OSError:
                pass


def _tree(root: str, skip: set[str]) -> dict[str, tuple]:
    """Every path under ``root`` (not crossing into other mounts in ``skip``), with what identifies its content."""
    out: dict[str, tuple] = {}
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if os.path.join(d, x) not in skip]
        for name in dirs + files:
            p = os.path.join(d, name)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            out[p] = (st.st_mode, st.st_ino, st.st_size, st.st_mtime_ns)
    return out


class Snapshots:
    """Writable mounts the zygote cannot make its own (no capability to remount: under bubblewrap the
    job's /dev, /tmp and scratch are shared by every child). Their content is recorded before the first
    child; after each child, whatever is new is removed, and a recorded entry that changed (a child
    rewrote a file the next one would read) ends warm mode: the zygote exits and later candidates
    get cold runners."""

    def __init__(self, mounts: list[str]) -> None:
        self.mounts = [m for m in mounts if os.path.isdir(m)]
        # other mounts are walked by their own snapshot, or not at all; a hidden mount point is a plain
        # folder of what hides it (skipping it left files in bubblewrap's /dev/shm unseen)
        self.skip = set(visible_mounts()) - set(self.mounts)
        self.before = {m: _tree(m, self.skip) for m in self.mounts}

    def restore(self) -> bool:
        """Remove what children added; False when something recorded was changed."""
        clean = True
        for m in self.mounts:
            old = self.before[m]
            for p, ident in sorted(_tree(m, self.skip).items(), key=lambda kv: -len(kv[0])):
                if p not in old:
                    try:
                        if os.path.isdir(p) and not os.path.islink(p):
                            shutil.rmtree(p, ignore_errors=True)
                        else:
                            os.unlink(p)
                    except OSError:
                        clean = False
                elif ident != old[p] and not os.path.isdir(p):
                    clean = False
            if any(not os.path.lexists(p) for p in old):
                clean = False
        return clean


def _char_device(path: str) -> bool:
    try:
        return stat.S_ISCHR(os.stat(path).st_mode)
    except OSError:
        return False


def _remove_sysv_ipc() -> None:
    """System V shared memory, semaphores and message queues outlive their processes: remove them all."""
    for kind, call, cmd in (("shm", _libc.shmctl, 0), ("sem", _libc.semctl, 0), ("msg", _libc.msgctl, 0)):
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            ident = int(row.split()[1])
            if kind == "sem":
                call(ident, 0, cmd, None)  # IPC_RMID == 0
            else:
                call(ident, cmd, None)


def _children() -> list[int]:
    me, out = os.getpid(), []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == me:
                        out.append(int(d))
            except (OSError, ValueError, IndexError):
                continue
    return out


def _kill_leftovers(keep: frozenset[int] = frozenset()) -> None:
    """Kill and reap every child of this process (a subreaper: every process its children left) but ``keep``.
    As the init of its own PID namespace with nothing to keep (``spawn.RUNNER_NAMESPACES``), every other process
    of the namespace at once (``kill(-1)``)."""
    if os.getpid() == 1 and not keep:
        _kill_namespace()
        return
    for _ in range(50):
        kids = [k for k in _children() if k not in keep]
        if not kids:
            return
        for k in kids:
            try:
                os.kill(k, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for k in kids:
            try:
                os.waitpid(k, 0)
            except ChildProcessError:
                pass
        time.sleep(0.01)


def _kill_namespace() -> None:
    """As PID 1: SIGKILL every other process of this PID namespace and reap them all."""
    for _ in range(50):
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:   # nobody else left
            pass
        reaped = False
        while True:
            try:
                pid, _status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                break
            reaped = True
        if not reaped:
            time.sleep(0.01)


def _child(ctl: socket.socket, fds: list[int], seq: int, parent: int) -> None:
    """In the forked child: a fresh session and folder, then the runner's protocol."""
    try:
        ctl.close()
        os.setsid()
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:
            os._exit(137)
        req, ans, ev, err = fds
        os.dup2(err, 2)
        os.close(err)
        folder = f"{CHILD_DIR}-{seq}"
        os.makedirs(folder, mode=0o700)
        os.chdir(folder)
        os.environ.update(HOME=folder, TMPDIR=folder, TRITON_CACHE_DIR=os.path.join(folder, ".triton"))
        import tempfile
        tempfile.tempdir = None
        runner = sys.modules["_dx_runner_runner"]
        rc = runner.serve(req, ans, ev)
    except BaseException:  # noqa: BLE001 - the runner answers for itself; this is the last resort
        import traceback
        traceback.print_exc()
        rc = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc or 0)


def _preload() -> None:
    """What every runner imports, once: torch, Triton, and the runner's own modules (by path)."""
    import importlib.util
    import torch  # noqa: F401
    import triton  # noqa: F401
    import triton.language  # noqa: F401
    spec = importlib.util.spec_from_file_location("_dx_runner_runner", os.path.join(HERE, "runner.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    for name in ("guard", "wire", "fake_gpu"):
        mod._load_sibling(name)
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        import triton.runtime.interpreter  # noqa: F401
        import tritondx.tools.task.module  # noqa: F401


def _send(ctl: socket.socket, msg: dict) -> None:
    ctl.sendall(json.dumps(msg).encode() + b"\n")


def _hello(req_fd: int, ans_fd: int, ev_fd: int) -> tuple[dict, object]:
    """The first message comes like a cold runner's (``spawn.RunnerProcess``): over the wire pipes."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("_dx_runner_wire", os.path.join(HERE, "wire.py"))
    wire = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = wire
    spec.loader.exec_module(wire)
    req, ans = os.fdopen(req_fd, "rb"), os.fdopen(ans_fd, "wb")
    os.close(ev_fd)  # the zygote records nothing; each child gets its own evidence channel
    return wire.recv(req), (wire, req, ans)


def main() -> int:
    req_fd, ans_fd, ev_fd, ctl_fd = (int(x) for x in os.environ.pop("TRITONDX_RUNNER_FDS").split(","))
    ctl = socket.socket(fileno=ctl_fd)
    _prctl(_PR_SET_DUMPABLE, 0)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    _, (wire, req, ans) = _hello(req_fd, ans_fd, ev_fd)
    own = make_private()
    # a bind-mounted character device (/dev/null, /dev/zero, ...) keeps nothing a child writes
    bad = [m for m in unsafe_mounts(own) if not _char_device(m)]
    snaps = Snapshots(bad) if bad and all(os.path.isdir(m) for m in bad) else None
    if snaps is not None:
        bad = []
    if bad:
        wire.send(ans, {"ok": False, "why": f"writable mounts a candidate could leave files in: {bad[:4]}"})
        return 0
    _wipe(own)
    try:
        _preload()
    except BaseException as exc:  # noqa: BLE001
        wire.send(ans, {"ok": False, "why": f"preload failed: {type(exc).__name__}: {exc}"})
        return 0
    wire.send(ans, {"ok": True, "private": own, "pid": os.getpid(), "shared": snaps is not None})
    req.close()
    ans.close()
    current, seq = None, 0
    buf = b""
    while True:
        msg, fds, _, _ = socket.recv_fds(ctl, MAX_MSG, 4)
        if not msg:
            return 0
        buf += msg
        if not buf.endswith(b"\n"):
            for fd in fds:
                os.close(fd)
            continue
        req, buf = json.loads(buf), b""
        op = req.get("op")
        if op == "fork":
            if current is not None or len(fds) != 4:
                for fd in fds:
                    os.close(fd)
                _send(ctl, {"error": "a child is still running" if current is not None else "want 4 descriptors"})
                continue
            seq += 1
            pid = os.fork()
            if pid == 0:
                _child(ctl, fds, seq, os.getppid())
            for fd in fds:
                os.close(fd)
            current = pid
            _send(ctl, {"pid": pid})
        elif op == "snap":   # a judge server's next request: what its shared mounts hold now is the state to keep
            if current is not None:
                _send(ctl, {"error": "a child is still running"})
                continue
            if snaps is not None:
                snaps = Snapshots(snaps.mounts)
            _send(ctl, {"ok": True})
        elif op in ("wait", "kill"):
            rc = None
            if current is not None:
                if op == "kill":
                    try:
                        os.kill(current, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                deadline = time.monotonic() + float(req.get("timeout", 0))
                while True:
                    done, status = os.waitpid(current, os.WNOHANG)
                    if done:
                        rc = os.waitstatus_to_exitcode(status)
                        break
                    if time.monotonic() >= deadline:
                        break
                    time.sleep(0.01)
                if rc is not None:  # the child is gone: nothing of it stays for the next one
                    current = None
                    _kill_leftovers()
                    _remove_sysv_ipc()
                    _wipe(own)
                    if snaps is not None and not snaps.restore():
                        _send(ctl, {"rc": rc, "running": False})
                        return 0  # a child changed what the next one would find: later candidates go cold
            _send(ctl, {"rc": rc, "running": current is not None})
        else:
            _send(ctl, {"error": f"unknown op {op!r}"})


if __name__ == "__main__":
    _code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_code)   # no interpreter teardown (torch's: ~1 s the judge waits for at the end of a round)
