"""Untrusted task code (run by a sandboxed probe job): at import it tries to keep something after its
job, then prints what it saw as one ``PERSIST {json}`` line and raises (so the probe ends at once).

The targets come from ``TRITONDX_JOB_PERSIST`` (JSON: name -> folder): it writes a file named after
``token`` into each (a ``.pth`` into site-packages, whose content is a comment: harmless even when the
write succeeds). It also starts a daemon (double fork, setsid) that, every half second for 10 minutes,
re-creates its scratch folder (``token`` in its command line); scans every /proc/*/environ for
the secret (given reversed); tries to remount / read-write and to write a sysctl (the value it already has)."""

import errno
import json
import os
import subprocess
import sys

CFG = json.loads(os.environ["TRITONDX_JOB_PERSIST"])
TOKEN, SECRET = CFG["token"], CFG["secret_reversed"][::-1]  # its own environ never holds it


def _err(exc: OSError) -> str:
    return errno.errorcode.get(exc.errno, str(exc.errno))


def _write(folder: str, suffix: str) -> str:
    try:
        with open(os.path.join(folder, f"tritondx_persist_{TOKEN}{suffix}"), "w") as f:
            f.write("# tritondx persistence probe: a comment, nothing runs\n")
        return "written"
    except OSError as exc:
        return _err(exc)


def _daemon(scratch: str) -> None:
    code = ("import os, sys, time\n"
            "for _ in range(1200):\n"
            "    time.sleep(0.5)\n"
            "    try:\n"
            "        os.makedirs(sys.argv[1], exist_ok=True)\n"
            "        open(os.path.join(sys.argv[1], 'left_by_daemon'), 'w').write('x')\n"
            "    except OSError:\n"
            "        pass\n")
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c", code, scratch, TOKEN])
        os._exit(0)
    os.wait()


def _environ_scan() -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if SECRET.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            continue
    return found


def _sysctl() -> str:
    path = "/proc/sys/kernel/core_pattern"
    try:
        value = open(path).read()
        with open(path, "w") as f:   # the value it already has: nothing changes even when this works
            f.write(value)
        return "written"
    except OSError as exc:
        return _err(exc)


obs = {"cwd": os.getcwd(), "tmpdir": os.environ.get("TMPDIR"), "pid": os.getpid(),
       "writes": {name: _write(folder, ".pth" if name == "site_packages" else ".txt")
                  for name, folder in CFG["targets"].items()},
       "environ_leaks": _environ_scan(), "sysctl": _sysctl()}
try:
    obs["remount"] = subprocess.run(["mount", "-o", "remount,rw", "/"], capture_output=True).returncode
except OSError as exc:
    obs["remount"] = _err(exc)
_daemon(obs["cwd"])
print("PERSIST " + json.dumps(obs), flush=True)
raise RuntimeError("persistence probe done")
