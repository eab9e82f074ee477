"""Per-task event timelines from run folders (log.jsonl): seconds after the task's first event, per node
event (what the device results READMEs quote). Usage: python bench/scripts/timelines.py RUNS_DIR..."""

from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path


def timeline(log: Path) -> list[str]:
    rows, t0 = [], None
    for line in log.read_text().splitlines():
        d = json.loads(line)
        t = datetime.datetime.fromisoformat(d["timestamp"].replace("Z", "+00:00"))
        t0 = t0 or t
        ev, extra = d["event"], ""
        if ev == "verified":
            extra = f"{d['candidate']} {d.get('scope') or ''} {'passed' if d['passed'] else 'failed'} {d.get('klass') or ''}"
        elif ev == "proposed":
            extra = f"{len(d.get('candidates', []))} candidates"
        elif ev == "decided":
            extra = d["reason"][:90]
        elif ev == "round_checked":
            extra = f"passed {len(d['passed'])}, failed {len(d['failed'])}"
        rows.append(f"{(t - t0).total_seconds():6.0f} s  {d['node']:15s} {ev:15s} {extra}".rstrip())
    return rows


def main(dirs: list[str]) -> None:
    for root in dirs:
        for log in sorted(Path(root).glob("*/log.jsonl")):
            print(f"## {root}/{log.parent.name}\n\n```")
            print("\n".join(timeline(log)))
            print("```\n")


if __name__ == "__main__":
    main(sys.argv[1:])
