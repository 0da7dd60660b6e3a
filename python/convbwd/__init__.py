"""convbwd: the backward pass of a convolution on CPUs, with the numerics of
Huawei CANN's aclnnConvolutionBackward.

    grad_input, grad_weight, grad_bias = convbwd.convolution_backward(
        grad_output, input, weight, bias_sizes=[cout], stride=[1, 1],
        padding=[1, 1], dilation=[1, 1], transposed=False,
        output_padding=[0, 0], groups=1, output_mask=[True, True, True])

Operands are torch tensors (float32, float16, bfloat16) or NumPy arrays
(float32, float16) of any strides and storage offsets; they are read in place,
never copied. The gradients come back as the kind of grad_output, or are
written into the ``out=`` views. ``convbwd.torch`` has autograd Functions and
drop-in convolution modules.
"""

import functools
import sys

from . import _convbwd

__version__ = _convbwd.__version__
__all__ = ["Error", "convolution_backward", "set_num_threads", "num_threads", "isa", "plan_cache_info"]

# The C++ API's status codes, which are CANN's aclnnStatus values.
STATUS_NULL_POINTER = 161001
STATUS_INVALID_PARAMETER = 161002
STATUS_RUNTIME_ERROR = 361001

# DataType codes of the C++ API (include/convbwd/convbwd.hpp).
_F32, _F16, _BF16 = 0, 1, 2
_NUMPY_CODES = {"float32": _F32, "float16": _F16}
_NUMPY_NAMES = {_F32: "float32", _F16: "float16"}
_DTYPE_NAMES = {_F32: "float32", _F16: "float16", _BF16: "bfloat16"}
_NAMES = ("grad_input", "grad_weight", "grad_bias")


class Error(ValueError):
    """A problem convbwd rejects or cannot run. ``status`` is CANN's
    aclnnStatus code (161001 null pointer, 161002 invalid parameter, 361001
    runtime error); ``message`` names the parameter, the value given and what
    was expected."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


def _invalid(message):
    return Error(STATUS_INVALID_PARAMETER, message)


# torch dtype -> code and back, filled when the first tensor is seen (torch
# is imported only by callers that use it).
_TORCH_CODES = {}
_TORCH_DTYPES = {}


def _torch_tables(torch):
    _TORCH_CODES.update({torch.float32: _F32, torch.float16: _F16, torch.bfloat16: _BF16})
    _TORCH_DTYPES.update({code: dt for dt, code in _TORCH_CODES.items()})


def _is_torch(x):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _view(x, name):
    """(pointer to the first element, dtype code, dims, strides in elements)
    of a torch tensor or NumPy array, read in place. Runs on every call:
    attribute reads only, the checks on the common path folded into one."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        if not _TORCH_CODES:
            _torch_tables(torch)
        code = _TORCH_CODES.get(x.dtype)
        if code is None or not x.is_cpu or x.layout is not torch.strided:
            if not x.is_cpu:
                raise _invalid(f"{name} is on device {x.device}; expected a CPU tensor")
            if x.layout is not torch.strided:
                raise _invalid(f"{name} has layout {x.layout}; expected a strided (dense) tensor")
            raise _invalid(f"{name} has dtype {x.dtype}; expected torch.float32, torch.float16 or torch.bfloat16")
        # data_ptr() already points at the storage offset.
        return x.data_ptr(), code, tuple(x.shape), x.stride()
    np = sys.modules.get("numpy")
    if np is not None and isinstance(x, np.ndarray):
        code = _NUMPY_CODES.get(x.dtype.name)
        if code is None:
            raise _invalid(f"{name} has dtype {x.dtype}; expected float32 or float16")
        item = x.itemsize
        if any(s % item for s in x.strides):
            raise _invalid(f"{name} has byte strides {x.strides}, not multiples of its element size {item}")
        return x.__array_interface__["data"][0], code, x.shape, tuple(s // item for s in x.strides)
    raise _invalid(f"{name} is a {type(x).__name__}; expected a torch.Tensor or a numpy.ndarray")


def _ints(value, rank, name):
    """A per-spatial-dim list from an int or a sequence."""
    if isinstance(value, int):
        return (value,) * rank
    try:
        return tuple(map(int, value))
    except TypeError:
        raise _invalid(f"{name} is {value!r}; expected an int or a sequence of ints") from None


def _padding(padding, rank):
    """(before, after) per spatial dim. One value per dim is symmetric; 2*rank
    values are per dim (before, after) pairs, which for 2D is CANN's
    [top, bottom, left, right]."""
    p = _ints(padding, rank, "padding")
    if len(p) == 2 * rank and rank > 0:
        return p[0::2], p[1::2]
    return p, p


@functools.lru_cache(maxsize=256)
def _plan(key):
    (go, x, w, outs, bias_sizes, stride, before, after, dilation, transposed, output_padding, groups, mask,
     cube_math_type) = key
    plan = _convbwd.create_plan(go, x, w, outs[0], outs[1], outs[2], bias_sizes, stride, before, after, dilation,
                                transposed, output_padding, groups, mask, cube_math_type)
    if isinstance(plan, tuple):
        raise Error(*plan)  # lru_cache keeps no failures
    return plan


def plan_cache_info():
    """Hits, misses and size of the plan cache (an LRU of 256 problems keyed
    by shapes, strides, dtypes and parameters)."""
    return _plan.cache_info()


def set_num_threads(n):
    """Threads of the plans made from now on (0: CONVBWD_NUM_THREADS or every
    core). Results are bit-identical for any count. Clears the plan cache,
    whose plans keep the count they were made with."""
    _convbwd.set_num_threads(int(n))
    _plan.cache_clear()


def num_threads():
    return _convbwd.num_threads()


def isa():
    """The instruction set in use: "avx512", "avx2" or "scalar"."""
    return _convbwd.isa()


def _empty_like_kind(template, dims, code):
    if _is_torch(template):
        return sys.modules["torch"].empty(dims, dtype=_TORCH_DTYPES[code])
    np = sys.modules["numpy"]
    if code not in _NUMPY_NAMES:
        raise _invalid(f"the gradients are {_DTYPE_NAMES[code]}, which NumPy has no type for; pass torch tensors")
    return np.empty(dims, dtype=_NUMPY_NAMES[code])


def convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
                         output_padding, groups, output_mask, cube_math_type=0, *, out=None, reference=False):
    """aten::convolution_backward plus CANN's extras: the gradients of a
    convolution (or, with transposed, of a transposed convolution) with
    respect to its input, weight and bias.

    grad_output, input, weight: torch tensors or NumPy arrays, [N, C, spatial...].
    bias_sizes: [Cout] (None when the bias gradient is not asked for).
    stride, dilation, output_padding: one int per spatial dim (or one int).
    padding: one int per spatial dim, or 2 per dim as (before, after) pairs;
        for 2D that is CANN's [top, bottom, left, right].
    output_mask: which of (grad_input, grad_weight, grad_bias) to compute.
    cube_math_type: CANN's cubeMathType: 0 KEEP_DTYPE, 1 ALLOW_FP32_DOWN_PRECISION
        and 3 USE_HF32 (fp32 operands rounded to HF32), 2 USE_FP16 (to fp16).
    out: optional (grad_input, grad_weight, grad_bias) views to write into,
        each None or a tensor/array of the gradient's shape and dtype, any strides.
    reference: compute with the library's fp64 reference instead (plain loops
        on one thread: slow; every element rounded once, for golden data).

    Returns (grad_input, grad_weight, grad_bias), None where output_mask is
    off. Raises convbwd.Error (a ValueError) with .status and .message.
    """
    plan, mask, go, x, w, out, out_views = _prepare(grad_output, input, weight, bias_sizes, stride, padding, dilation,
                                                    transposed, output_padding, groups, output_mask, cube_math_type,
                                                    out)
    results = [None, None, None]
    pointers = [0, 0, 0]
    for i in range(3):
        if not mask[i]:
            continue
        if out[i] is not None:
            results[i] = out[i]
            pointers[i] = out_views[i][0]
        else:
            results[i] = t = _empty_like_kind(grad_output, plan.gradient_dims(i), plan.gradient_dtype(i))
            pointers[i] = t.data_ptr() if _is_torch(t) else t.__array_interface__["data"][0]
    run = plan.reference if reference else plan.execute
    failed = run(go[0], x[0], w[0], pointers[0], pointers[1], pointers[2])
    if failed is not None:
        raise Error(*failed)
    return tuple(results)


def _prepare(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed, output_padding, groups,
             output_mask, cube_math_type, out):
    """The cached plan, the mask, the operands' views, out and its views:
    everything but the outputs' allocation and the call
    (bench/python_overhead.py times the parts)."""
    go = _view(grad_output, "grad_output")
    x = _view(input, "input")
    w = _view(weight, "weight")
    rank = len(x[2]) - 2
    mask = tuple(bool(m) for m in output_mask)
    if len(mask) != 3:
        raise _invalid(f"output_mask is {output_mask!r}; expected 3 booleans (grad_input, grad_weight, grad_bias)")
    if out is None:
        out = out_views = out_keys = (None, None, None)
    else:
        if len(out) != 3:
            raise _invalid(f"out has {len(out)} entries; expected 3 (grad_input, grad_weight, grad_bias), None for any")
        out_views = [None, None, None]
        for i in range(3):
            if out[i] is not None:
                if not mask[i]:
                    raise _invalid(f"out[{i}] ({_NAMES[i]}) is given but output_mask[{i}] is False")
                if not _is_torch(out[i]) and not out[i].flags.writeable:
                    raise _invalid(f"out[{i}] ({_NAMES[i]}) is a read-only array")
                out_views[i] = _view(out[i], f"out[{i}] ({_NAMES[i]})")
        out_keys = tuple(v[1:] if v else None for v in out_views)
    before, after = _padding(padding, rank)
    key = (go[1:], x[1:], w[1:], out_keys,
           None if bias_sizes is None else tuple(bias_sizes), _ints(stride, rank, "stride"), before, after,
           _ints(dilation, rank, "dilation"), bool(transposed), _ints(output_padding, rank, "output_padding"),
           int(groups), mask, int(cube_math_type))
    return _plan(key), mask, go, x, w, out, out_views
