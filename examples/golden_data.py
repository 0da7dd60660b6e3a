#!/usr/bin/env python3
"""Golden data for NPU test suites: the expected outputs of CANN's
aclnnConvolutionBackward, in a given precision mode, for given inputs.

The outputs are what an exact machine would give: the operands rounded as
cubeMathType says (HF32 for 1 and 3, float16 for 2, on float32 inputs), every
product summed in float64 and each result rounded once to the output dtype.
That is convbwd's reference (convolution_backward(..., reference=True)):
plain loops on one thread, so keep the problems test-sized.

Command line (2D, stride 2, padding 1, cubeMathType 1 = HF32):
    /usr/bin/python3 examples/golden_data.py --grad-output go.npy --input x.npy \\
        --weight w.npy --stride 2 2 --padding 1 1 --cube-math-type 1 --out-dir golden/
writes golden/gradInput.npy, gradWeight.npy and gradBias.npy (those --mask
asks for, default all three). Inputs are float32 or float16 .npy files;
--dtype bf16 rounds float32 inputs to bfloat16 first and writes the bfloat16
outputs as float32 .npy files (NumPy has no bfloat16), exactly.

From Python (e.g. inside a test generator), with NumPy arrays or torch tensors:
    from golden_data import golden
    grads = golden(go, x, w, stride=[2, 2], padding=[1, 1], cube_math_type=1)
"""

import argparse
import os

import numpy as np

import convbwd

NAMES = ("gradInput", "gradWeight", "gradBias")


def golden(grad_output, input, weight, stride, padding, dilation=None, transposed=False, output_padding=None,
           groups=1, mask=(True, True, True), cube_math_type=0):
    """(gradInput, gradWeight, gradBias), None where mask is off, of the kind
    of grad_output. padding: per spatial dim, or (before, after) per dim
    (2D: CANN's [top, bottom, left, right])."""
    rank = len(input.shape) - 2
    dilation = dilation if dilation is not None else [1] * rank
    output_padding = output_padding if output_padding is not None else [0] * rank
    cout = weight.shape[1] * groups if transposed else weight.shape[0]
    return convbwd.convolution_backward(grad_output, input, weight, [cout] if mask[2] else None, stride, padding,
                                        dilation, transposed, output_padding, groups, list(mask), cube_math_type,
                                        reference=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--grad-output", required=True, help=".npy, [N, Cout, spatial...]")
    ap.add_argument("--input", required=True, help=".npy, [N, Cin, spatial...]")
    ap.add_argument("--weight", required=True, help=".npy, [Cout, Cin/groups, k...] ([Cin, Cout/groups, k...] transposed)")
    ap.add_argument("--stride", type=int, nargs="+", required=True)
    ap.add_argument("--padding", type=int, nargs="+", required=True,
                    help="one per spatial dim, or (before, after) per dim: 2D [top bottom left right]")
    ap.add_argument("--dilation", type=int, nargs="+")
    ap.add_argument("--transposed", action="store_true")
    ap.add_argument("--output-padding", type=int, nargs="+")
    ap.add_argument("--groups", type=int, default=1)
    ap.add_argument("--mask", default="111", help="gradInput, gradWeight, gradBias as 3 bits (default 111)")
    ap.add_argument("--cube-math-type", type=int, default=0, choices=[0, 1, 2, 3])
    ap.add_argument("--dtype", choices=["as-given", "bf16"], default="as-given")
    ap.add_argument("--out-dir", required=True)
    args = ap.parse_args()
    if len(args.mask) != 3 or set(args.mask) - {"0", "1"}:
        ap.error(f"--mask {args.mask!r}: expected 3 bits such as 111 or 010")

    arrays = [np.load(p) for p in (args.grad_output, args.input, args.weight)]
    if args.dtype == "bf16":
        import torch
        arrays = [torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32)).bfloat16() for a in arrays]
    grads = golden(*arrays, stride=args.stride, padding=args.padding, dilation=args.dilation,
                   transposed=args.transposed, output_padding=args.output_padding, groups=args.groups,
                   mask=[b == "1" for b in args.mask], cube_math_type=args.cube_math_type)
    os.makedirs(args.out_dir, exist_ok=True)
    for name, g in zip(NAMES, grads):
        if g is None:
            continue
        if args.dtype == "bf16":
            g = g.float().numpy()  # every bfloat16 value is a float32 value
        path = os.path.join(args.out_dir, name + ".npy")
        np.save(path, g)
        print(f"{path}: {g.dtype} {list(g.shape)}")


if __name__ == "__main__":
    main()
