"""ncu --csv --page raw output parsed into counters and findings (sample written from ncu's CSV layout:
a header row of metric names, a row of units, then one row per profiled kernel launch)."""

from tritondx.tools.evidence.ncu import counter_findings, parse_raw_csv

SAMPLE = '''==PROF== Connected to process 123
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","gpu__time_duration.sum","dram__throughput.avg.pct_of_peak_sustained_elapsed","sm__throughput.avg.pct_of_peak_sustained_elapsed","sm__warps_active.avg.pct_of_peak_sustained_active","lts__t_sector_hit_rate.pct","smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio","smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"
"","","","","","","","","","","","nsecond","%","%","%","%","ratio","ratio"
"0","123","python3","localhost","axpy_kernel","1","7","(32, 1, 1)","(131072, 1, 1)","0","9.0","84,512","47.31","21.05","38.2","12.5","9.81","0.12"
'''


def test_parse_and_findings():
    rows = parse_raw_csv(SAMPLE)
    assert len(rows) == 1
    r = rows[0]
    assert r["kernel"] == "axpy_kernel" and r["duration_ns"] == 84512 and r["dram_pct"] == 47.31
    assert r["stalls"]["long_scoreboard"] == 9.81
    f = counter_findings(rows)[0]
    assert f.tier == "profile" and f.stage == "ncu" and "long_scoreboard" in f.message
    assert "launch_config" in f.suggests


def test_no_table():
    assert parse_raw_csv("==ERROR== something failed") == []


def test_one_finding_per_kernel():
    rows = parse_raw_csv(SAMPLE + SAMPLE.splitlines()[-1] + "\n")
    assert len(rows) == 2 and len(counter_findings(rows)) == 1
