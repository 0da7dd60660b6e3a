// One semantics for NaN and +-Inf, whichever implementation runs.
//
// The reference (src/reference/) sums only products of elements that exist:
// kernel taps that fall into the padding, or past a cropped edge, contribute
// no term. The fast paths instead multiply zero-filled copies (the GEMM
// paths' padded channels-last images, the phase data gradient's
// zero-extended windows, depthwise's zero-padded rows), so a NaN or an Inf
// operand would also meet phantom zeros and Inf * 0 = NaN would appear where
// the reference has Inf or a finite value.
//
// What makes every path agree, at execute:
//  1. scan the two operands of an operation for non-finite values (after the
//     operand rounding of cubeMathType, which can itself overflow to Inf).
//     The common case finds none and nothing else changes;
//  2. otherwise the implementation runs with OpArgs::zero_nonfinite set: it
//     reads every non-finite operand element as 0 (implementations that skip
//     missing taps natively may ignore the flag, see below);
//  3. the event pass then adds, for every non-finite operand element, its
//     products through real taps only (both factors existing elements) into
//     the output.
// Every product with a non-finite factor is +Inf, -Inf or NaN, and a sum of
// only such terms is the same whatever the order (NaN if any NaN or both
// signs of Inf, else that Inf); adding a finite partial sum to it changes
// nothing. So an output linked by a real tap to a non-finite element ends
// exactly as the reference's, and every other output keeps its finite fast
// result. The combination is also idempotent (Inf + Inf = Inf, NaN stays
// NaN): an implementation that ignores the flag and already summed the
// non-finite terms itself (reference, fp8_direct) gets the same answer.
//
// Cost: the scan is one read of each operand. The event pass costs
// (non-finite elements) x (their fan-out) when they are few; when they are
// many it goes from each output through its taps and stops at the first NaN
// (see nonfinite.cpp), so all-NaN operands cost a few taps per output, and
// nothing costs more than a plain loop version of the operation.
#pragma once

#include "kernels/any_nonfinite.hpp"
#include "problem/spec.hpp"

namespace convbwd::detail {

class ThreadPool;

// Whether every tap of every output lands on an existing element, in the
// forward relation and in the data gradient's windows alike (kernel size 1,
// no padding: the 1x1 layers). Then no implementation multiplies a phantom
// zero, IEEE sums already give the reference's NaN/Inf, and execute skips
// the scan and the event pass (their cost is pure overhead there: the scan
// was 3-6% of a 1x1 layer's execute, and all-Inf operands took up to 20x).
bool every_tap_is_real(const Geometry& g);

// Whether some element of the view is NaN or +-Inf once rounded as
// `rounding` says (fp16 rounding overflows above 65504, HF32 near FLT_MAX).
// A view without holes is scanned by up to `threads` threads of the pool:
// serial, the scan was 7-12% of a depthwise layer's execute and capped its
// 1 -> 2 thread speed-up. The answer does not depend on the split.
bool has_nonfinite(const void* base, const View& v, OperandRounding rounding, ThreadPool* pool = nullptr,
                   int threads = 1);

// Whether any of the n contiguous bf16 values at p is NaN or +-Inf: the
// check of a fast path that multiplies a bf16 operand as it lies, without a
// copy of its own to check (small_channels_wgrad's dy pairs).
bool bf16_run_has_nonfinite(const uint16_t* p, int64_t n);

// zero_nonfinite, which implementations call to honour
// OpArgs::zero_nonfinite on their fp32 copies, lives with the kernels
// (kernels/any_nonfinite.hpp), which call it too.

// Step 3 above: adds into dst every product, through real taps only, that has
// a non-finite factor in operand a (when scan_a) or b (when scan_b). For
// Op::bias nothing is needed (no taps, no padding) and nothing is done.
// The sparse way runs serially in a fixed order, the dense way in parallel
// over output planes (each output gets one add): the bits do not depend on
// the thread count.
void add_nonfinite_terms(const OpSpec& op, const void* a, const void* b, void* dst, bool scan_a, bool scan_b,
                         ThreadPool& pool, int threads);

}  // namespace convbwd::detail
