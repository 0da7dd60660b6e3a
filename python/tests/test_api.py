"""convbwd.convolution_backward: operands of either kind and any view, out=,
errors, the plan cache, the reference, the GIL."""

import threading

import numpy as np
import pytest
import torch

import convbwd
from oracle import check_gradients, params

ALL = [True, True, True]


def problem2d(dtype=torch.float32, seed=0):
    """A 2D problem with stride, padding and groups: (go, x, w, params, args)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 4, 9, 8, generator=g).to(dtype)
    w = torch.randn(6, 2, 3, 3, generator=g).to(dtype)
    go = torch.randn(2, 6, 5, 8, generator=g).to(dtype)
    p = params(2, stride=(2, 1), padding=1, groups=2)
    args = ([6], p["stride"], p["before"], p["dilation"], False, [0, 0], 2)
    return go, x, w, p, args


def test_three_gradients_of_torch_tensors_match_float64_autograd():
    go, x, w, p, args = problem2d()
    grads = convbwd.convolution_backward(go, x, w, *args, ALL)
    assert all(isinstance(t, torch.Tensor) and t.dtype == torch.float32 for t in grads)
    check_gradients(grads, go, x, w, p, "torch f32")


def test_numpy_arrays_give_numpy_arrays_with_the_same_values():
    go, x, w, p, args = problem2d()
    from_torch = convbwd.convolution_backward(go, x, w, *args, ALL)
    from_numpy = convbwd.convolution_backward(go.numpy(), x.numpy(), w.numpy(), *args, ALL)
    for a, b in zip(from_numpy, from_torch):
        assert isinstance(a, np.ndarray) and a.dtype == np.float32
        np.testing.assert_array_equal(a, b.numpy())  # same plan, same bits


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_dtypes_come_back_in_their_dtype(dtype):
    go, x, w, p, args = problem2d(dtype)
    grads = convbwd.convolution_backward(go, x, w, *args, ALL)
    assert all(t.dtype == dtype for t in grads)
    check_gradients(grads, go, x, w, p, str(dtype))


def test_float16_numpy_arrays():
    go, x, w, p, args = problem2d(torch.float16)
    grads = convbwd.convolution_backward(go.numpy(), x.numpy(), w.numpy(), *args, ALL)
    assert all(a.dtype == np.float16 for a in grads)
    check_gradients([torch.from_numpy(a) for a in grads], go, x, w, p, "numpy f16")


def test_views_are_read_in_place_whatever_their_strides_and_offsets():
    go, x, w, p, args = problem2d()
    # A slice with a storage offset and steps, channels-last memory, a
    # transposed weight storage and a broadcast (stride 0) gradOutput row.
    big = torch.randn(3, 6, 19, 20)
    big[1:3, 1:5, 1::2, 2:18:2] = x
    x_view = big[1:3, 1:5, 1::2, 2:18:2]
    assert x_view.storage_offset() > 0 and not x_view.is_contiguous()
    w_view = w.permute(3, 2, 1, 0).contiguous().permute(3, 2, 1, 0)
    go_row = go[:, :, :1, :]
    go_broadcast = go_row.expand(-1, -1, 5, -1)
    assert go_broadcast.stride()[2] == 0
    for xi in (x_view, x.contiguous(memory_format=torch.channels_last)):
        check_gradients(convbwd.convolution_backward(go, xi, w_view, *args, ALL), go, x, w, p, "strided")
    check_gradients(convbwd.convolution_backward(go_broadcast, x, w, *args, ALL), go_broadcast, x, w, p, "broadcast")
    # NumPy: a Fortran-ordered array and a stepped slice.
    xf = np.asfortranarray(x.numpy())
    wn = np.zeros((6, 2, 3, 6), np.float32)
    wn[..., ::2] = w.numpy()
    grads = convbwd.convolution_backward(go.numpy(), xf, wn[..., ::2], *args, ALL)
    check_gradients([torch.from_numpy(a) for a in grads], go, x, w, p, "numpy strided")


def test_output_mask_leaves_none_and_bias_sizes_may_be_absent():
    go, x, w, p, args = problem2d()
    gi, gw, gb = convbwd.convolution_backward(go, x, w, None, *args[1:], [False, True, False])
    assert gi is None and gb is None
    check_gradients([None, gw, None], go, x, w, p, "mask 010")


def test_out_views_are_written_in_place_and_nothing_else():
    go, x, w, p, args = problem2d()
    gi_store = torch.full((2, 4, 9, 16), 7.0)
    gi_view = gi_store[:, :, :, ::2]  # every other column
    gb = torch.full((6,), 7.0)
    got = convbwd.convolution_backward(go, x, w, *args, ALL, out=(gi_view, None, gb))
    assert got[0] is gi_view and got[2] is gb
    assert torch.all(gi_store[:, :, :, 1::2] == 7.0), "wrote outside the view"
    check_gradients(got, go, x, w, p, "out=")


def test_errors_are_value_errors_with_status_and_message():
    go, x, w, p, args = problem2d()
    bad = list(args)
    bad[-1] = 3  # 3 groups of 2 weight channels do not make the 4 input channels
    with pytest.raises(convbwd.Error) as info:
        convbwd.convolution_backward(go, x, w, *bad, ALL)
    assert isinstance(info.value, ValueError)
    assert info.value.status == convbwd.STATUS_INVALID_PARAMETER
    assert "groups * weight.shape[1] = 3 * 2" in info.value.message and str(info.value) == info.value.message


@pytest.mark.parametrize("case, words", [
    ("int64", "dtype torch.int64"),
    ("list", "is a list"),
    ("negative", "negative stride"),
    ("out_shape", "gradWeight shape [6,2,3,2] does not match [6,2,3,3]"),
    ("out_readonly", "read-only"),
    ("out_unmasked", "output_mask[0] is False"),
    ("mask", "3 booleans"),
])
def test_bad_arguments_name_what_is_wrong_and_write_nothing(case, words):
    go, x, w, p, args = problem2d()
    mask = ALL
    out = None
    sentinel = torch.full((6, 2, 3, 3), 7.0)
    if case == "int64":
        x = x.long()
    elif case == "list":
        w = w.tolist()
    elif case == "negative":
        go, x, w = go.numpy(), x.numpy()[:, :, ::-1], w.numpy()
    elif case == "out_shape":
        sentinel = torch.full((6, 2, 3, 2), 7.0)
        out = (None, sentinel, None)
    elif case == "out_readonly":
        ro = np.zeros((6, 2, 3, 3), np.float32)
        ro.flags.writeable = False
        go, x, w, out = go.numpy(), x.numpy(), w.numpy(), (None, ro, None)
    elif case == "out_unmasked":
        mask, out = [False, True, True], (torch.empty(2, 4, 9, 8), None, None)
    elif case == "mask":
        mask = [True, True]
    with pytest.raises(convbwd.Error) as info:
        convbwd.convolution_backward(go, x, w, *args, mask, out=out)
    assert words in info.value.message
    assert info.value.status == convbwd.STATUS_INVALID_PARAMETER
    assert torch.all(sentinel == 7.0)


def test_cube_math_type_is_validated():
    go, x, w, p, args = problem2d()
    with pytest.raises(convbwd.Error, match="cubeMathType 7"):
        convbwd.convolution_backward(go, x, w, *args, ALL, 7)


def test_plans_are_cached_per_problem():
    go, x, w, p, args = problem2d()
    convbwd.convolution_backward(go, x, w, *args, ALL)  # planned here or earlier
    before = convbwd.plan_cache_info()
    convbwd.convolution_backward(go.clone(), x.clone(), w.clone(), *args, ALL)
    after = convbwd.plan_cache_info()
    assert after.hits == before.hits + 1 and after.misses == before.misses
    convbwd.convolution_backward(go, x.contiguous(memory_format=torch.channels_last), w, *args, ALL)
    assert convbwd.plan_cache_info().misses == after.misses + 1  # strides are part of the key


def test_reference_is_the_float64_result_rounded_once():
    go, x, w, p, args = problem2d(torch.float16)
    grads = convbwd.convolution_backward(go, x, w, *args, ALL, reference=True)
    ref = convbwd.convolution_backward(go, x, w, *args, ALL)
    from oracle import oracle
    exact, _, _ = oracle(go, x, w, p)
    for got, e in zip(grads, exact):
        # One rounding to fp16: half an ulp, with slack for a near-tie that
        # fp64 sums in another order may round the other way.
        assert torch.all((got.double() - e).abs() <= 2.0**-11 * e.abs() * 1.01 + 2.0**-24)
    check_gradients(ref, go, x, w, p, "fast path")


def test_the_gil_is_released_while_executing():
    # The extension records whether the executing thread held the GIL inside
    # the call (PyGILState_Check); timing another thread's progress instead
    # proved too noisy on a shared machine.
    go, x, w, p, args = problem2d()
    convbwd.convolution_backward(go, x, w, *args, ALL)
    assert convbwd._convbwd._last_execute_held_gil() is False


def test_num_threads_round_trip_clears_the_cache():
    old = convbwd.num_threads()
    go, x, w, p, args = problem2d()
    convbwd.convolution_backward(go, x, w, *args, ALL)
    convbwd.set_num_threads(1)
    try:
        assert convbwd.num_threads() == 1
        assert convbwd.plan_cache_info().currsize == 0
        one = convbwd.convolution_backward(go, x, w, *args, ALL)
    finally:
        convbwd.set_num_threads(0)
    two = convbwd.convolution_backward(go, x, w, *args, ALL)
    assert convbwd.num_threads() == old
    for a, b in zip(one, two):
        assert torch.equal(a, b)  # bit-identical for any thread count


def test_threads_calling_at_once_get_the_results_of_calls_one_at_a_time():
    # One cached plan, four Python threads, each with its own workspace;
    # executes of a few ms, so that they overlap (the GIL is released).
    args = ([32], [1, 1], [1, 1], [1, 1], False, [0, 0], 2, ALL)
    problems = []
    for s in range(4):
        g = torch.Generator().manual_seed(s)
        problems.append((torch.randn(2, 32, 28, 28, generator=g), torch.randn(2, 16, 28, 28, generator=g),
                         torch.randn(32, 8, 3, 3, generator=g)))
    alone = [convbwd.convolution_backward(go, x, w, *args) for go, x, w in problems]
    together = [None] * 4
    barrier = threading.Barrier(4)

    def work(i):
        go, x, w = problems[i]
        barrier.wait()
        together[i] = [convbwd.convolution_backward(go, x, w, *args) for _ in range(10)]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(4):
        for run in together[i]:
            for a, b in zip(run, alone[i]):
                assert torch.equal(a, b)


@pytest.mark.parametrize("reference", [False, True])
def test_an_empty_batch_gives_zero_weight_and_bias_gradients(reference):
    w = torch.randn(6, 2, 3, 3)
    gi, gw, gb = convbwd.convolution_backward(torch.empty(0, 6, 5, 8), torch.empty(0, 4, 9, 8), w, [6], [2, 1], [1, 1],
                                              [1, 1], False, [0, 0], 2, ALL, reference=reference)
    assert gi.shape == (0, 4, 9, 8)
    assert torch.equal(gw, torch.zeros(6, 2, 3, 3)) and torch.equal(gb, torch.zeros(6))
