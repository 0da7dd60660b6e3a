// The validated, normalized form of a Problem: what planning and every
// implementation below it see. Built once by validate(); nothing below the
// plan re-validates.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "convbwd/convbwd.hpp"
#include "problem/checked.hpp"

namespace convbwd::detail {

constexpr int kMaxSpatial = 3;
constexpr int kMaxRank = kMaxSpatial + 2;

// A strided view (no data pointer: pointers are bound at execute).
struct View {
  DataType dtype = DataType::f32;
  int rank = 0;
  std::array<int64_t, kMaxRank> dims{};
  std::array<int64_t, kMaxRank> strides{};
  int64_t offset = 0;

  int64_t elements() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= dims[i];
    return n;
  }
  bool empty() const { return elements() == 0; }
  // The storage index of the last element a non-empty view reaches: offset +
  // sum of (dims - 1) * strides. Checked, because validate() asks it of views
  // it has not yet bounded; a validated view's is always ok().
  Checked last_index() const {
    Checked last(offset);
    for (int i = 0; i < rank; ++i) last = last + Checked(dims[i] - 1) * strides[i];
    return last;
  }
  // Row-major contiguous, without holes (any offset).
  bool contiguous() const {
    int64_t expect = 1;
    for (int i = rank - 1; i >= 0; --i) {
      if (dims[i] != 1 && strides[i] != expect) return false;
      expect *= dims[i];
    }
    return true;
  }
};

// Every convolution backward reduces to three operations on one "normal"
// convolution geometry, whose tensors are
//   x: [N, G*C, xsize...]   the image side (larger spatial extent)
//   y: [N, G*K, ysize...]   the result side
//   w: [G*K, C, ksize...]
// with y[n,g,k,o] = sum_{c,r} w[g,k,c,r] * x[n,g,c, o*stride - pad_before + r*dilation].
//
// A normal convolution has x = input, y = gradOutput. A transposed one is the
// data-gradient of a normal convolution, so x = gradOutput, y = input, and its
// weight [Cin, Cout/g, k] is already [G*K, C, k]. Then:
//   normal     gradInput  = bwd_data(dy = gradOutput, w)   -> x-shaped
//   transposed gradInput  = fwd(x = gradOutput, w)          -> y-shaped
//   both       gradWeight = bwd_weights(y-side, x-side)
//   both       gradBias   = per-channel sum of gradOutput
struct Geometry {
  int spatial = 0;  // 1, 2 or 3
  int64_t n = 0, groups = 1;
  int64_t c = 0;  // x channels per group
  int64_t k = 0;  // y channels per group
  std::array<int64_t, kMaxSpatial> xsize{}, ysize{}, ksize{};
  std::array<int64_t, kMaxSpatial> stride{}, dilation{}, pad_before{}, pad_after{};

  int64_t x_spatial() const { return product(xsize); }
  int64_t y_spatial() const { return product(ysize); }
  int64_t k_spatial() const { return product(ksize); }

 private:
  int64_t product(const std::array<int64_t, kMaxSpatial>& a) const {
    int64_t p = 1;
    for (int i = 0; i < spatial; ++i) p *= a[i];
    return p;
  }
};

// A Geometry with spatial dims always three deep (missing leading dims have
// size 1, stride 1, padding 0), so loops over space need no rank cases.
struct Space {
  std::array<int64_t, 3> x{1, 1, 1}, y{1, 1, 1}, k{1, 1, 1};
  std::array<int64_t, 3> s{1, 1, 1}, d{1, 1, 1}, pb{0, 0, 0};  // stride, dilation, padding before
  int64_t taps() const { return k[0] * k[1] * k[2]; }
  int64_t y_pixels() const { return y[0] * y[1] * y[2]; }
};

inline Space space_of(const Geometry& g) {
  Space s;
  const int shift = 3 - g.spatial;
  for (int i = 0; i < g.spatial; ++i) {
    s.x[shift + i] = g.xsize[i];
    s.y[shift + i] = g.ysize[i];
    s.k[shift + i] = g.ksize[i];
    s.s[shift + i] = g.stride[i];
    s.d[shift + i] = g.dilation[i];
    s.pb[shift + i] = g.pad_before[i];
  }
  return s;
}

enum class Op { fwd, bwd_data, bwd_weights, bias };
std::string_view to_string(Op);

// How operands are rounded before they meet in a product (CANN's
// cubeMathType resolved against the computation type).
enum class OperandRounding { none, hf32, fp16 };

// One operation of a plan, as an implementation sees it. The roles:
//   fwd:         dst(y) = a(x) (*) w
//   bwd_data:    dst(x) = a(y) (*)^T w
//   bwd_weights: dst(w) = a(y) correlated with b(x)
//   bias:        dst([G*K] or [G*C]) = sum of a over N and space
struct OpSpec {
  Op op = Op::bias;
  Geometry geo;
  DataType compute = DataType::f32;  // the promoted computation type
  OperandRounding rounding = OperandRounding::none;
  View a, b, dst;  // b: the weight (fwd, bwd_data) or x (bwd_weights)
};

struct Spec {
  Problem problem;  // canonical: every optional field filled in
  Geometry geo;
  DataType compute = DataType::f32;
  OperandRounding rounding = OperandRounding::none;
  View grad_output, input, weight;
  std::array<View, 3> grads;  // gradInput, gradWeight, gradBias
  std::array<bool, 3> mask{};

  // The operation computing a gradient.
  OpSpec op_for(Gradient) const;
};

// Checks every rule and builds the Spec. On failure the Error names the
// parameter, the value given and what was expected.
Result<Spec> validate(const Problem&);

// "[4,320,80,80]"
std::string format_dims(const int64_t* dims, int rank);
std::string format_dims(const std::vector<int64_t>&);

}  // namespace convbwd::detail
