"""Checkpoint storage: a SQLite saver whose serializer loads only plain data.

Graph state holds plain builtins by design (dicts, lists, strings, numbers, None); LangGraph itself
adds a few of its own types to checkpoints (``Interrupt`` for a paused approval, ``Send``/``Command``
in pending writes). ``StrictSerializer`` is LangGraph's ``JsonPlusSerializer`` with pickle off and a
msgpack extension hook that rebuilds only those types: a checkpoint that contains any other Python
type (a pydantic model, a numpy array, a ``Path``, an arbitrary class) fails to load with
``DisallowedCheckpointType`` instead of importing and calling whatever the database names.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import ormsgpack
from langgraph.checkpoint.serde import jsonplus as _jp
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver

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


def open_checkpointer(run_dir: Path | str) -> SqliteSaver:
    from tritondx.tools.checkpoint_retry import PatientSqliteSaver  # writes wait out a locked database
    conn = sqlite3.connect(Path(run_dir) / "checkpoints.sqlite", check_same_thread=False, timeout=30)
    return PatientSqliteSaver(conn, serde=StrictSerializer())
