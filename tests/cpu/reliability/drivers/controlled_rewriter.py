"""`tritondx` exactly as installed, except that the rewriter proposes the files of given folders.

    TRITONDX_TEST_CANDIDATES=DIR1[:DIR2...] python controlled_rewriter.py optimize TASK --backend interpreter ...

Round k proposes every ``*.py`` file of DIRk (sorted by name; family ``test_<stem>``); once every
folder has been proposed, rounds propose nothing. Everything else (graph, checkpoints, sandbox,
verifier, report, ``resume``) is the real thing: this is how the reliability tests get candidates
that crash, hang or exhaust memory into an actual ``optimize`` run.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import tritondx.agents.rewriter as rewriter_agent
from tritondx.tools.rewrite.base import Proposal

FOLDERS = [Path(f) for f in os.environ["TRITONDX_TEST_CANDIDATES"].split(os.pathsep) if f]


def _proposals(folder: Path) -> list[Proposal]:
    out = []
    for p in sorted(folder.glob("*.py")):
        text = p.read_text()
        out.append(Proposal(family=f"test_{p.stem}", source=text, params={"file": p.name},
                            description=text.split('"""')[1].strip() if '"""' in text else p.stem,
                            motivated_by=[]))
    return out


def propose(ctx, limit: int = 4, **_) -> list[Proposal]:  # trail, per_family: not used here
    for folder in FOLDERS:
        mine = _proposals(folder)
        if not any(p.signature in ctx.tried for p in mine):
            return mine  # the first folder not proposed yet
    return []


rewriter_agent.propose = propose

if __name__ == "__main__":
    from tritondx.cli import main
    sys.argv = ["tritondx", *sys.argv[1:]]
    main()
