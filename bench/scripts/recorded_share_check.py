"""Device check (run once, 2026-12-07 batch_t call): the recorded-share GPU test with the host-path spin off must fail
and with it on pass. Usage, on the device after `source bench/scripts/device_env.sh`: python3 bench/scripts/recorded_share_check.py"""
import sys
sys.path.insert(0, "tests/gpu/core")
from tritondx.tools.tune import record
import test_tune_gpu as t
for cycles in (0, record.HOST_COVER_CYCLES):
    record.HOST_COVER_CYCLES = cycles
    try:
        t.test_the_recorded_share_is_the_kernels_device_time_not_the_hosts_launch_path()
        print("cover", cycles, "PASS")
    except AssertionError as e:
        print("cover", cycles, "FAIL", str(e)[:400])
