"""Target names, arch mapping and the hardware table."""

import pytest
from tritondx.errors import BackendUnavailable
from tritondx.tools.npu.targets import VALID_ARCHES, core_table, resolve_target


@pytest.mark.parametrize("name,arch,gen,c950", [
    ("ascend910b", "Ascend910B4", "A2", False),
    ("ascend910_93", "Ascend910_9391", "A3", False),
    ("ascend950", "Ascend910_9589", "950", True),
    ("A2", "Ascend910B4", "A2", False),
    ("Ascend910B2", "Ascend910B2", "A2", False),
    ("ascend910_9579", "Ascend910_9579", "950", True),
])
def test_resolve(name, arch, gen, c950):
    t = resolve_target(name)
    assert (t.arch, t.generation, t.compile_on_910_95) == (arch, gen, c950)
    assert t.arch in VALID_ARCHES


def test_figures():
    a2 = resolve_target("ascend910b")
    assert (a2.cube_cores, a2.vector_cores, a2.ub_bytes) == (20, 40, 192 * 1024)
    assert a2.cores_for("aiv") == 40 and a2.cores_for("mix") == 20 and a2.cores_for("aic") == 20
    assert resolve_target("ascend950").ub_bytes == 248 * 1024
    assert "architecture_difference" in a2.ub_source and "GetRuntimeUBSize" in resolve_target("ascend950").ub_source
    rows = core_table()
    assert {r["arch"] for r in rows} >= {"Ascend910B4", "Ascend910_9391", "Ascend910_9589"}


def test_unknown_targets():
    with pytest.raises(BackendUnavailable, match="unknown Ascend target"):
        resolve_target("cuda")
    with pytest.raises(BackendUnavailable, match="no hardware figures"):
        resolve_target("Ascend310B4")
