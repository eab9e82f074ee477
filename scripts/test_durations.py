"""Write tests/cpu/durations.json from the ``--durations=0`` lines of a suite run (stdin): seconds per test
(setup + call + teardown), the tests of 2 s or more. tests/cpu/conftest.py starts the longest first under xdist,
so the run does not end on one long test while the other workers idle. Stale figures only change the order.

    bash scripts/test.sh --durations=0 | .venv/bin/python scripts/test_durations.py
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

LINE = re.compile(r"^([0-9.]+)s (setup|call|teardown)\s+(\S+)")   # 12.34s call     tests/cpu/x.py::test_y[p]@grp
OUT = Path(__file__).resolve().parents[1] / "tests" / "cpu" / "durations.json"
MIN_S = 2.0


def main() -> None:
    seconds: dict[str, float] = defaultdict(float)
    for line in sys.stdin:
        m = LINE.match(line)
        if m:
            nodeid = re.sub(r"@[^\]]*$", "", m.group(3))
            seconds[nodeid] += float(m.group(1))
    keep = {k: round(v, 1) for k, v in sorted(seconds.items(), key=lambda kv: -kv[1]) if v >= MIN_S}
    OUT.write_text(json.dumps(keep, indent=0) + "\n")
    print(f"{OUT}: {len(keep)} tests of {MIN_S:.0f} s or more", file=sys.stderr)


if __name__ == "__main__":
    main()
