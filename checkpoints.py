"""Checkpoint storage: a SQLite (default) or PostgreSQL saver whose serializer loads only plain data.

Graph state holds plain builtins by design (dicts, lists, strings, numbers, None); LangGraph itself
adds a few of its own types to checkpoints (``Interrupt`` for a paused approval, ``Send``/``Command``
in pending writes). ``StrictSerializer`` is LangGraph's ``JsonPlusSerializer`` with pickle off and a
msgpack extension hook that rebuilds only those types: a checkpoint that contains any other Python
type (a pydantic model, a numpy array, a ``Path``, an arbitrary class) fails to load with
``DisallowedCheckpointType`` instead of importing and calling whatever the database names.

Where a run keeps its checkpoints: ``checkpoints.sqlite`` in its folder, unless a PostgreSQL URL is
given (``--checkpoint-url postgresql://...``, i.e. ``TRITONDX_CHECKPOINT_URL``) when the run starts;
then the run folder gets ``checkpoints.json`` naming the server (the URL *without* its password) and
every later command on that run (resume, history, show, replay, runs, a resumed batch) opens the same
database with the same ``StrictSerializer``. A password is registered with the log redactor and never
written anywhere: later commands take it from ``--checkpoint-url``/``TRITONDX_CHECKPOINT_URL`` again, or
from libpq's own ``PGPASSWORD``/``~/.pgpass``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import uuid
from pathlib import Path
from typing import Any

import ormsgpack
from langgraph.checkpoint.serde import jsonplus as _jp
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from tritondx.errors import TritonDXError

# (module, name) pairs a checkpoint may rebuild: LangGraph's own control-flow records, nothing else.
ALLOWED_TYPES: frozenset[tuple[str, str]] = frozenset({
    ("langgraph.types", "Interrupt"),
    ("langgraph.types", "Send"),
    ("langgraph.types", "Command"),
})
_CONSTRUCTOR_CODES = {_jp.EXT_CONSTRUCTOR_SINGLE_ARG, _jp.EXT_CONSTRUCTOR_POS_ARGS, _jp.EXT_CONSTRUCTOR_KW_ARGS,
                      _jp.EXT_METHOD_SINGLE_ARG, _jp.EXT_PYDANTIC_V1, _jp.EXT_PYDANTIC_V2}


class DisallowedCheckpointType(TritonDXError, ValueError):
    """A checkpoint names a Python type outside the project's allowlist."""


class StrictSerializer(JsonPlusSerializer):
    def __init__(self) -> None:
        # allowed_msgpack_modules=None: LangGraph's strict hook (safe types only) does the rebuilding;
        # our hook in front of it refuses everything that is not in ALLOWED_TYPES.
        base = JsonPlusSerializer(pickle_fallback=False, allowed_msgpack_modules=None)
        base_hook = base._unpack_ext_hook
        refused = self._refused = threading.local()

        def hook(code: int, data: bytes) -> Any:
            if code in _CONSTRUCTOR_CODES:
                tup = ormsgpack.unpackb(data, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
                key = (tup[0], tup[1]) if isinstance(tup, (list, tuple)) and len(tup) >= 2 else None
                if key not in ALLOWED_TYPES:
                    refused.why = (f"checkpoint holds a {'.'.join(map(str, key)) if key else 'malformed'} object; "
                                   "tritondx checkpoints hold plain data only")
                    raise DisallowedCheckpointType(refused.why)
            elif code != _jp.EXT_DELTA_SNAPSHOT:
                refused.why = (f"checkpoint holds a msgpack extension of kind {code} (numpy array or unknown); "
                               "tritondx checkpoints hold plain data only")
                raise DisallowedCheckpointType(refused.why)
            return base_hook(code, data)

        super().__init__(pickle_fallback=False, allowed_msgpack_modules=None, __unpack_ext_hook__=hook)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        type_, _ = data
        if type_ not in ("null", "bytes", "bytearray", "msgpack"):
            # "json" (legacy lc constructors) and "pickle" can name arbitrary code: refuse them outright
            raise DisallowedCheckpointType(f"checkpoint value serialized as {type_!r}; only msgpack is accepted")
        self._refused.why = None
        try:
            return super().loads_typed(data)
        except ValueError as exc:  # ormsgpack re-raises a failing ext hook as a bare "ext_hook failed"
            why = getattr(self._refused, "why", None)
            if why:
                raise DisallowedCheckpointType(why) from exc
            raise


URL_ENV = "TRITONDX_CHECKPOINT_URL"
SQLITE_FILE = "checkpoints.sqlite"
MARKER_FILE = "checkpoints.json"  # {"store": "postgres", "url": <URL without password>}
_PG_SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(url: str | None) -> bool:
    return bool(url) and url.strip().lower().startswith(_PG_SCHEMES)


def check_url(url: str | None) -> str | None:
    """``url`` if it is a PostgreSQL URL (or empty -> None); a one-line error otherwise."""
    if not url:
        return None
    if not is_postgres_url(url):
        raise TritonDXError(f"--checkpoint-url {redact_url(url)!r}: expected postgresql://USER[:PASSWORD]@HOST"
                            "[:PORT]/DBNAME (or postgres://...)")
    register_url_secret(url)
    return url.strip()


def _with_password(url: str, password: str | None) -> str:
    from urllib.parse import urlsplit, urlunsplit
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    user = parts.username or ""
    auth = f"{user}:{password}@" if password is not None else (f"{user}@" if user else "")
    netloc = f"{auth}{host}{f':{parts.port}' if parts.port else ''}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def redact_url(url: str | None) -> str:
    """The URL for printing: its password (if any) replaced with ``***``; a ``password=`` query parameter too."""
    if not url:
        return ""
    import re
    try:
        out = _with_password(url, "***")
    except ValueError:
        out = re.sub(r"//[^/@]*@", "//***@", url)
    return re.sub(r"(?i)(password=)[^&]*", r"\1***", out)


def strip_password(url: str) -> str:
    """The URL with no password at all (what ``checkpoints.json`` keeps)."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit
    parts = urlsplit(_with_password(url, None))
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k.lower() != "password"])
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment))


def register_url_secret(url: str | None) -> None:
    """Mask the URL's password (and the URL itself) in every log line, report and error message."""
    from urllib.parse import parse_qs, urlsplit

    from tritondx.tools.llm.redact import register_secret
    if not url:
        return
    try:
        parts = urlsplit(url)
        pw = parts.password
        qpw = parse_qs(parts.query).get("password", [])
    except ValueError:
        return
    from urllib.parse import unquote
    for p in [pw, *qpw]:
        if p:
            register_secret(p)
            register_secret(unquote(p))
            register_secret(f"{parts.username}:{p}")
            register_secret(url)


def _marker(run_dir: Path) -> dict[str, Any] | None:
    f = run_dir / MARKER_FILE
    if not f.exists():
        return None
    try:
        data = json.loads(f.read_text())
    except ValueError as exc:
        raise TritonDXError(f"{f}: unreadable ({exc})") from None
    if data.get("store") != "postgres" or not is_postgres_url(data.get("url")):
        raise TritonDXError(f"{f}: not a checkpoint store record")
    return data


def _same_database(a: str, b: str) -> bool:
    from urllib.parse import urlsplit
    pa, pb = urlsplit(a), urlsplit(b)
    return ((pa.hostname, pa.port or 5432, pa.path.strip("/"), pa.username)
            == (pb.hostname, pb.port or 5432, pb.path.strip("/"), pb.username))


def store_url(run_dir: Path | str, url: str | None = None) -> str | None:
    """Where ``run_dir`` keeps its checkpoints: a PostgreSQL URL, or None for ``checkpoints.sqlite``.

    A run that already has a store keeps it (its ``checkpoints.json``, or its SQLite file); a new run
    goes to ``url`` (else ``$TRITONDX_CHECKPOINT_URL``) when one is given, else to SQLite."""
    run_dir = Path(run_dir)
    url = check_url(url or os.environ.get(URL_ENV) or None)
    mark = _marker(run_dir)
    if mark is not None:
        if url is None:
            return mark["url"]  # no password here: libpq's PGPASSWORD / ~/.pgpass supply it
        if not _same_database(url, mark["url"]):
            raise TritonDXError(f"{run_dir.name}: its checkpoints are in {mark['url']}, not in {redact_url(url)}")
        return url
    if url and not (run_dir / SQLITE_FILE).exists():
        return url
    return None


def has_store(run_dir: Path | str) -> bool:
    """Whether the run folder has checkpoints somewhere (its SQLite file or a PostgreSQL record)."""
    run_dir = Path(run_dir)
    return (run_dir / SQLITE_FILE).exists() or (run_dir / MARKER_FILE).exists()


def thread_id_for(run_dir: Path | str, url: str | None = None) -> str:
    """The thread id of a new run in ``run_dir``: the folder's name in its own SQLite file; in a shared
    PostgreSQL database the name plus a random suffix (two batches both have a ``runs/<task>``)."""
    name = Path(run_dir).name
    if store_url(run_dir, url) is None:
        return name
    return f"{name}-{uuid.uuid4().hex[:8]}"


def _pg_connect(url: str):
    try:
        import psycopg
        from psycopg.rows import dict_row
    except ImportError:
        raise TritonDXError("PostgreSQL checkpoints need the `scale` extra: pip install 'tritondx[scale]' "
                            "(langgraph-checkpoint-postgres, psycopg[binary])") from None
    from tritondx.tools.llm.redact import redact_text
    register_url_secret(url)
    try:
        return psycopg.Connection.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row,
                                          connect_timeout=int(os.environ.get("TRITONDX_PG_CONNECT_TIMEOUT", "20")))
    except psycopg.Error as exc:
        why = redact_text(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
        raise TritonDXError(f"checkpoint database {redact_url(url)}: cannot connect ({why})") from None


_setup_done: set[str] = set()
_SETUP_LOCK_KEY = 0x7472_6474_6478  # pg_advisory_lock key: concurrent batch tasks run the migrations once


def open_postgres(url: str):
    """A ``PostgresSaver`` on its own connection (``saver.conn.close()`` closes it), strict serializer,
    tables created on first use."""
    from langgraph.checkpoint.postgres import PostgresSaver
    conn = _pg_connect(url)
    saver = PostgresSaver(conn, serde=StrictSerializer())
    key = strip_password(url)
    if key not in _setup_done:
        try:
            conn.execute("SELECT pg_advisory_lock(%s)", (_SETUP_LOCK_KEY,))
            try:
                saver.setup()
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (_SETUP_LOCK_KEY,))
        except Exception:
            conn.close()
            raise
        _setup_done.add(key)
    return saver


def sqlite_readonly(path: Path, timeout: float = 30) -> sqlite3.Connection:
    """A connection that never writes: ``mode=ro``, plus ``immutable=1`` when no process has the database
    open for writing (no ``-wal`` file: SQLite removes it when the last writer closes) or the folder cannot
    be written (a read-only mount: SQLite could not make the WAL's ``-shm`` file there). So a finished run's
    folder is read without leaving ``-wal``/``-shm`` files, and a running one still shows its latest writes."""
    path = Path(path)
    uri = path.resolve().as_uri() + "?mode=ro"
    if not Path(f"{path}-wal").exists() or not os.access(path.parent, os.W_OK):
        uri += "&immutable=1"
    return sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=timeout)


def _readonly_saver(conn: sqlite3.Connection):
    from langgraph.checkpoint.sqlite import SqliteSaver

    class ReadOnlySqliteSaver(SqliteSaver):
        """Reads a run's checkpoints; its setup creates nothing (the tables are there or the run has none)."""

        def setup(self) -> None:
            self.is_setup = True

    return ReadOnlySqliteSaver(conn, serde=StrictSerializer())


def open_checkpointer(run_dir: Path | str, url: str | None = None, readonly: bool = False):
    """The run folder's saver: ``PatientSqliteSaver`` on ``checkpoints.sqlite``, or ``PostgresSaver`` when
    the run's store is PostgreSQL (``store_url``). Both use ``StrictSerializer``; close with
    ``saver.conn.close()`` (or use ``checkpointer(...)`` as a context manager). ``readonly``: for commands
    that only read (history, show, the source of a fork), which then work on a read-only run folder."""
    run_dir = Path(run_dir)
    pg = store_url(run_dir, url)
    if readonly and pg is None:
        return _readonly_saver(sqlite_readonly(run_dir / SQLITE_FILE))
    if pg is not None:
        saver = open_postgres(pg)
        if readonly:
            return saver
        if not (run_dir / MARKER_FILE).exists():
            tmp = run_dir / (MARKER_FILE + ".tmp")
            tmp.write_text(json.dumps({"store": "postgres", "url": strip_password(pg)}, indent=1))
            os.replace(tmp, run_dir / MARKER_FILE)
        return saver
    from tritondx.tools.run.checkpoint_retry import PatientSqliteSaver  # writes wait out a locked database
    conn = sqlite3.connect(run_dir / SQLITE_FILE, check_same_thread=False, timeout=30)
    return PatientSqliteSaver(conn, serde=StrictSerializer())


class checkpointer:  # noqa: N801  (used like a function: ``with checkpointer(run_dir) as saver``)
    """``open_checkpointer`` as a context manager that closes the connection."""

    def __init__(self, run_dir: Path | str, url: str | None = None):
        self.saver = open_checkpointer(run_dir, url)

    def __enter__(self):
        return self.saver

    def __exit__(self, *exc) -> None:
        self.saver.conn.close()


def count_checkpoints(run_dir: Path | str, url: str | None = None) -> int | None:
    """How many checkpoints the run folder's thread has (None: no store, or it cannot be read)."""
    run_dir = Path(run_dir)
    if not has_store(run_dir) or not (run_dir / "run.json").exists():
        return None
    try:
        pg = store_url(run_dir, url)
    except TritonDXError:
        return None
    if pg is None:
        try:
            con = sqlite_readonly(run_dir / SQLITE_FILE)
            try:
                return con.execute("select count(*) from checkpoints").fetchone()[0]
            finally:
                con.close()
        except sqlite3.Error:
            return None
    try:
        thread = json.loads((run_dir / "run.json").read_text()).get("thread_id") or run_dir.name
        conn = _pg_connect(pg)
    except (TritonDXError, ValueError):
        return None
    try:
        row = conn.execute("select count(*) as n from checkpoints where thread_id = %s", (thread,)).fetchone()
        return row["n"]
    except Exception:  # no table yet, permissions: nothing usable
        return None
    finally:
        conn.close()
