"""Prompt files: ``prompts/<name>.md`` in package ``tritondx.prompts``.

Templates use ``string.Template`` syntax: ``${task_source}`` / ``$findings``; a literal dollar is
``$$``. Substituted values are never re-scanned, so kernel sources full of ``{}`` and ``$`` are safe.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources
from string import Template
from typing import Any

PROMPT_PACKAGE = "tritondx.prompts"
_NAME_RE = re.compile(r"^[A-Za-z0-9_]+$")
MISSING = "(not given)"


class _Lenient(dict):
    def __missing__(self, key: str) -> str:
        return MISSING


@lru_cache(maxsize=None)
def load_prompt(name: str) -> str:
    """The text of ``prompts/<name>.md`` (``name`` without ``.md``). Raises ``FileNotFoundError``."""
    name = name[:-3] if name.endswith(".md") else name
    if not _NAME_RE.match(name):
        raise ValueError(f"bad prompt name {name!r}: letters, digits and underscores only")
    res = resources.files(PROMPT_PACKAGE).joinpath(f"{name}.md")
    if not res.is_file():
        raise FileNotFoundError(f"no prompt {name!r} (looked for {name}.md in package {PROMPT_PACKAGE})")
    return res.read_text(encoding="utf-8")


def list_prompts() -> list[str]:
    return sorted(p.name[:-3] for p in resources.files(PROMPT_PACKAGE).iterdir() if p.name.endswith(".md"))


def placeholders(name: str) -> set[str]:
    """Placeholder names used by a prompt template."""
    tpl = Template(load_prompt(name))
    return {m.group("named") or m.group("braced") for m in tpl.pattern.finditer(tpl.template)
            if m.group("named") or m.group("braced")}


def render_prompt(name: str, strict: bool = True, **fields: Any) -> str:
    """Fill a template. ``strict``: a missing field raises ``KeyError``; otherwise it reads ``(not given)``."""
    tpl = Template(load_prompt(name))
    values = {k: ("" if v is None else str(v)) for k, v in fields.items()}
    if strict:
        return tpl.substitute(values)
    return tpl.substitute(_Lenient(values))
