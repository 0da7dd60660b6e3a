"""convbwd.torch: every layer kind and dtype against torch's autograd in
float64 on the same operand values; cube math types; swap()."""

import pytest
import torch

import convbwd
import convbwd.torch as ct
from oracle import assert_close, check_gradients, forward_f64, params, UNIT_ROUNDOFF

# (class, input shape, constructor arguments): each kind with stride,
# padding, dilation or groups, and a bias.
LAYERS = [
    (ct.Conv1d, (2, 4, 13), dict(kernel_size=3, stride=2, padding=1, dilation=2)),
    (ct.Conv2d, (2, 4, 9, 8), dict(kernel_size=3, stride=(2, 1), padding=(1, 2), groups=2)),
    (ct.Conv2d, (2, 6, 8, 8), dict(kernel_size=3, padding=1, groups=6)),  # depthwise
    (ct.Conv3d, (1, 4, 5, 6, 5), dict(kernel_size=(2, 3, 3), padding=1, dilation=(1, 2, 1))),
    (ct.ConvTranspose1d, (2, 4, 7), dict(kernel_size=3, stride=2, padding=1, output_padding=1)),
    (ct.ConvTranspose2d, (2, 4, 5, 6), dict(kernel_size=3, stride=2, padding=1, output_padding=1, groups=2)),
    (ct.ConvTranspose3d, (1, 4, 3, 4, 4), dict(kernel_size=3, stride=(1, 2, 2), padding=(0, 1, 1))),
]
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def layer_params(m):
    transposed = isinstance(m, ct._ConvTranspose)
    rank = len(m.kernel_size)
    return params(rank, m.stride, m.padding, m.dilation, transposed, m.output_padding if transposed else 0, m.groups)


def run_layer(cls, shape, kwargs, dtype, cube_math_type=0, seed=0):
    torch.manual_seed(seed)
    cin = shape[1]
    cout = 6
    m = cls(cin, cout, cube_math_type=cube_math_type, **kwargs).to(dtype)
    x = torch.randn(shape).to(dtype).requires_grad_()
    y = m(x)
    go = torch.randn(y.shape).to(dtype)
    y.backward(go)
    return m, x, y, go


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("cls, shape, kwargs", LAYERS, ids=lambda v: getattr(v, "__name__", ""))
def test_layer_gradients_match_float64_autograd(cls, shape, kwargs, dtype):
    m, x, y, go = run_layer(cls, shape, kwargs, dtype)
    p = layer_params(m)
    assert x.grad.dtype == dtype and m.weight.grad.dtype == dtype and m.bias.grad.dtype == dtype
    check_gradients((x.grad, m.weight.grad, m.bias.grad), go, x, m.weight, p, f"{cls.__name__} {dtype}")
    # The forward is torch's (through float32 for float16): one rounding of
    # a float32 sum.
    ref = forward_f64(x.detach().double(), m.weight.detach().double(), m.bias.detach().double(), p["stride"],
                      p["before"], p["after"], p["dilation"], p["transposed"], p["output_padding"], p["groups"])
    absolute = forward_f64(x.detach().double().abs(), m.weight.detach().double().abs(),
                           m.bias.detach().double().abs(), p["stride"], p["before"], p["after"], p["dilation"],
                           p["transposed"], p["output_padding"], p["groups"])
    assert y.dtype == dtype
    assert_close(y.detach(), ref, absolute, m.weight[0].numel() + 1, dtype, f"{cls.__name__} {dtype} forward")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("cls, shape, kwargs", [LAYERS[1], LAYERS[5]], ids=["Conv2d", "ConvTranspose2d"])
def test_half_precision_layers_agree_with_convbwds_reference(cls, shape, kwargs, dtype):
    # Where torch has no backward of its own (float16; bfloat16 transposed
    # on some builds), the library's fp64 reference is the second opinion.
    m, x, y, go = run_layer(cls, shape, kwargs, dtype, seed=3)
    p = layer_params(m)
    padding = [v for pair in zip(p["before"], p["after"]) for v in pair]
    ref = convbwd.convolution_backward(go, x.detach(), m.weight.detach(), [m.bias.numel()], p["stride"], padding,
                                       p["dilation"], p["transposed"], p["output_padding"], p["groups"],
                                       [True, True, True], reference=True)
    u = UNIT_ROUNDOFF[dtype]
    for got, r, name in zip((x.grad, m.weight.grad, m.bias.grad), ref, ("input", "weight", "bias")):
        # Both are within the tolerance of the exact value, the reference by
        # half an ulp: they differ by at most a few ulps on these sizes.
        err = (got.double() - r.double()).abs()
        assert torch.all(err <= 8 * u * r.double().abs() + 1e-3), f"{name}: {err.max().item()}"


def test_round_operand_hf32_rounds_half_away_from_zero():
    one = 1.0
    q = 2.0**-11  # HF32 keeps 11 fraction bits
    x = torch.tensor([one + q / 2, -(one + q / 2), one + q / 2 - 2**-23, one + 3 * q / 2, float("nan"), float("inf"),
                      torch.finfo(torch.float32).max])
    want = torch.tensor([one + q, -(one + q), one, one + 2 * q, float("nan"), float("inf"), float("inf")])
    got = ct.round_operand(x, 1)
    assert torch.equal(got.isnan(), want.isnan())
    assert torch.equal(got[~want.isnan()], want[~want.isnan()])
    assert torch.equal(ct.round_operand(x, 3)[:4], want[:4])
    assert ct.round_operand(x, 0) is x
    h = x.half()
    assert ct.round_operand(h, 1) is h  # only float32 is rounded


@pytest.mark.parametrize("mode", [1, 2])
def test_cube_math_type_rounds_the_operands_as_the_npu(mode):
    cls, shape, kwargs = LAYERS[1]
    m, x, y, go = run_layer(cls, shape, kwargs, torch.float32, cube_math_type=mode, seed=5)
    p = layer_params(m)

    def rounded(t):
        t = t.detach()
        return t.half().float() if mode == 2 else ct.round_operand(t, mode)

    grads = (x.grad, m.weight.grad, m.bias.grad)
    # Against the rounded operands: within tolerance. The bias gradient is a
    # vector-unit sum that cube math does not touch.
    check_gradients(grads[:2] + (None,), rounded(go), rounded(x), rounded(m.weight), p, f"mode {mode}")
    check_gradients((None, None, grads[2]), go, x, m.weight, p, f"mode {mode} bias")
    # Against the unrounded ones: not (so the mode did something).
    with pytest.raises(AssertionError):
        check_gradients(grads[:2] + (None,), go, x, m.weight, p, "unrounded")
    ref = forward_f64(rounded(x).double(), rounded(m.weight).double(), m.bias.detach().double(), p["stride"],
                      p["before"], p["after"], p["dilation"], False, p["output_padding"], p["groups"])
    assert (y.detach().double() - ref).abs().max() < 1e-4


def test_swap_keeps_parameters_and_routes_backward_through_convbwd():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.ConvTranspose2d(8, 4, 2, stride=2), torch.nn.Flatten(), torch.nn.Linear(256, 2))
    reference = [p.detach().clone() for p in model.parameters()]
    params_before = list(model.parameters())
    x = torch.randn(2, 3, 4, 4)
    y_torch = model(x)
    torch_grads = torch.autograd.grad(y_torch.sum(), params_before)
    assert ct.swap(model, cube_math_type=0) is model
    assert type(model[0]) is ct.Conv2d and type(model[2]) is ct.ConvTranspose2d and type(model[4]) is torch.nn.Linear
    assert list(model.parameters()) == params_before  # the same Parameter objects
    calls = convbwd.plan_cache_info().hits + convbwd.plan_cache_info().misses
    y = model(x)
    assert torch.equal(y, y_torch)  # same forward
    grads = torch.autograd.grad(y.sum(), params_before)
    assert convbwd.plan_cache_info().hits + convbwd.plan_cache_info().misses == calls + 2  # two convolutions
    for g, t in zip(grads, torch_grads):
        assert torch.allclose(g, t, rtol=1e-4, atol=1e-5)
    for p, r in zip(model.parameters(), reference):
        assert torch.equal(p, r)


def test_swap_leaves_subclasses_alone():
    class Custom(torch.nn.Conv2d):
        pass

    model = torch.nn.Sequential(Custom(2, 2, 1))
    ct.swap(model)
    assert type(model[0]) is Custom


@pytest.mark.filterwarnings("ignore:Using padding='same'")  # torch's own layer, about its own copy
def test_padding_modes_same_and_unbatched_inputs():
    torch.manual_seed(1)
    # Ours in float32, torch's in float64 on the same values.
    for kwargs in (dict(padding="same", kernel_size=4), dict(padding=1, kernel_size=3, padding_mode="circular")):
        ours = ct.Conv2d(3, 5, **kwargs)
        theirs = torch.nn.Conv2d(3, 5, **kwargs).double()
        theirs.load_state_dict(ours.state_dict())
        for shape in ((2, 3, 7, 6), (3, 7, 6)):
            x = torch.randn(shape)
            xo, xt = x.clone().requires_grad_(), x.double().requires_grad_()
            # (torch's circular padding cannot take an unbatched input)
            yo, yt = ours(xo), (theirs(xt) if x.dim() == 4 else theirs(xt.unsqueeze(0)).squeeze(0))
            assert yo.shape == yt.shape and torch.allclose(yo.double(), yt, rtol=1e-5, atol=1e-5)
            go = torch.randn(yo.shape)
            yo.backward(go)
            yt.backward(go.double())
            assert torch.allclose(xo.grad.double(), xt.grad, rtol=1e-5, atol=1e-5)
            assert torch.allclose(ours.weight.grad.double(), theirs.weight.grad, rtol=1e-5, atol=1e-5)
            ours.zero_grad()
            theirs.zero_grad()


def test_functional_asymmetric_padding_matches_float64():
    torch.manual_seed(2)
    x = torch.randn(2, 3, 8, 7, requires_grad=True)
    w = torch.randn(4, 3, 3, 3, requires_grad=True)
    for transposed in (False, True):
        wt = torch.randn(3, 4, 3, 3, requires_grad=True) if transposed else w
        y = ct.convolution(x, wt, None, 2, [1, 2, 0, 1], 1, transposed)
        go = torch.randn(y.shape)
        y.backward(go)
        p = params(2, 2, [1, 0], 1, transposed, 0, 1, after=[2, 1])
        check_gradients((x.grad, wt.grad, None), go, x, wt, p, f"asymmetric transposed={transposed}")
        x.grad = None


def test_gradients_flow_only_where_asked():
    m = ct.Conv2d(2, 3, 3, bias=False)
    m.weight.requires_grad_(False)
    x = torch.randn(1, 2, 5, 5, requires_grad=True)
    m(x).sum().backward()
    assert x.grad is not None and m.weight.grad is None


def test_a_dtype_convbwd_does_not_compute_fails_in_the_forward():
    m = ct.Conv2d(2, 3, 3).double()
    with pytest.raises(convbwd.Error, match="input torch.float64 and weight torch.float64"):
        m(torch.randn(1, 2, 5, 5, dtype=torch.float64))
