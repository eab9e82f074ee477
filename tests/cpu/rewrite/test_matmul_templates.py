"""split_k and the flash-attention template, matched on the reference."""

from __future__ import annotations

import ast

from tritondx.tools.rewrite.matmul_templates import attention_spec, plain_matmul


def test_split_k_skinny(rw, tmp_path):
    _, props = rw.proposals("l3_skinny_gemm", "split_k", detector="grid_too_small")
    assert len(props) == 2
    src = props[1].source
    names = set(rw.kernel_names(src))
    assert names == {"_tdx_splitk_matmul_kernel", "_tdx_splitk_reduce_kernel"}
    k = rw.function(src, "_tdx_splitk_matmul_kernel")
    assert rw.calls(k, "tl.dot") and rw.calls(k, "tl.program_id")[-1].args[0].value == 2
    # SPLIT_K is decided in the launcher from the SM count
    launch = ast.unparse(rw.function(src, "launch"))
    assert "multi_processor_count" in launch and "split *= 2" in launch
    # variant 1 splits the check shapes K=333 and K=1000 into 2 and 4 slices under the interpreter
    rw.verify("l3_skinny_gemm", src, tmp_path)


def test_split_k_only_for_plain_matmul(rw):
    assert plain_matmul(rw.task_path("l3_skinny_gemm").read_text()) == ("a", "b")
    for task in ("l3_gemv", "l3_batched_matmul", "l3_quant_matmul", "l3_matmul_bias_gelu", "l1_add"):
        assert plain_matmul(rw.task_path(task).read_text()) is None
        assert rw.proposals(task, "split_k")[1] == []


def test_flash_attention(rw, tmp_path):
    assert attention_spec(rw.task_path("l3_attention").read_text()) == ("q", "k", "v", "1.0 / D ** 0.5")
    _, props = rw.proposals("l3_attention", "fuse_passes")
    att = [p for p in props if p.params.get("template") == "flash_attention"]
    assert len(att) == 2
    src = att[1].source
    (name,) = rw.kernel_names(src)
    k = rw.function(src, name)
    loop = next(n for n in ast.walk(k) if isinstance(n, ast.For))
    assert len(rw.calls(loop, "tl.dot")) == 2 and rw.calls(loop, "tl.exp2")
    launch = rw.function(src, "launch")
    assert not any("torch.empty((BH, S, S)" in ast.unparse(n) for n in ast.walk(launch))
    rw.verify("l3_attention", src, tmp_path)


def test_no_attention_template_elsewhere(rw):
    for task in ("l2_softmax", "l3_matmul", "l2_layernorm"):
        assert attention_spec(rw.task_path(task).read_text()) is None
