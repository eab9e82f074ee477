"""libdevice under the Triton interpreter: numpy/torch forms of the functions kernels call.

Triton 3.6's interpreter (``TRITON_INTERPRET=1``) has no libdevice: ``tl.extra.cuda.libdevice.pow(x, 2)``
fails ("``_semantic`` argument must be provided outside of JIT functions": the interpreter only hands its
builder to ``tl``, ``tl.math`` and tensor methods), and the backend-neutral stubs of
``triton.language.extra.libdevice`` return None, so a kernel using them could not be checked on CPU.

``install()`` (the worker calls it before a task is imported, when ``TRITON_INTERPRET=1``) changes two things
of the interpreter, for the duration of each kernel run, as the interpreter itself patches ``tl``:

- every libdevice function of ``triton.language.extra.{cuda,hip}.libdevice`` and of the neutral stub module
  (also when a kernel imported it by name) is called with the interpreter's builder, so Triton's own
  ``extern_elementwise`` does the argument checks, promotion, broadcasting and result type;
- the builder's ``create_extern_elementwise`` (which raises NotImplementedError in Triton) computes the
  function on the numpy arrays with the form in ``FUNCTIONS`` of the libdevice function being called, and
  casts to the result type libdevice declares. A libdevice function without a form here raises
  NotImplementedError naming it.
"""

from __future__ import annotations

import contextvars
import math
from typing import Any, Callable

import numpy as np

_CALLING: contextvars.ContextVar[str] = contextvars.ContextVar("tritondx_libdevice_fn", default="")
LIBDEVICE_MODULES = ("triton.language.extra.cuda.libdevice", "triton.language.extra.hip.libdevice",
                     "triton.language.extra.libdevice")


def _torch(name: str, after: Callable | None = None, before: Callable | None = None) -> Callable:
    """``torch.special.<name>`` on a numpy array. The result is written through ``out=`` into numpy memory
    (``torch.from_numpy`` both ways): no tensor method that reads data to the host is called, so the
    verifier's host-read recorder sees nothing from inside a kernel."""
    def run(x):
        import torch
        x = np.ascontiguousarray(before(x) if before else x)
        out = np.empty_like(x)
        getattr(torch.special, name)(torch.from_numpy(x), out=torch.from_numpy(out))
        return after(out) if after else out
    return run


def _vec(fn: Callable) -> Callable:
    return np.vectorize(fn, otypes=[np.float64])


def _c_round(x):  # C round(): halves away from zero
    return np.copysign(np.floor(np.abs(x) + 0.5), x)


def _ilogb(x):
    return np.where(x == 0, np.iinfo(np.int32).min, np.frexp(x)[1] - 1)


def _fma(x, y, z):  # in float64 (exact product of two float32), rounded once to the result type
    return x.astype(np.float64) * y.astype(np.float64) + z.astype(np.float64)


def _popc(x):
    bits = x.view(np.uint32 if x.itemsize == 4 else np.uint64)
    return np.array([bin(int(v)).count("1") for v in bits.ravel()], dtype=np.int32).reshape(x.shape)


def _clz(x):
    width = 8 * x.itemsize
    bits = x.view(np.uint32 if width == 32 else np.uint64)
    return np.array([width - int(v).bit_length() for v in bits.ravel()], dtype=np.int32).reshape(x.shape)


_UNARY: dict[str, Callable] = {
    "abs": np.abs, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint,
    "nearbyint": np.rint, "round": _c_round, "exp": np.exp, "exp2": np.exp2, "exp10": lambda x: np.power(10, x),
    "expm1": np.expm1, "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "sqrt": np.sqrt,
    "sqrt_rn": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "rsqrt_rn": lambda x: 1 / np.sqrt(x), "cbrt": np.cbrt,
    "rcbrt": lambda x: 1 / np.cbrt(x), "rcp_rn": lambda x: 1 / x, "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "sinpi": lambda x: np.sin(np.pi * x),
    "cospi": lambda x: np.cos(np.pi * x), "erf": _torch("erf"), "erfc": _torch("erfc"),
    "erfinv": _torch("erfinv"), "erfcx": _torch("erfcx"),
    "erfcinv": _torch("ndtri", before=lambda x: x / 2, after=lambda y: -y / math.sqrt(2)),
    "normcdf": _torch("ndtr"), "normcdfinv": _torch("ndtri"), "lgamma": _torch("gammaln"),
    "tgamma": _vec(math.gamma), "j0": _torch("bessel_j0"), "j1": _torch("bessel_j1"), "y0": _torch("bessel_y0"),
    "y1": _torch("bessel_y1"), "cyl_bessel_i0": _torch("i0"), "cyl_bessel_i1": _torch("i1"),
    "isnan": np.isnan, "isinf": np.isinf, "isfinited": np.isfinite, "finitef": np.isfinite,
    "signbit": np.signbit, "saturatef": lambda x: np.clip(x, 0, 1), "llrint": np.rint, "llround": _c_round,
    "ilogb": _ilogb, "logb": lambda x: np.floor(np.log2(np.abs(x))), "popc": _popc, "clz": _clz,
    "fast_sinf": np.sin, "fast_cosf": np.cos, "fast_tanf": np.tan, "fast_expf": np.exp,
    "fast_exp10f": lambda x: np.power(10, x), "fast_logf": np.log, "fast_log2f": np.log2,
    "fast_log10f": np.log10, "fast_tanhf": np.tanh,
}
_BINARY: dict[str, Callable] = {
    "pow": np.power, "fast_powf": np.power, "atan2": np.arctan2, "hypot": np.hypot,
    "rhypot": lambda x, y: 1 / np.hypot(x, y), "fmod": np.fmod, "copysign": np.copysign,
    "remainder": np.vectorize(math.remainder, otypes=[np.float64]), "nextafter": np.nextafter,
    "fdim": lambda x, y: np.where(x > y, x - y, np.where(np.isnan(x) | np.isnan(y), np.nan, 0.0)),
    "div_rn": np.divide, "fast_dividef": np.divide, "add_rn": np.add,
    "sub_rn": np.subtract, "mul_rn": np.multiply, "ldexp": np.ldexp, "scalbn": np.ldexp,
}
_TERNARY: dict[str, Callable] = {"fma": _fma, "fma_rn": _fma}
FUNCTIONS: dict[str, Callable] = {**_UNARY, **_BINARY, **_TERNARY}


def compute(name: str, arrays: list[np.ndarray], out_dtype: np.dtype) -> np.ndarray:
    """libdevice ``name`` on numpy arrays, cast to libdevice's result type."""
    fn = FUNCTIONS.get(name)
    if fn is None:
        raise NotImplementedError(f"libdevice.{name} has no interpreter form in tritondx "
                                  f"(tools/backends/interpreter/libdevice.py); it runs on a GPU only")
    if name == "pow" and np.issubdtype(arrays[1].dtype, np.integer):
        arrays = [arrays[0], arrays[1].astype(arrays[0].dtype)]  # numpy refuses negative integer powers
    with np.errstate(all="ignore"):
        out = np.asarray(fn(*arrays))
        if np.issubdtype(out_dtype, np.integer) and np.issubdtype(out.dtype, np.floating):
            out = np.nan_to_num(out, nan=0)
        return out.astype(out_dtype)


def _extern_elementwise(self, libName, libPath, symbol, argList, retType, isPure):
    from triton.runtime.interpreter import TensorHandle, _get_np_dtype
    name = _CALLING.get() or symbol
    scalar = retType.scalar if hasattr(retType, "scalar") else retType
    out = compute(name, [a.data for a in argList], _get_np_dtype(scalar))
    shape = np.broadcast_shapes(*(a.data.shape for a in argList))
    return TensorHandle(np.broadcast_to(out, shape).copy(), scalar)


class _GlobalsSlot:
    """A kernel's globals dict seen as an object, so the interpreter's patch scope can restore its entries."""

    def __init__(self, mapping: dict):
        object.__setattr__(self, "_m", mapping)

    def __getattr__(self, name):
        try:
            return self._m[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name, value):
        self._m[name] = value

    def __delattr__(self, name):
        del self._m[name]


_ORIGINALS: dict[str, Any] = {}


def _implementations() -> dict[str, Any]:
    """name -> the libdevice function whose ``extern_elementwise`` table types the call (cuda, else hip),
    as Triton defines it (read once, before any kernel run patches the modules)."""
    if _ORIGINALS:
        return _ORIGINALS
    from triton.language.extra.cuda import libdevice as cuda
    from triton.language.extra.hip import libdevice as hip
    out: dict[str, Any] = {}
    for mod in (hip, cuda):
        for name in dir(mod):
            member = getattr(mod, name)
            if getattr(member, "__module__", "") == mod.__name__ and callable(member):
                out[name] = member
    _ORIGINALS.update(out)
    return out


def _wrap(name: str, member: Any, semantic: Any) -> Callable:
    def call(*args, **kwargs):
        token = _CALLING.set(name)
        try:
            return member(*args, **{k: v for k, v in kwargs.items() if k != "_semantic"}, _semantic=semantic)
        finally:
            _CALLING.reset(token)
    call.__name__ = name
    call.__module__ = member.__module__
    return call


#: the interpreted form of each libdevice function, and where the modules name them: made once per
#: process (the interpreter patches per launch and per device-function call: ~50 times per launch()
#: of a small softmax, which spent 10% of its time rebuilding these)
_WRAPPERS: dict[str, Callable] = {}
_MODULE_SLOTS: list[tuple[Any, str]] = []


def _wrappers() -> tuple[dict[str, Callable], list[tuple[Any, str]]]:
    if _WRAPPERS:
        return _WRAPPERS, _MODULE_SLOTS
    import importlib

    from triton.runtime.interpreter import TritonSemantic, interpreter_builder
    semantic = TritonSemantic(interpreter_builder)   # holds only the builder: one serves every call
    impls = _implementations()
    slots = []
    for modname in LIBDEVICE_MODULES:
        mod = importlib.import_module(modname)
        for name in dir(mod):
            member = getattr(mod, name)
            if getattr(member, "__module__", "") == modname and name in impls:
                slots.append((mod, name))
    _MODULE_SLOTS.extend(slots)
    _WRAPPERS.update({name: _wrap(name, member, semantic) for name, member in impls.items()})
    return _WRAPPERS, _MODULE_SLOTS


def _patch_libdevice(fn: Any, scope: Any) -> None:
    wrappers, slots = _wrappers()
    for mod, name in slots:
        scope.set_attr(mod, name, wrappers[name])
    slot = _GlobalsSlot(fn.__globals__)
    for gname, value in list(fn.__globals__.items()):  # `from ...libdevice import pow` names it directly
        base = getattr(value, "__name__", "")
        if getattr(value, "__module__", "") in LIBDEVICE_MODULES and base in wrappers and callable(value):
            scope.set_attr(slot, gname, wrappers[base])


def install() -> None:
    """Give the running process's Triton interpreter the libdevice forms above (idempotent)."""
    from triton.runtime import interpreter
    if getattr(interpreter, "_tritondx_libdevice", False):
        return
    original = interpreter._patch_lang
    _implementations()

    def patch_lang(fn):
        scope = original(fn)
        _patch_libdevice(fn, scope)
        return scope

    interpreter._patch_lang = patch_lang
    interpreter.InterpreterBuilder.create_extern_elementwise = _extern_elementwise
    interpreter._tritondx_libdevice = True
