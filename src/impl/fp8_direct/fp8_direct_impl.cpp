// Transposed-convolution gradInput in 8-bit floats (HIFLOAT8, FLOAT8_E4M3FN):
// the one operation these dtypes exist for (see validate_8bit_rules).
//
// Issue 6's numerics, as the accelerator computes them: every product of two
// 8-bit values is exact in fp32, products are accumulated in fp32, and each
// output is rounded once into the 8-bit format. The reference accumulates in
// fp64 instead, so this path is the one that reproduces fp32 accumulation; the
// summation order is fixed (input channel, then kernel tap) for every output,
// whatever the thread count.
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
      for (int64_t r0 = 0; r0 < k_[0]; ++r0)
        for (int64_t r1 = 0; r1 < k_[1]; ++r1)
          for (int64_t r2 = 0; r2 < k_[2]; ++r2) {
            const float wv = lut_w_[w[w_base + r0 * ws_[0] + r1 * ws_[1] + r2 * ws_[2]]];
            float* out = acc;
            for (int64_t o0 = 0; o0 < y_[0]; ++o0) {
              const int64_t i0 = o0 * s_[0] - p_[0] + r0 * d_[0];
              if (i0 < 0 || i0 >= x_[0]) {
                out += y_[1] * y_[2];
                continue;
              }
              for (int64_t o1 = 0; o1 < y_[1]; ++o1) {
                const int64_t i1 = o1 * s_[1] - p_[1] + r1 * d_[1];
                if (i1 < 0 || i1 >= x_[1]) {
                  out += y_[2];
                  continue;
                }
                const int64_t row = x_base + i0 * xs_[0] + i1 * xs_[1];
                for (int64_t o2 = 0; o2 < y_[2]; ++o2, ++out) {
                  const int64_t i2 = o2 * s_[2] - p_[2] + r2 * d_[2];
                  if (i2 >= 0 && i2 < x_[2]) *out += wv * lut_a_[x[row + i2 * xs_[2]]];
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
