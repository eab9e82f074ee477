"""toolchain: locating / installing the separate triton-ascend environment (no install runs here)."""

import sys
from pathlib import Path

import pytest
from tritondx.errors import BackendUnavailable
from tritondx.tools.npu import toolchain
from tritondx.tools.npu.toolchain import (
    DEFAULT_VENV,
    ENV_VAR,
    REQUIREMENTS,
    find_python,
    install_command,
    probe,
    venv_python,
)


def test_requirements_are_pinned_for_this_machine():
    assert "triton-ascend==3.2.*" in REQUIREMENTS and "pybind11" in REQUIREMENTS
    assert "torch==2.13.0" in REQUIREMENTS and "numpy<2.4" in REQUIREMENTS
    assert DEFAULT_VENV.name == ".npu-venv" and DEFAULT_VENV.parent == toolchain.REPO_ROOT


def test_install_command_and_venv_layout(tmp_path):
    cmd = install_command(tmp_path / "bin" / "python")
    assert cmd[:4] == [str(tmp_path / "bin" / "python"), "-m", "pip", "install"]
    assert cmd[-len(REQUIREMENTS):] == list(REQUIREMENTS)
    assert venv_python(tmp_path) == tmp_path / "bin" / "python"


def test_missing_interpreter_message_is_one_line_with_install_hint(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    with pytest.raises(BackendUnavailable) as err:
        find_python(tmp_path / "nope" / "python")
    msg = str(err.value)
    assert "\n" not in msg and "does not exist" in msg and "install" in msg


def test_env_var_is_used(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "venv"))
    with pytest.raises(BackendUnavailable, match=ENV_VAR.replace("$", r"\$")):
        find_python()


def test_interpreter_without_triton_ascend_is_refused(monkeypatch):
    # the dev interpreter has upstream triton, not triton-ascend
    monkeypatch.delenv(ENV_VAR, raising=False)
    with pytest.raises(BackendUnavailable, match="no triton-ascend"):
        find_python(sys.executable)
    info = probe(sys.executable)
    assert info["triton-ascend"] is None and info["python"]


def test_probe_of_missing_interpreter(tmp_path):
    assert "error" in probe(tmp_path / "python")


def test_cli_find_reports_failure(tmp_path, capsys):
    assert toolchain.main(["find", str(tmp_path / "python")]) == 1
    assert "does not exist" in capsys.readouterr().err
    assert toolchain.main(["bogus"]) == 2


def test_found_environment_has_triton_ascend(ascend_python):
    info = probe(ascend_python)
    assert info["triton-ascend"].startswith("3.2") and info["pybind11"]
    assert info["torch"].startswith("2.13")
    assert Path(ascend_python).exists()
