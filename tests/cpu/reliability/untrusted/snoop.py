"""Untrusted candidate: instead of computing, launch() looks around and reports what it could
reach, in the message of the exception it raises: its working directory, the environment (any
value holding "snoop": the test plants such secrets), its PID and network namespaces, every process
its /proc shows (does its environ hold a planted secret, does its command line name the run folder:
the orchestrator's does), the parent process's environ and command line, a TCP connection to a
loopback server the test listens on, and writes into the run folder and its candidates/ (the test
names the run folder in TRITONDX_JOB_PROBE_RUN_DIR: the runner loads this file from its own folder,
so its path says nothing about the run) and its working directory."""

import errno
import json
import os
import socket

import torch
import triton
import triton.language as tl

NAME = "snoop"


@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, n_elements, alpha, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, alpha * x + y, mask=mask)


def _try_write(folder):
    target = os.path.join(folder, "written_by_candidate.txt")
    try:
        with open(target, "w") as f:
            f.write("x")
        return "written"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))


def _read_proc(pid, name):
    try:
        data = open(f"/proc/{pid}/{name}", "rb").read()
    except FileNotFoundError:
        return "absent"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, "denied")
    if name == "environ":
        return "leaked" if b"snoop" in data else "clean"
    return "has_run_dir" if RUN_DIR.encode() in data else "clean"


def _try_connect(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=3).close()
        return "connected"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, type(exc).__name__) if exc.errno else type(exc).__name__


def _processes():
    """[processes this /proc lists, how many of their environs hold a secret, how many command lines
    name the run folder, how many command lines name the orchestrator's script] (counts: the exception's
    message, the report, is short)."""
    seen = [(_read_proc(d, "environ"), _read_proc(d, "cmdline"), _cmdline_has(d, b"verify_one.py"))
            for d in os.listdir("/proc") if d.isdigit()]
    return [len(seen), sum(e == "leaked" for e, _, _ in seen), sum(c == "has_run_dir" for _, c, _ in seen),
            sum(o for _, _, o in seen)]


def _cmdline_has(pid, what):
    try:
        return what in open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        return False


def _ns(kind):
    try:
        return os.readlink(f"/proc/self/ns/{kind}").split(":", 1)[1]
    except OSError as exc:
        return errno.errorcode.get(exc.errno, "denied")


RUN_DIR = os.environ.get("TRITONDX_JOB_PROBE_RUN_DIR", "/nonexistent")


def launch(x, y):
    obs = {"cwd": os.getcwd(), "home": os.environ.get("HOME") == os.getcwd(), "ppid": os.getppid(),
           "leaked": sorted(k for k, v in os.environ.items() if "snoop" in v.lower() or "snoop" in k.lower()),
           "penv": _read_proc(os.getppid(), "environ"), "pcmd": _read_proc(os.getppid(), "cmdline"),
           "procs": _processes(), "pidns": _ns("pid"), "netns": _ns("net")}
    obs["net"] = _try_connect(int(os.environ["TRITONDX_JOB_PROBE_PORT"]))
    obs["w_cand"] = _try_write(os.path.join(RUN_DIR, "candidates"))
    obs["w_run"] = _try_write(RUN_DIR)
    obs["w_cwd"] = _try_write(os.getcwd())
    raise RuntimeError("SNOOP " + json.dumps(obs, separators=(",", ":")))


def reference(x, y):
    return 2.5 * x + y


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g).to(device=device, dtype=dtype)
    y = torch.randn(shape, generator=g).to(device=device, dtype=dtype)
    return (x, y)


CHECK_SHAPES = [(1000,), (4097,)]
BENCH_SHAPES = [(1 << 20,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-5, "rtol": 1e-5}}
