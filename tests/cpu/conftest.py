"""Shared CPU-test fixtures: a throwaway PostgreSQL server (session scope) for the checkpoint tests; the grouping of
tests under pytest-xdist (``scripts/test.sh`` runs the suite with ``-n``, ``--dist loadgroup``).

The server is the distribution's own (``apt-get install postgresql``: ``/usr/lib/postgresql/*/bin``, or
``initdb``/``pg_ctl`` on PATH, or ``$TRITONDX_PG_BIN``), started in a fresh temporary folder with
password (SCRAM) authentication on a free loopback port, fsync off, and stopped at the end of the
session. PostgreSQL refuses to run as root: under root (CI) the server runs as the ``postgres`` user
(or ``nobody``). Each test that asks for ``pg_url`` gets a database of its own. Under xdist every worker that
runs such a test starts a server of its own (its own folder and port: a few seconds each).

Under xdist every worker collects the whole suite and runs the tests the scheduler sends it; a session- or
module-scoped fixture is built once per worker that uses it. ``pytest_collection_modifyitems`` below therefore puts
the tests that share a costly fixture into one ``xdist_group`` (``--dist loadgroup`` runs a group on one worker):
a module-scoped fixture of the tests (``capture/``: a `tritondx capture` per module; ``ops/``: one run a module
reads) keeps its module together; the session-scoped compile sets of ``ir/`` and ``npu/`` (``captures``: every
kernel compiled once) are built by one worker and read by the others (``built_once``). The background case pools
(``verifier/``: ``outcomes``, ``reliability/``: ``rel_outcomes``), which serially start every case of the session
at once, run a case only when its test asks under xdist: the workers are the parallelism there.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import pytest

# the tests' helper modules beside this file (``tdx_interp``: the warm interpreter host) import by name
sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(scope="session")
def built_once(tmp_path_factory):
    """``built_once(name, build)``: ``build(folder)``'s value, computed by **one** process of the test session and
    read by the others (pytest-xdist workers share it through a pickle in the session's base folder, under a file
    lock; a worker that finds it built reads it). ``folder`` is a shared folder the value may point into. For the
    compile sets of ``ir/`` and ``npu/`` (each ~100 s of compiles on 2 cores): built once per worker they cost
    4x that under ``-n 4``, and a group would put all their users on one worker. A build that raises
    (a skip, a failed compile) leaves nothing: the next process builds again."""
    import fcntl
    import pickle
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent

    def get(name: str, build: Callable[[Path], Any]) -> Any:
        folder, done = base / f"once-{name}", base / f"once-{name}.pickle"
        with open(base / f"once-{name}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if done.exists():
                return pickle.loads(done.read_bytes())
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            value = build(folder)
            done.write_bytes(pickle.dumps(value))
            return value
    return get


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Under an xdist worker: an ``xdist_group`` for the tests that share a module-scoped fixture of the tests (per
    module or package); tests linked through both share one group. Session-scoped sets too costly to build once per
    worker are shared through ``built_once`` instead (a group would put all their users on one worker).
    Every worker computes the same groups (xdist checks that the collections agree). Before xdist's own hook
    (tryfirst), which turns the marker into the ``@group`` suffix of the node id that the scheduler reads.

    With pytest 9.2 and pytest-xdist 3.8 xdist's own suffix is lost (xdist sets ``item._nodeid``; pytest 9 derives
    ``Item.nodeid`` from ``item._id``: pytest-xdist issue 1386), so ``pytest_collection_modifyitems`` below, after
    xdist's, writes it where pytest 9 reads it."""
    if not hasattr(config, "workerinput"):
        return
    parent: dict[str, str] = {}

    def find(k: str) -> str:
        while parent.setdefault(k, k) != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    keyed = []
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        keys = set()
        for name in (info.names_closure if info is not None else ()):
            for d in info.name2fixturedefs.get(name, ()):
                if not d.baseid:   # a plugin's fixture (tmp_path_factory, httpserver, ...)
                    continue
                if d.scope in ("module", "class"):
                    keys.add("module:" + item.nodeid.split("::", 1)[0])
                elif d.scope == "package":
                    keys.add("package:" + d.baseid)
        callspec = getattr(item, "callspec", None)
        rkey = round_key(callspec.params.get("case")) if callspec is not None else None
        if rkey is not None:   # a round of verified cases (case_futures): its tests on one worker
            keys.add("round:" + rkey)
        keys = sorted(keys)
        for k in keys[1:]:
            parent[find(k)] = find(keys[0])
        keyed.append((item, keys))
    for item, keys in keyed:
        if keys:
            root = find(keys[0])
            item.add_marker(pytest.mark.xdist_group(root.split(":", 1)[1].replace("/", ".")))


@pytest.hookimpl(trylast=True, specname="pytest_collection_modifyitems")
def pytest_collection_modifyitems_suffix(config, items) -> None:
    """After xdist's hook: the ``@group`` suffix that ``--dist loadgroup`` schedules by, on the id pytest 9 reads
    (``item._id``); nothing where xdist's own suffix took (an older pytest, a fixed xdist) or outside a worker."""
    if not hasattr(config, "workerinput") or not config.getvalue("loadgroup"):
        return
    from _pytest.nodeid import NodeId
    for item in items:
        mark = item.get_closest_marker("xdist_group")
        if mark is None or not hasattr(item, "_id"):
            continue
        group = mark.args[0] if mark.args else mark.kwargs.get("name", "default")
        if not item.nodeid.endswith(f"@{group}"):
            item._id = NodeId.parse(f"{item.nodeid}@{group}")


def _pg_bin() -> Path | None:
    cands = [os.environ.get("TRITONDX_PG_BIN")]
    cands += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda d: int(Path(d).parent.name)
                    if Path(d).parent.name.isdigit() else 0, reverse=True)
    which = shutil.which("pg_ctl")
    cands.append(str(Path(which).resolve().parent) if which else None)
    for d in cands:
        if d and all((Path(d) / exe).is_file() for exe in ("initdb", "pg_ctl", "postgres")):
            return Path(d)
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    def __init__(self, bindir: Path):
        self.bindir = bindir
        self.user = "tdx"
        self.password = "tdx-" + secrets.token_hex(10)
        self.port = _free_port()
        # under root the folder must be reachable by the unprivileged server user: not inside a private $TMPDIR
        self.root = Path(tempfile.mkdtemp(prefix="tritondx-pg-", dir="/tmp" if os.geteuid() == 0 else None))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self._uid = self._gid = None
        if os.geteuid() == 0:  # postgres will not run as root: hand the folder to an unprivileged user
            for name in ("postgres", "nobody"):
                try:
                    pw = pwd.getpwnam(name)
                except KeyError:
                    continue
                self._uid, self._gid = pw.pw_uid, pw.pw_gid
                break
            else:
                pytest.skip("running as root and no unprivileged user (postgres, nobody) to run PostgreSQL")
            os.chown(self.root, self._uid, self._gid)

    def _demote(self):
        if self._uid is not None:
            os.setgid(self._gid)
            os.setuid(self._uid)

    def _run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout,
                              preexec_fn=self._demote, cwd=self.root, env={**os.environ, "LC_ALL": "C"})

    def start(self) -> None:
        pwfile = self.root / "pw"
        pwfile.write_text(self.password + "\n")
        if self._uid is not None:
            os.chown(pwfile, self._uid, self._gid)
        r = self._run(self.bindir / "initdb", "-D", self.data, "-U", self.user, "--auth=scram-sha-256",
                      f"--pwfile={pwfile}", "-E", "UTF8", "--no-sync")
        pwfile.unlink()
        if r.returncode != 0:
            raise RuntimeError(f"initdb failed: {r.stderr[-2000:]}")
        opts = (f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} -c fsync=off "
                "-c full_page_writes=off -c synchronous_commit=off -c max_connections=200")
        r = self._run(self.bindir / "pg_ctl", "-D", self.data, "-l", self.log, "-o", opts, "-w", "-t", "60", "start")
        if r.returncode != 0:
            log = self.log.read_text() if self.log.exists() else ""
            raise RuntimeError(f"pg_ctl start failed: {r.stderr[-1000:]} {log[-2000:]}")

    def stop(self) -> None:
        try:
            self._run(self.bindir / "pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop", timeout=60)
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def url(self, db: str = "postgres", password: str | None = None) -> str:
        return f"postgresql://{self.user}:{password or self.password}@127.0.0.1:{self.port}/{db}"

    def create_db(self) -> str:
        import psycopg
        name = "t_" + secrets.token_hex(6)
        with psycopg.connect(self.url(), autocommit=True) as c:
            c.execute(f"CREATE DATABASE {name}")
        return name


@pytest.fixture(scope="session")
def postgres_server():
    """A running PostgreSQL server (skips with the reason when the binaries or psycopg are missing)."""
    pytest.importorskip("psycopg", reason="psycopg not installed (pip install 'tritondx[scale]')")
    pytest.importorskip("langgraph.checkpoint.postgres",
                        reason="langgraph-checkpoint-postgres not installed (pip install 'tritondx[scale]')")
    bindir = _pg_bin()
    if bindir is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found: apt-get install postgresql, "
                    "or set TRITONDX_PG_BIN to their folder")
    server = PgServer(bindir)
    t0 = time.time()
    server.start()
    server.started_in_s = time.time() - t0
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(postgres_server) -> str:
    """postgresql://tdx:<password>@127.0.0.1:<port>/<a fresh database for this test>"""
    return postgres_server.url(postgres_server.create_db())


@pytest.fixture
def hw_pools(monkeypatch):
    """Fresh thread pools for the hardware check's background halves (``timing._initial_jobs``, ``_early_jobs``): the
    module's own pools are shared by every test of the session, and a half an earlier test left queued or waiting
    would delay (or, for a discarded early measurement, cancel) this test's."""
    from concurrent.futures import ThreadPoolExecutor

    from tritondx.tools.verify import timing
    pools = [ThreadPoolExecutor(max_workers=2, thread_name_prefix=f"tdx-test-{n}") for n in ("initial", "early")]
    monkeypatch.setattr(timing, "_initial_jobs", pools[0])
    monkeypatch.setattr(timing, "_early_jobs", pools[1])
    monkeypatch.setattr(timing, "_initial", {})
    yield
    for p in pools:
        p.shutdown(wait=False, cancel_futures=True)


class OnDemand(dict):
    """Futures by case id, each started on first look-up (``start(case_id)``)."""

    def __init__(self, start):
        super().__init__()
        self._start = start

    def __missing__(self, cid: str) -> Future:
        f = self[cid] = self._start(cid)
        return f


def round_key(case: Any) -> str | None:
    """The round a case's candidate is verified in (``case.round``: cases with equal keys are verified together, in
    one judge job, as the rewriter's candidates of one round are); None: the case runs alone."""
    key = getattr(case, "round", None)   # (task, static policy on, allowed ops, timeout)
    if key is None:
        return None
    task, static_policy, allowed_ops, timeout = key
    return f"round-{Path(task).stem}-{'static' if static_policy else 'runtime'}-{','.join(allowed_ops)}-{timeout}"


@pytest.fixture(scope="session")
def case_futures(request):
    """Starts a session's slow cases (the verifier's and the reliability suite's: ``{id: case}``, each with a
    ``cost``) on a thread pool and returns their futures by id. Serially every case starts at once, slowest first;
    under pytest-xdist a worker runs only the tests the scheduler sends it (a pool of every case would run each case
    once per worker), so a case starts when its test asks. The pools end with the session.

    ``run_round(cids) -> {cid: result}``: the cases with one ``round_key`` run as one call (the first look-up of any
    of them starts it); ``pytest_collection_modifyitems`` puts their tests on one worker."""
    pools: list[ThreadPoolExecutor] = []

    def start_all(cases: dict[str, Any], run: Callable[[str], Any], workers: int, name: str,
                  run_round: Callable[[list[str]], dict[str, Any]] | None = None) -> dict[str, Future]:
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
        pools.append(pool)
        rounds: dict[str, Future] = {}

        def submit(cid: str) -> Future:
            key = round_key(cases[cid]) if run_round is not None else None
            if key is None:
                return pool.submit(run, cid)
            if key not in rounds:
                rounds[key] = pool.submit(run_round, sorted(c for c in cases if round_key(cases[c]) == key))
            mine: Future = Future()

            def done(f: Future) -> None:   # (an error here must reach the test, not leave it waiting)
                try:
                    mine.set_result(f.result()[cid])
                except BaseException as exc:  # noqa: BLE001
                    mine.set_exception(exc)
            rounds[key].add_done_callback(done)
            return mine
        if hasattr(request.config, "workerinput"):
            return OnDemand(submit)

        def cost(cid: str) -> float:
            key = round_key(cases[cid]) if run_round is not None else None
            return sum(c.cost for c in cases.values() if round_key(c) == key) if key else cases[cid].cost
        return {cid: submit(cid) for cid in sorted(cases, key=lambda c: -cost(c))}
    yield start_all
    for pool in pools:
        pool.shutdown(wait=True, cancel_futures=True)
