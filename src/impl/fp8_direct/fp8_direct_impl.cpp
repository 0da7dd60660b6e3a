// Transposed-convolution gradInput in 8-bit floats (HIFLOAT8, FLOAT8_E4M3FN):
// the one operation these dtypes exist for (see validate_8bit_rules).
//
// Issue 6's numerics, as the accelerator computes them: every product of two
// 8-bit values is exact in fp32, products are accumulated in fp32, and each
// output is rounded once into the 8-bit format. The reference accumulates in
// fp64 instead, so this path is the one that reproduces fp32 accumulation; the
// summation order is fixed (input channel, then kernel tap) for every output,
// whatever the thread count.
#include <algorithm>
#include <array>
#include <cstring>

#include "impl/implementation.hpp"
#include "impl/registry_entries.hpp"
#include "numeric/float_formats.hpp"
#include "numeric/fp8.hpp"
#include "runtime/thread_pool.hpp"

namespace convbwd::detail {
namespace {

bool is_8bit(DataType t) { return t == DataType::hif8 || t == DataType::f8e4m3; }

class Fp8FwdKernel final : public OpKernel {
 public:
  bool uses_tier_kernels() const override { return false; }
  Fp8FwdKernel(const OpSpec& op, int threads) : op_(op), threads_(threads) {
    for (int c = 0; c < 256; ++c) {
      const auto code = static_cast<uint8_t>(c);
      lut_a_[c] = decode(op.a.dtype, code);
      lut_w_[c] = decode(op.b.dtype, code);
    }
    // Spatial dims padded to three, leading dims of size 1.
    const Geometry& g = op.geo;
    const int shift = 3 - g.spatial;
    for (int i = 0; i < g.spatial; ++i) {
      x_[shift + i] = g.xsize[i];
      y_[shift + i] = g.ysize[i];
      k_[shift + i] = g.ksize[i];
      s_[shift + i] = g.stride[i];
      d_[shift + i] = g.dilation[i];
      p_[shift + i] = g.pad_before[i];
      xs_[shift + i] = op.a.strides[2 + i];
      ys_[shift + i] = op.dst.strides[2 + i];
      ws_[shift + i] = op.b.strides[2 + i];
    }
    y_spatial_ = y_[0] * y_[1] * y_[2];
  }

  size_t workspace_bytes() const override {
    return static_cast<size_t>(threads_) * static_cast<size_t>(y_spatial_) * sizeof(float);
  }

  void run(const OpArgs& args, ThreadPool& pool) const override {
    const Geometry& g = op_.geo;
    const int64_t tasks = g.n * g.groups * g.k;
    pool.parallel_for(tasks, threads_, [&](int64_t t, int thread) {
      float* acc = reinterpret_cast<float*>(args.workspace) + thread * y_spatial_;
      compute(args, t / (g.groups * g.k), t % (g.groups * g.k), acc);
    });
  }

 private:
  static float decode(DataType t, uint8_t code) {
    return t == DataType::hif8 ? hif8_to_float(code) : e4m3fn_to_float(code);
  }

  // The outputs o of spatial dim `dim` whose input o*stride - pad + r*dilation
  // lies inside the image, [lo, hi), and that input for o = lo. Worked out
  // once per tap in 128 bits: a valid problem may pair a padding near 2^63
  // with a dilation near 2^63, so the expression can leave the int64 range
  // for taps that land in the padding (a fuzz finding in the reference,
  // which had the same loops). Within [lo, hi) every input fits.
  struct TapRun {
    int64_t lo = 0, hi = 0, first = 0;
  };
  TapRun tap_run(int dim, int64_t r) const {
    __extension__ typedef __int128 Wide;
    const Wide base = Wide{r} * d_[dim] - p_[dim];  // the input of o = 0
    const Wide s = s_[dim];
    // The least o >= 0 with base + o*s >= 0, and the least with base + o*s >= x.
    auto first_at_least = [&](Wide bound) { return base >= bound ? Wide{0} : (bound - base + s - 1) / s; };
    const Wide lo = std::min<Wide>(first_at_least(0), y_[dim]);
    const Wide hi = std::min<Wide>(first_at_least(x_[dim]), y_[dim]);
    if (lo >= hi) return {};
    return {static_cast<int64_t>(lo), static_cast<int64_t>(hi), static_cast<int64_t>(base + lo * s)};
  }

  // All outputs of one (n, output channel).
  void compute(const OpArgs& args, int64_t n, int64_t ko, float* acc) const {
    const Geometry& g = op_.geo;
    const auto* x = static_cast<const uint8_t*>(args.a);
    const auto* w = static_cast<const uint8_t*>(args.b);
    auto* y = static_cast<uint8_t*>(args.dst);
    const int64_t group = ko / g.k;
    std::memset(acc, 0, static_cast<size_t>(y_spatial_) * sizeof(float));
    for (int64_t c = 0; c < g.c; ++c) {
      const int64_t x_base = op_.a.offset + n * op_.a.strides[0] + (group * g.c + c) * op_.a.strides[1];
      const int64_t w_base = op_.b.offset + ko * op_.b.strides[0] + c * op_.b.strides[1];
      for (int64_t r0 = 0; r0 < k_[0]; ++r0) {
        const TapRun run0 = tap_run(0, r0);
        for (int64_t r1 = 0; r1 < k_[1]; ++r1) {
          const TapRun run1 = tap_run(1, r1);
          for (int64_t r2 = 0; r2 < k_[2]; ++r2) {
            const TapRun run2 = tap_run(2, r2);
            const float wv = lut_w_[w[w_base + r0 * ws_[0] + r1 * ws_[1] + r2 * ws_[2]]];
            // Inputs from the run's first one, never stepped past its last
            // (the step after it may not fit).
            for (int64_t o0 = run0.lo; o0 < run0.hi; ++o0) {
              const int64_t i0 = run0.first + (o0 - run0.lo) * s_[0];
              for (int64_t o1 = run1.lo; o1 < run1.hi; ++o1) {
                const int64_t i1 = run1.first + (o1 - run1.lo) * s_[1];
                const int64_t row = x_base + i0 * xs_[0] + i1 * xs_[1];
                float* out = acc + (o0 * y_[1] + o1) * y_[2];
                for (int64_t o2 = run2.lo; o2 < run2.hi; ++o2) {
                  const int64_t i2 = run2.first + (o2 - run2.lo) * s_[2];
                  out[o2] += wv * lut_a_[x[row + i2 * xs_[2]]];
                }
              }
            }
          }
        }
      }
    }
    // One rounding per output, fp32 sum -> 8 bits (the float is exact in fp64).
    const int64_t y_base = op_.dst.offset + n * op_.dst.strides[0] + ko * op_.dst.strides[1];
    const float* v = acc;
    for (int64_t o0 = 0; o0 < y_[0]; ++o0)
      for (int64_t o1 = 0; o1 < y_[1]; ++o1)
        for (int64_t o2 = 0; o2 < y_[2]; ++o2, ++v)
          store_from_double(y, y_base + o0 * ys_[0] + o1 * ys_[1] + o2 * ys_[2], op_.dst.dtype, *v);
  }

  OpSpec op_;
  int threads_;
  std::array<float, 256> lut_a_{}, lut_w_{};
  std::array<int64_t, 3> x_{1, 1, 1}, y_{1, 1, 1}, k_{1, 1, 1}, s_{1, 1, 1}, d_{1, 1, 1}, p_{0, 0, 0};
  std::array<int64_t, 3> xs_{0, 0, 0}, ys_{0, 0, 0}, ws_{0, 0, 0};
  int64_t y_spatial_ = 1;
};

}  // namespace

const Implementation kFp8FwdDirectImpl = {
    "f8_fwd_direct", [](const OpSpec& op, const PlanContext& ctx, std::string* why) -> std::unique_ptr<OpKernel> {
      if (op.op != Op::fwd || !is_8bit(op.a.dtype) || !is_8bit(op.b.dtype) || !is_8bit(op.dst.dtype)) {
        *why = "not an 8-bit transposed gradInput";
        return nullptr;
      }
      return std::make_unique<Fp8FwdKernel>(op, ctx.threads);
    }};

}  // namespace convbwd::detail
