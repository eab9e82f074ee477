"""mask_removal: an unmasked EVEN branch chosen by the launcher."""

from __future__ import annotations

import ast


def _even_branch(fn: ast.FunctionDef) -> ast.If:
    (branch,) = [s for s in fn.body if isinstance(s, ast.If)]
    assert ast.unparse(branch.test) == "EVEN"
    return branch


def test_row_loops(rw, tmp_path):
    # softmax checks (5, 2048): N % 1024 == 0 takes the unmasked branch, the other shapes the masked one
    _, props = rw.proposals("l2_softmax", "mask_removal", detector="masked_loads_in_loop")
    (p,) = props
    k = rw.function(p.source, "softmax_kernel")
    branch = _even_branch(k)
    masked = lambda body: [c for s in body for c in ast.walk(s) if isinstance(c, ast.Call)
                           and ast.unparse(c.func) in ("tl.load", "tl.store") and any(kw.arg == "mask" for kw in c.keywords)]
    assert masked(branch.body) == [] and len(masked(branch.orelse)) == 4
    call = next(n for n in ast.walk(rw.function(p.source, "launch")) if isinstance(n, ast.Call)
                and isinstance(n.func, ast.Subscript))
    assert {kw.arg: ast.unparse(kw.value) for kw in call.keywords}["EVEN"] == "N % 1024 == 0"
    rw.verify("l2_softmax", p.source, tmp_path)


def test_flat_kernel_keeps_mixed_masks(rw):
    # maxpool: the window loads mask with `valid` (bounds of the window): only the output store loses its mask
    _, props = rw.proposals("l2_maxpool2d", "mask_removal")
    branch = _even_branch(rw.function(props[0].source, "maxpool_kernel"))
    kws = [{kw.arg for kw in c.keywords} for s in branch.body for c in ast.walk(s) if isinstance(c, ast.Call)
           and ast.unparse(c.func) in ("tl.load", "tl.store")]
    assert {"mask", "other"} in kws and set() in kws


def test_no_removable_mask(rw):
    # matmul tiles use 2-D masks (row and column conditions combined): nothing removable;
    # the grid-literal kernel's grid is not cdiv(n, BLOCK), so an unmasked tail could run past the end
    assert rw.proposals("l3_matmul", "mask_removal")[1] == []
    assert rw.proposals("grid_literal", "mask_removal")[1] == []


def test_a_launch_in_a_helper(rw, tmp_path):
    """The launcher's EVEN test goes where the launch is: in a helper that launch() calls (as in real libraries)."""
    from tritondx.tools.rewrite.mask_removal import even_kernel
    src = rw.task_path("l2_softmax").read_text()
    old = "    softmax_kernel[(M,)](x, out, N, x.stride(0), out.stride(0), BLOCK=1024)\n    return out\n"
    assert old in src
    src = src.replace(old, "    _softmax(x, out, M, N)\n    return out\n\n\ndef _softmax(x, out, M, N):\n"
                           "    softmax_kernel[(M,)](x, out, N, x.stride(0), out.stride(0), BLOCK=1024)\n")
    out, _ = even_kernel(src, "softmax_kernel")
    call = next(n for n in ast.walk(rw.function(out, "_softmax")) if isinstance(n, ast.Call)
                and isinstance(n.func, ast.Subscript))
    assert {kw.arg: ast.unparse(kw.value) for kw in call.keywords}["EVEN"] == "N % 1024 == 0"
    task = tmp_path / "helper_task.py"
    task.write_text(src)
    rw.verify(str(task), out, tmp_path)
