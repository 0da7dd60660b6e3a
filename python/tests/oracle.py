"""The tests' oracle: torch's own autograd in float64 on the operands' exact
values, and convbwd's tolerance (src/numeric/tolerance.hpp, term for term):
|got - ref| <= 2 u_out |ref| + n 2^-24 sum|products| + 2^-24."""

import torch
import torch.nn.functional as F

UNIT_ROUNDOFF = {torch.float32: 2.0**-24, torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}


def forward_f64(x, w, b, stride, before, after, dilation, transposed, output_padding, groups):
    """torch's convolution in float64, with asymmetric padding spelled out."""
    rank = w.dim() - 2
    if list(before) == list(after):
        return torch.convolution(x, w, b, stride, list(before), dilation, transposed, output_padding, groups)
    if not transposed:
        pads = [p for pair in zip(reversed(before), reversed(after)) for p in pair]
        return torch.convolution(F.pad(x, pads), w, b, stride, [0] * rank, dilation, False, output_padding, groups)
    y = torch.convolution(x, w, b, stride, [0] * rank, dilation, True, output_padding, groups)
    return y[(slice(None), slice(None)) + tuple(slice(p, y.shape[2 + i] - q) for i, (p, q) in enumerate(zip(before, after)))]


def _grads(go, x, w, params):
    x = x.detach().double().requires_grad_()
    w = w.detach().double().requires_grad_()
    transposed, groups = params["transposed"], params["groups"]
    cout = w.shape[1] * groups if transposed else w.shape[0]
    b = torch.zeros(cout, dtype=torch.float64, requires_grad=True)
    y = forward_f64(x, w, b, params["stride"], params["before"], params["after"], params["dilation"], transposed,
                    params["output_padding"], groups)
    assert y.shape == go.shape, (y.shape, go.shape)
    return torch.autograd.grad(y, [x, w, b], go.detach().double())


def reduction_lengths(go, x, w, params):
    """Terms summed per element of (grad_input, grad_weight, grad_bias)."""
    k = 1
    for s in w.shape[2:]:
        k *= s
    per_group_out = w.shape[1] if params["transposed"] else w.shape[0] // params["groups"]
    n = go.shape[0]
    go_pixels = x_pixels = 1
    for s in go.shape[2:]:
        go_pixels *= s
    for s in x.shape[2:]:
        x_pixels *= s
    return per_group_out * k, n * (x_pixels if params["transposed"] else go_pixels), n * go_pixels


def oracle(go, x, w, params):
    """(exact gradients, tolerances) in float64 for operands whose values
    are taken as given (round them first to emulate a cube math type)."""
    ref = _grads(go, x, w, params)
    absolute = _grads(go.abs(), x.abs(), w.abs(), params)
    return ref, absolute, reduction_lengths(go, x, w, params)


def assert_close(got, ref, sum_abs, n, out_dtype, what):
    u = UNIT_ROUNDOFF[out_dtype]
    tol = 2 * u * ref.abs() + n * 2.0**-24 * sum_abs + 2.0**-24
    err = (got.double() - ref).abs()
    worst = (err / tol).max().item() if err.numel() else 0.0
    assert worst <= 1.0, f"{what}: worst error {worst:.3g} x tolerance (max abs error {err.max().item():.3g})"


def check_gradients(grads, go, x, w, params, what, out_dtype=None):
    """Asserts each non-None gradient is within tolerance of the oracle."""
    ref, absolute, lengths = oracle(go, x, w, params)
    for i, name in enumerate(("grad_input", "grad_weight", "grad_bias")):
        if grads[i] is None:
            continue
        dtype = out_dtype or grads[i].dtype
        assert tuple(grads[i].shape) == tuple(ref[i].shape), f"{what} {name}: shape {tuple(grads[i].shape)}"
        assert_close(torch.as_tensor(grads[i]), ref[i], absolute[i], lengths[i], dtype, f"{what} {name}")


def params(rank, stride=1, padding=0, dilation=1, transposed=False, output_padding=0, groups=1, after=None):
    per = lambda v: [v] * rank if isinstance(v, int) else list(v)  # noqa: E731
    before = per(padding)
    return dict(stride=per(stride), before=before, after=per(after) if after is not None else before,
                dilation=per(dilation), transposed=transposed, output_padding=per(output_padding), groups=groups)
