"""PyTorch integration: convolutions whose forward runs through torch and
whose backward runs through convbwd.

    import convbwd.torch
    model = convbwd.torch.swap(model)          # every nn.ConvNd / ConvTransposeNd
    layer = convbwd.torch.Conv2d(16, 32, 3, padding=1, cube_math_type=1)

cube_math_type is CANN's cubeMathType: with float32 layers, 1 and 3 round the
operands of every product to HF32 and 2 to float16, in the forward (done here,
before torch's convolution) and in the backward (done by convbwd), so a CPU
run computes as the NPU would. float16 and bfloat16 layers compute their
forward in float32 and round the result once, as the NPU accumulates (torch's
CPU convolutions have no float16 kernels, and on CPUs without oneDNN's
bfloat16 kernels theirs sum in bfloat16). float64 is not computed by convbwd.
"""

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

import convbwd

__all__ = ["ConvolutionFunction", "convolution", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d",
           "ConvTranspose2d", "ConvTranspose3d", "swap", "round_operand"]


def round_operand(t, cube_math_type):
    """t as convbwd's backward sees it under cube_math_type: float32 rounded to
    HF32 (1, 3: 11 significant bits, ties away from zero) or to float16 (2,
    overflowing to Inf); other dtypes and mode 0 unchanged."""
    if t.dtype != torch.float32 or cube_math_type == 0:
        return t
    if cube_math_type == 2:
        return t.half().float()
    if cube_math_type in (1, 3):
        bits = t.contiguous().view(torch.int32)
        # Adding half of the dropped quantum to the magnitude bits rounds
        # half away from zero and carries into the exponent; NaN stays NaN.
        rounded = ((bits + 0x800) & -0x1000).view(torch.float32)
        return torch.where(torch.isnan(t), t, rounded).view_as(t)
    raise convbwd.Error(convbwd.STATUS_INVALID_PARAMETER,
                        f"cube_math_type {cube_math_type} is unknown; expected 0, 1, 2 or 3")


def _torch_forward(input, weight, bias, stride, before, after, dilation, transposed, output_padding, groups,
                   cube_math_type):
    x = round_operand(input, cube_math_type)
    w = round_operand(weight, cube_math_type)
    dtype = x.dtype
    # torch's CPU convolutions have no float16 kernels; its bfloat16 transposed
    # one rejects valid shapes (torch 1.13); and where oneDNN has no bfloat16
    # kernel (an AVX2-only CPU), its bfloat16 convolution sums in bfloat16,
    # 178 times the float32-sum bound on a Zen 2. So both 16-bit types run in
    # float32, rounded once at the end, as the NPU accumulates.
    if dtype in (torch.float16, torch.bfloat16):
        x, w = x.float(), w.float()
        bias = None if bias is None else bias.float()
    if before == after:
        y = torch.convolution(x, w, bias, stride, before, dilation, transposed, output_padding, groups)
    elif not transposed:
        # Asymmetric padding: pad the input explicitly (F.pad takes the last
        # dim first).
        pads = [p for pair in zip(reversed(before), reversed(after)) for p in pair]
        y = torch.convolution(F.pad(x, pads), w, bias, stride, [0] * len(before), dilation, False, output_padding,
                              groups)
    else:
        # A transposed convolution's padding crops its output.
        y = torch.convolution(x, w, bias, stride, [0] * len(before), dilation, True, output_padding, groups)
        index = [slice(None), slice(None)] + [slice(b, y.shape[2 + i] - a) for i, (b, a) in enumerate(zip(before, after))]
        y = y[tuple(index)]
    return y.to(dtype)


_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


class ConvolutionFunction(torch.autograd.Function):
    """torch.convolution forward, convbwd backward. Arguments as
    convbwd.torch.convolution, all given; padding is (before, after) lists."""

    @staticmethod
    def forward(ctx, input, weight, bias, stride, before, after, dilation, transposed, output_padding, groups,
                cube_math_type):
        # Fail here rather than in the backward, far from the layer.
        if input.dtype not in _DTYPES or weight.dtype not in _DTYPES:
            raise convbwd.Error(convbwd.STATUS_INVALID_PARAMETER,
                                f"input {input.dtype} and weight {weight.dtype}: convbwd's backward computes "
                                "torch.float32, torch.float16 and torch.bfloat16 only")
        ctx.save_for_backward(input, weight)
        ctx.params = (stride, before, after, dilation, transposed, output_padding, groups, cube_math_type)
        ctx.has_bias = bias is not None
        return _torch_forward(input, weight, bias, stride, before, after, dilation, transposed, output_padding,
                              groups, cube_math_type)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        input, weight = ctx.saved_tensors
        stride, before, after, dilation, transposed, output_padding, groups, cube_math_type = ctx.params
        mask = (ctx.needs_input_grad[0], ctx.needs_input_grad[1], ctx.has_bias and ctx.needs_input_grad[2])
        cout = weight.shape[1] * groups if transposed else weight.shape[0]
        padding = [p for pair in zip(before, after) for p in pair]
        gi, gw, gb = convbwd.convolution_backward(grad_output, input, weight, [cout], stride, padding, dilation,
                                                  transposed, output_padding, groups, mask, cube_math_type)
        return gi, gw, gb, None, None, None, None, None, None, None, None


def _per_dim(value, rank, name):
    if isinstance(value, int):
        return [value] * rank
    value = [int(v) for v in value]
    if len(value) != rank:
        raise convbwd.Error(convbwd.STATUS_INVALID_PARAMETER,
                            f"{name} is {value}; expected one int per spatial dim ({rank})")
    return value


def convolution(input, weight, bias=None, stride=1, padding=0, dilation=1, transposed=False, output_padding=0,
                groups=1, cube_math_type=0):
    """torch.convolution with its backward through convbwd. padding: an int,
    one per spatial dim, 2 per dim as (before, after) pairs (for 2D, CANN's
    [top, bottom, left, right]), or "same"/"valid" (not transposed). An
    unbatched input (no N dim) is accepted as torch's modules accept it."""
    rank = weight.dim() - 2
    unbatched = input.dim() == rank + 1
    if unbatched:
        input = input.unsqueeze(0)
    stride = _per_dim(stride, rank, "stride")
    dilation = _per_dim(dilation, rank, "dilation")
    output_padding = _per_dim(output_padding, rank, "output_padding")
    if padding == "valid":
        before = after = [0] * rank
    elif padding == "same":
        if transposed:
            raise convbwd.Error(convbwd.STATUS_INVALID_PARAMETER,
                                "padding 'same' is given for a transposed convolution; expected numbers")
        # torch's rule: the odd unit of padding goes after.
        total = [d * (k - 1) for d, k in zip(dilation, weight.shape[2:])]
        before = [t // 2 for t in total]
        after = [t - b for t, b in zip(total, before)]
    elif not isinstance(padding, int) and len(padding) == 2 * rank:
        before, after = [int(p) for p in padding[0::2]], [int(p) for p in padding[1::2]]
    else:
        before = after = _per_dim(padding, rank, "padding")
    y = ConvolutionFunction.apply(input, weight, bias, stride, before, after, dilation, bool(transposed),
                                  output_padding, int(groups), int(cube_math_type))
    return y.squeeze(0) if unbatched else y


class _Conv:
    """Shared by the drop-in convolutions: torch's module, with _conv_forward
    routed through convolution(). Parameters, initialization and state_dict
    are torch's own."""

    def __init__(self, *args, cube_math_type=0, **kwargs):
        super().__init__(*args, **kwargs)
        self.cube_math_type = cube_math_type

    def _conv_forward(self, input, weight, bias):
        padding = self.padding
        if self.padding_mode != "zeros":
            # F.pad's non-constant modes need the batch dim.
            unbatched = input.dim() == weight.dim() - 1
            padded = F.pad(input.unsqueeze(0) if unbatched else input, self._reversed_padding_repeated_twice,
                           mode=self.padding_mode)
            input = padded.squeeze(0) if unbatched else padded
            padding = 0
        return convolution(input, weight, bias, self.stride, padding, self.dilation, False, 0, self.groups,
                           self.cube_math_type)

    def extra_repr(self):
        return super().extra_repr() + f", cube_math_type={self.cube_math_type}"


class _ConvTranspose(_Conv):
    def forward(self, input, output_size=None):
        if self.padding_mode != "zeros":
            raise ValueError(f"Only `zeros` padding mode is supported for {type(self).__name__}")
        rank = len(self.kernel_size)
        output_padding = self._output_padding(input, output_size, self.stride, self.padding, self.kernel_size,
                                              rank, self.dilation)
        return convolution(input, self.weight, self.bias, self.stride, self.padding, self.dilation, True,
                           output_padding, self.groups, self.cube_math_type)


class Conv1d(_Conv, torch.nn.Conv1d):
    pass


class Conv2d(_Conv, torch.nn.Conv2d):
    pass


class Conv3d(_Conv, torch.nn.Conv3d):
    pass


class ConvTranspose1d(_ConvTranspose, torch.nn.ConvTranspose1d):
    pass


class ConvTranspose2d(_ConvTranspose, torch.nn.ConvTranspose2d):
    pass


class ConvTranspose3d(_ConvTranspose, torch.nn.ConvTranspose3d):
    pass


_SWAPS = {torch.nn.Conv1d: Conv1d, torch.nn.Conv2d: Conv2d, torch.nn.Conv3d: Conv3d,
          torch.nn.ConvTranspose1d: ConvTranspose1d, torch.nn.ConvTranspose2d: ConvTranspose2d,
          torch.nn.ConvTranspose3d: ConvTranspose3d}


def swap(model, cube_math_type=0):
    """Routes the backward of every torch.nn.ConvNd and ConvTransposeNd in
    model (itself included) through convbwd, in place, sets cube_math_type
    on each convbwd convolution in it, and returns model.
    Each module keeps its parameters, buffers, hooks and identity (only its
    class changes), so optimizers and state_dicts made before stay valid.
    Subclasses of torch's convolutions are left alone: their forward may do
    more than a convolution. Call before wrapping the model in
    DistributedDataParallel."""
    for m in model.modules():
        ours = _SWAPS.get(type(m))
        if ours is not None:
            m.__class__ = ours
        if isinstance(m, _Conv):
            m.cube_math_type = cube_math_type
    return model
