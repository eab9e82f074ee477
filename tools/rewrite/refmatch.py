"""What a task's ``reference`` computes, as a small symbolic term (ast only; nothing runs).

Templates match on these terms instead of on source text. A term is a tuple:

    ("in", name)              an input of reference()
    ("const", value)          a literal; ("name", NAME) a module constant such as EPS
    ("f32", t)                t.float() / t.to(torch.float32)
    ("cast", t, name)         t.to(name.dtype)
    ("add"|"sub"|"mul"|"div"|"pow", a, b)
    ("neg", t) ("rsqrt", t) ("sqrt", t) ("exp", t) ("abs", t)
    ("mean", t, keepdim) ("sum", t, keepdim) ("var", t, keepdim) ("amax", t, keepdim)   (over the last dim)
    ("layer_norm", t, w, b, eps) ("rms_norm", t, w, eps) ("softmax", t) ("matmul", a, b)
    ("transpose", t) ("squeeze", t) ("tuple", t1, t2, ...)
    ("opaque", source)        anything else

Local assignments are inlined, so the return value is one term over the inputs.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from tritondx.tools.rewrite.taskinfo import task_info

Term = tuple

LAST_DIM = (-1,)


def _dims_last(node: ast.expr | None, ndim_hint: int | None = None) -> bool:
    if node is None:
        return False
    try:
        v = ast.literal_eval(node)
    except ValueError:
        return False
    return v in (-1, [-1], (-1,))


def _kw(call: ast.Call, name: str, pos: int | None = None) -> ast.expr | None:
    for k in call.keywords:
        if k.arg == name:
            return k.value
    if pos is not None and pos < len(call.args):
        return call.args[pos]
    return None


def _fname(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        base = _fname(node.value)
        return f"{base}.{node.attr}" if base else node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


F_PREFIXES = ("torch.nn.functional.", "F.", "torch.", "nn.functional.")


def _short(name: str) -> str:
    for p in F_PREFIXES:
        if name.startswith(p):
            return name[len(p):]
    return name


class _Eval:
    def __init__(self, params: list[str]):
        self.params = params
        self.env: dict[str, Term] = {}

    def dtype_of(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Attribute) and node.attr == "dtype" and isinstance(node.value, ast.Name):
            return node.value.id
        return None

    def __call__(self, node: ast.expr) -> Term:
        ev = self
        if isinstance(node, ast.Name):
            if node.id in self.env:
                return self.env[node.id]
            if node.id in self.params:
                return ("in", node.id)
            return ("name", node.id)
        if isinstance(node, ast.Constant):
            return ("const", node.value)
        if isinstance(node, ast.Tuple):
            return ("tuple",) + tuple(ev(e) for e in node.elts)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            t = ev(node.operand)
            return ("const", -t[1]) if t[0] == "const" and isinstance(t[1], (int, float)) else ("neg", t)
        if isinstance(node, ast.BinOp):
            ops = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.Pow: "pow",
                   ast.MatMult: "matmul"}
            op = ops.get(type(node.op))
            if op:
                return (op, ev(node.left), ev(node.right))
        if isinstance(node, ast.Subscript):
            # x.shape[-1] and similar size expressions
            if isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
                return ("size", ast.unparse(node))
            return ("opaque", ast.unparse(node))
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute):
                meth = f.attr
                recv = f.value
                full = _fname(f)
                short = _short(full)
                # tensor methods
                if meth == "float" and not node.args:
                    return ("f32", ev(recv))
                if meth == "to" and node.args:
                    d = node.args[0]
                    dn = _fname(d)
                    if dn in ("torch.float32", "torch.float"):
                        return ("f32", ev(recv))
                    src = self.dtype_of(d)
                    if src:
                        return ("cast", ev(recv), src)
                    return ("opaque", ast.unparse(node))
                if not full.startswith(("torch.", "F.", "nn.")):
                    t = ev(recv)
                    return self.method(meth, t, node)
                return self.function(short, node)
            if isinstance(f, ast.Name):
                return self.function(f.id, node)
        return ("opaque", ast.unparse(node))

    def reduce_kw(self, node: ast.Call, dim_pos: int) -> tuple[bool, bool]:
        dim = _kw(node, "dim", dim_pos)
        keep = _kw(node, "keepdim", dim_pos + 1)
        keepdim = bool(keep.value) if isinstance(keep, ast.Constant) else False
        return _dims_last(dim), keepdim

    def method(self, meth: str, t: Term, node: ast.Call) -> Term:
        if meth == "pow" and node.args:
            return ("pow", t, self(node.args[0]))
        if meth in ("mean", "sum", "amax"):
            last, keep = self.reduce_kw(node, 0)
            return (meth, t, keep) if last else ("opaque", ast.unparse(node))
        if meth == "var":
            last, keep = self.reduce_kw(node, 0)
            unbiased = _kw(node, "unbiased")
            corr = _kw(node, "correction")
            biased = (isinstance(unbiased, ast.Constant) and unbiased.value is False) or \
                (isinstance(corr, ast.Constant) and corr.value == 0)
            return ("var", t, keep) if last and biased else ("opaque", ast.unparse(node))
        if meth in ("abs", "exp", "sqrt", "rsqrt"):
            return (meth, t)
        if meth == "index_copy" and len(node.args) == 3:
            dim = node.args[0]
            if isinstance(dim, ast.Constant) and dim.value == 0:
                return ("index_copy", t, self(node.args[1]), self(node.args[2]))
            return ("opaque", ast.unparse(node))
        if meth == "clamp_min" and node.args:
            return ("clamp_min", t, self(node.args[0]))
        if meth == "squeeze" and node.args and _dims_last(node.args[0]):
            return ("squeeze", t)
        if meth in ("transpose",) and len(node.args) == 2:
            try:
                dims = {ast.literal_eval(node.args[0]), ast.literal_eval(node.args[1])}
            except ValueError:
                dims = set()
            return ("transpose", t) if dims == {-1, -2} else ("opaque", ast.unparse(node))
        if meth == "mT":
            return ("transpose", t)
        if meth == "softmax":
            last, _ = self.reduce_kw(node, 0)
            return ("softmax", t) if last else ("opaque", ast.unparse(node))
        if meth == "matmul" and node.args:
            return ("matmul", t, self(node.args[0]))
        return ("opaque", ast.unparse(node))

    def function(self, name: str, node: ast.Call) -> Term:
        a = node.args
        if name in ("rsqrt", "sqrt", "exp", "abs") and a:
            return (name, self(a[0]))
        if name == "layer_norm" and a:
            w = _kw(node, "weight", 2)
            b = _kw(node, "bias", 3)
            eps = _kw(node, "eps", 4)
            return ("layer_norm", self(a[0]), self(w) if w is not None else ("const", None),
                    self(b) if b is not None else ("const", None),
                    self(eps) if eps is not None else ("const", 1e-5))
        if name == "rms_norm" and a:
            w = _kw(node, "weight", 2)
            eps = _kw(node, "eps", 3)
            return ("rms_norm", self(a[0]), self(w) if w is not None else ("const", None),
                    self(eps) if eps is not None else ("const", None))
        if name == "topk" and len(a) >= 2 or name == "topk" and a and _kw(node, "k") is not None:
            k = _kw(node, "k", 1)
            dim = _kw(node, "dim", 2)
            largest = _kw(node, "largest", 3)
            srt = _kw(node, "sorted", 4)
            if dim is not None and not _dims_last(dim):
                return ("opaque", ast.unparse(node))
            flag = lambda e, default: bool(e.value) if isinstance(e, ast.Constant) else default
            return ("topk", self(a[0]), self(k), flag(largest, True), flag(srt, True))
        if name == "group_norm" and len(a) >= 2:
            w = _kw(node, "weight", 2)
            b = _kw(node, "bias", 3)
            eps = _kw(node, "eps", 4)
            return ("group_norm", self(a[0]), self(a[1]), self(w) if w is not None else ("const", None),
                    self(b) if b is not None else ("const", None),
                    self(eps) if eps is not None else ("const", 1e-5))
        if name == "batch_norm" and len(a) >= 3:
            w = _kw(node, "weight", 3)
            b = _kw(node, "bias", 4)
            training = _kw(node, "training", 5)
            eps = _kw(node, "eps", 7)
            if not (isinstance(training, ast.Constant) and training.value is False):
                return ("opaque", ast.unparse(node))
            return ("batch_norm", self(a[0]), self(a[1]), self(a[2]),
                    self(w) if w is not None else ("const", None), self(b) if b is not None else ("const", None),
                    self(eps) if eps is not None else ("const", 1e-5))
        if name in ("silu", "sigmoid", "relu") and a:
            return (name, self(a[0]))
        if name == "gelu" and a:
            approx = _kw(node, "approximate")
            if approx is None or (isinstance(approx, ast.Constant) and approx.value == "none"):
                return ("gelu", self(a[0]))
            return ("opaque", ast.unparse(node))
        if name == "softmax" and a:
            dim = _kw(node, "dim", 1)
            return ("softmax", self(a[0])) if _dims_last(dim) else ("opaque", ast.unparse(node))
        if name in ("matmul", "mm") and len(a) == 2:
            return ("matmul", self(a[0]), self(a[1]))
        if name in ("mean", "sum", "amax") and a:
            last, keep = self.reduce_kw(node, 1)
            return (name, self(a[0]), keep) if last else ("opaque", ast.unparse(node))
        return ("opaque", ast.unparse(node))


@dataclass
class Reference:
    params: list[str]
    result: Term
    source: str


def reference_term(source: str) -> Reference | None:
    """The reference's return value as one term; None if it has branches, loops or several returns."""
    info = task_info(source)
    fn = info.reference
    if fn is None or fn.args.vararg or fn.args.kwarg:
        return None
    params = [a.arg for a in fn.args.args]
    ev = _Eval(params)
    result = None
    for st in fn.body:
        if isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant):
            continue  # docstring
        if isinstance(st, ast.Assign) and len(st.targets) == 1:
            tgt = st.targets[0]
            if isinstance(tgt, ast.Name):
                ev.env[tgt.id] = ev(st.value)
                continue
            if isinstance(tgt, ast.Tuple) and all(isinstance(e, ast.Name) for e in tgt.elts):
                # B, H, S, D = q.shape  -> sizes
                if isinstance(st.value, ast.Attribute) and st.value.attr == "shape":
                    for i, e in enumerate(tgt.elts):
                        ev.env[e.id] = ("size", f"{ast.unparse(st.value)}[{i}]")
                    continue
                # values, indices = torch.topk(...): the items of a multi-output call
                value = ev(st.value)
                for i, e in enumerate(tgt.elts):
                    ev.env[e.id] = ("item", value, i)
                continue
            return None
        if isinstance(st, ast.Return) and st.value is not None:
            result = ev(st.value)
            continue
        return None
    if result is None:
        return None
    return Reference(params, result, ast.unparse(fn))


def strip_f32(t: Term) -> Term:
    """Remove .float() wrappers everywhere (the templates compute in fp32 anyway)."""
    if not isinstance(t, tuple) or not t:
        return t
    if t[0] == "f32":
        return strip_f32(t[1])
    return tuple(strip_f32(x) if isinstance(x, tuple) else x for x in t)


def factors(t: Term) -> list[Term]:
    """Flatten a product into its factors."""
    if t[0] == "mul":
        return factors(t[1]) + factors(t[2])
    return [t]


def term_src(t: Term) -> str | None:
    """Python source for a constant-like term (a literal or a module constant), else None."""
    if t[0] == "const" and isinstance(t[1], (int, float)):
        return repr(t[1])
    if t[0] == "name":
        return t[1]
    if t[0] == "neg":
        inner = term_src(t[1])
        return f"-{inner}" if inner else None
    if t[0] in ("add", "sub", "mul", "div", "pow"):
        a, b = term_src(t[1]), term_src(t[2])
        ops = {"add": "+", "sub": "-", "mul": "*", "div": "/", "pow": "**"}
        return f"({a} {ops[t[0]]} {b})" if a and b else None
    return None
