"""The terminal side of ``--interactive``: show an approval request, ask a/r/e/f, return the response.

A request comes from agents/approval.py (``interrupt([request])``): its evidence (findings with IR and
source lines) and a unified diff against the current best are printed with rich; ``e`` opens $VISUAL or
$EDITOR (default ``vi``) on a copy of the candidate file and sends the edited source back; ``f`` asks
for a line of feedback for the rewriter.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.prompt import Prompt
from rich.text import Text

CHOICES = {"a": "accept", "r": "reject", "e": "edit", "f": "feedback"}


def diff_text(diff: str) -> Text:
    out = Text()
    for line in diff.splitlines():
        style = ("bold" if line.startswith(("+++", "---")) else "green" if line.startswith("+") else
                 "red" if line.startswith("-") else "cyan" if line.startswith("@@") else "")
        out.append(line + "\n", style=style)
    return out


def show_request(console: Console, request: dict[str, Any]) -> None:
    args = request.get("action_request", {}).get("args", {})
    title = ("final approval: best kernel " if request.get("kind") == "final" else "rewrite ") + str(
        args.get("candidate", ""))
    console.rule(f"[bold]{escape(title)}")
    head = request.get("description", "").split("\n\nEvidence:")[0]
    console.print(escape(head))
    console.print("[bold]Evidence[/bold]")
    for f in request.get("evidence") or []:
        where = f" (line {f['source_line']}: {f['source_text']})" if f.get("source_line") else ""
        console.print(f"  [yellow]\\[{escape(str(f.get('tier')))}][/yellow] [bold]{escape(str(f.get('detector')))}"
                      f"[/bold]: {escape(str(f.get('message')))}{escape(where)}")
        if f.get("ir_line"):
            console.print(f"      [dim]{escape(str(f.get('stage')))}: {escape(f['ir_line'][:160])}[/dim]")
    if not request.get("evidence"):
        console.print("  (no finding recorded)")
    console.print("[bold]Diff[/bold]")
    console.print(diff_text(request.get("diff") or "(no change)\n"))


def edit_in_editor(source: str, name: str) -> str:
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    with tempfile.TemporaryDirectory(prefix="tritondx-edit-") as d:
        path = Path(d) / name
        path.write_text(source)
        rc = subprocess.call([*shlex.split(editor), str(path)])
        if rc != 0:
            raise RuntimeError(f"editor {editor!r} exited with {rc}")
        return path.read_text()


def terminal_approver(console: Console | None = None):
    console = console or Console(highlight=False)

    def ask(request: dict[str, Any]) -> dict[str, Any]:
        show_request(console, request)
        args = request.get("action_request", {}).get("args", {})
        what = "accept this kernel" if request.get("kind") == "final" else f"apply {args.get('candidate')}"
        key = Prompt.ask(f"{escape(what)}? \\[a]ccept / \\[r]eject / \\[e]dit / \\[f]eedback", choices=list(CHOICES),
                         show_choices=False, console=console)
        kind = CHOICES[key]
        if kind == "edit":
            name = Path(args.get("path") or "candidate.py").name
            source = edit_in_editor(args.get("source", ""), name)
            console.print(f"edited: {len(source.splitlines())} lines")
            return {"type": "edit", "args": {"source": source}}
        if kind == "feedback":
            text = Prompt.ask("feedback for the rewriter", console=console)
            return {"type": "feedback", "args": text}
        return {"type": kind, "args": None}

    return ask
