// Fuzz target: planning and executing hostile but mostly VALID problems
// through the C++ API (issue 18). The input picks a rank, channels, groups
// (depthwise and 8-channel groups often), kernel sizes and, per spatial dim,
// strides, paddings and dilations from small values up to 2^63-1, a
// transposed flag, dtypes, a mask, and views: contiguous, with holes, or
// broadcast (strides 0) over huge dims.
//
// The promises checked:
//   - Plan::create either plans or refuses with 161001/161002 and a message;
//     planning itself never overflows (UBSan) nor allocates absurdly (ASan's
//     RSS limit);
//   - a plan whose buffers fit in a few MiB and whose reference is cheap runs
//     on buffers of exactly their storage's bytes and an exactly-sized
//     workspace (ASan sees any stray access), succeeds, changes no input and
//     equals the fp64 reference within tests/util's tolerance.
#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "fuzz_common.hpp"
#include "numeric/float_formats.hpp"
#include "problem/checked.hpp"
#include "problem/spec.hpp"
#include "util/extreme.hpp"
#include "util/guarded.hpp"

namespace convbwd::fuzz {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// Strides, paddings and dilations: mostly small, else a power of two up to
// 2^62 (the depthwise_cl failures began at 2^56) or the values next to 2^63.
int64_t extreme(Bytes& b, int64_t min) {
  const uint8_t k = b.u8();
  if (k < 128) return min + k % 4;
  if (k < 232) return int64_t{1} << (20 + k % 43);
  static constexpr int64_t kEdge[] = {kMax, kMax - 1, kMax / 2, kMax / 2 + 1, kMax / 3, (int64_t{1} << 62) - 1,
                                      3037000500, int64_t{1} << 31};
  return std::max(min, kEdge[k % 8]);
}

constexpr DataType kTypes[] = {DataType::f32, DataType::f16, DataType::bf16};

// Storage elements a view reaches (0 for an empty one), checked; -1 when
// beyond 2^62 (validate refuses such views anyway).
int64_t storage_of(const TensorDesc& d) {
  detail::Checked reach(d.offset + 1);
  for (size_t i = 0; i < d.dims.size(); ++i) {
    if (d.dims[i] == 0) return 0;
    reach = reach + detail::Checked(d.dims[i] - 1) * d.strides[i];
  }
  return reach.at_most(int64_t{1} << 62) ? reach.value() : -1;
}

// Row-major strides with optional holes, or broadcast: every stride 0
// (inputs only: an output must not overlap itself).
void set_view(TensorDesc& d, Bytes& b, bool output) {
  const size_t r = d.dims.size();
  d.strides.assign(r, 0);
  const int mode = b.u8() % 4;
  if (!output && mode == 3) {
    for (size_t i = 0; i < r; ++i) d.strides[i] = b.flip(3) ? 1 : 0;
    if (d.strides.back() == 0) std::fill(d.strides.begin(), d.strides.end(), 0);
    else for (size_t i = 0; i + 1 < r; ++i) d.strides[i] = 0;
  } else {
    detail::Checked running(1);
    for (size_t i = r; i-- > 0;) {
      d.strides[i] = running.value_or(0);
      running = running * (detail::Checked(std::max<int64_t>(d.dims[i], 1)) + (mode == 2 ? b.range(0, 2) : 0));
    }
  }
  d.offset = mode == 2 ? b.range(0, 3) : 0;
  d.storage_elements = storage_of(d);
}

struct Buffer {
  std::unique_ptr<unsigned char[]> bytes;
  size_t size = 0;
};
Buffer alloc(const TensorDesc& d) {
  Buffer buf;
  buf.size = static_cast<size_t>(std::max<int64_t>(d.storage_elements, 0)) * size_of(d.dtype);
  buf.bytes.reset(new unsigned char[std::max<size_t>(buf.size, 1)]);
  std::memset(buf.bytes.get(), test::kPoison, std::max<size_t>(buf.size, 1));
  return buf;
}

void run(Bytes& b) {
  test::Geo g;
  const int sp = 1 + b.u8() % 3;
  static constexpr int64_t kGroups[] = {1, 1, 2, 3, 8, 16};
  static constexpr int64_t kPerGroup[] = {1, 1, 1, 2, 6, 8, 9};
  g.groups = kGroups[b.u8() % 6];
  g.cin = g.groups * kPerGroup[b.u8() % 7];
  g.cout = g.groups * kPerGroup[b.u8() % 7];
  g.n = b.flip(8) ? 0 : b.range(1, 2);
  g.transposed = b.flip();
  bool huge = false;
  for (int i = 0; i < sp; ++i) {
    // A huge dim only with a broadcast view of it (decided below).
    const bool big = b.flip(8);
    huge = huge || big;
    g.in.push_back(big ? int64_t{1} << (20 + b.u8() % 40) : b.range(1, 7));
    g.kernel.push_back(b.range(1, 3));
    g.stride.push_back(extreme(b, 1));
    g.dilation.push_back(extreme(b, 1));
    g.pad_before.push_back(extreme(b, 0));
    g.pad_after.push_back(b.flip() ? g.pad_before.back() : extreme(b, 0));
    g.output_padding.push_back(g.transposed ? std::min<int64_t>(b.range(0, 2), g.stride.back() - 1) : 0);
  }
  if (b.flip(4)) {  // small paddings are the common case
    for (int i = 0; i < sp; ++i) g.pad_before[i] = g.pad_after[i] = b.range(0, 2);
  }
  // Two dtype bytes pick an 8-bit float, whose one use (the transposed
  // gradInput, groups 1, no outputPadding, no gradWeight) the geometry is
  // bent to: f8_fwd_direct runs every such problem. (252 and 255 meant f32
  // before; no stored input has them there, so every one still decodes to
  // the problem it was found with.)
  const uint8_t type_byte = b.u8();
  const bool fp8 = type_byte == 252 || type_byte == 255;
  const DataType dt = fp8 ? (type_byte == 255 ? DataType::hif8 : DataType::f8e4m3) : kTypes[type_byte % 3];
  if (fp8) {
    g.transposed = true;
    g.cin /= g.groups;
    g.cout /= g.groups;
    g.groups = 1;
    std::fill(g.output_padding.begin(), g.output_padding.end(), 0);
  }
  g.dtype = dt;
  const uint8_t m = b.u8() % 7 + 1;
  g.mask = {(m & 1) != 0 || fp8, (m & 2) != 0 && !fp8, (m & 4) != 0};
  std::optional<Problem> made = test::make_problem(g);
  if (!made) return;  // the output shape itself overflows: validation's business (fuzz_capi)
  Problem p = *made;
  if (b.flip(4)) p.math_mode = static_cast<MathMode>(b.u8() % 4);
  for (TensorDesc* d : {&p.grad_output, &p.input, &p.weight}) set_view(*d, b, false);
  if (huge) {
    // The huge image is the input or the gradOutput: view it broadcast.
    for (TensorDesc* d : {&p.grad_output, &p.input}) {
      std::fill(d->strides.begin(), d->strides.end(), 0);
      d->offset = 0;
      d->storage_elements = storage_of(*d);
    }
  }
  TensorDesc* outs[3] = {&p.grad_input, &p.grad_weight, &p.grad_bias};
  for (int i = 0; i < 3; ++i) {
    if (!p.output_mask[i]) continue;
    const auto gi = static_cast<Gradient>(i);
    outs[i]->dims = p.gradient_dims(gi);
    outs[i]->dtype = p.gradient_dtype(gi);
    set_view(*outs[i], b, true);
  }

  auto plan = Plan::create(p);
  if (!plan) {
    const Error& e = plan.error();
    CONVBWD_FUZZ_CHECK(e.status == Status::invalid_parameter || e.status == Status::null_pointer,
                       p.descriptor() + ": status " + std::to_string(static_cast<int>(e.status)));
    CONVBWD_FUZZ_CHECK(!e.message.empty(), p.descriptor());
    return;
  }
  // Execute only what fits in memory and what the reference checks quickly.
  auto spec = detail::validate(p);
  CONVBWD_FUZZ_CHECK(spec.ok(), "planned but does not validate: " + p.descriptor());
  double bytes = static_cast<double>(plan->workspace_size());
  for (const TensorDesc* d : {&p.grad_output, &p.input, &p.weight, &p.grad_input, &p.grad_weight, &p.grad_bias})
    bytes += static_cast<double>(std::max<int64_t>(d->storage_elements, 0)) * static_cast<double>(size_of(d->dtype));
  if (bytes > 16e6 || oracle_steps(spec->geo) > kMaxOracleSteps) return;
  for (const TensorDesc* d : {&p.grad_output, &p.input, &p.weight})
    if (d->storage_elements < 0) return;

  Buffer go = alloc(p.grad_output), in = alloc(p.input), w = alloc(p.weight);
  std::mt19937_64 rng(b.u8());
  std::uniform_int_distribution<int> ints(-3, 3);
  for (Buffer* buf : {&go, &in, &w}) {
    const DataType t = buf == &go ? p.grad_output.dtype : buf == &in ? p.input.dtype : p.weight.dtype;
    for (size_t i = 0; i < buf->size / size_of(t); ++i) detail::store_from_float(buf->bytes.get(), static_cast<int64_t>(i), t, static_cast<float>(ints(rng)));
  }
  const std::vector<unsigned char> before[3] = {{go.bytes.get(), go.bytes.get() + go.size},
                                                {in.bytes.get(), in.bytes.get() + in.size},
                                                {w.bytes.get(), w.bytes.get() + w.size}};
  Buffer out[3];
  for (int i = 0; i < 3; ++i)
    if (p.output_mask[i]) out[i] = alloc(*outs[i]);
  // Exactly the bytes asked for, 16-byte aligned as new[] gives.
  std::unique_ptr<unsigned char[]> ws(plan->workspace_size() ? new unsigned char[plan->workspace_size()] : nullptr);
  Buffers bufs{go.bytes.get(), in.bytes.get(), w.bytes.get(), out[0].bytes.get(), out[1].bytes.get(),
               out[2].bytes.get()};
  const Error e = plan->execute(bufs, ws.get(), plan->workspace_size());
  CONVBWD_FUZZ_CHECK(!e, p.descriptor() + ": execute failed: " + e.message);
  CONVBWD_FUZZ_CHECK(before[0] == std::vector<unsigned char>(go.bytes.get(), go.bytes.get() + go.size) &&
                         before[1] == std::vector<unsigned char>(in.bytes.get(), in.bytes.get() + in.size) &&
                         before[2] == std::vector<unsigned char>(w.bytes.get(), w.bytes.get() + w.size),
                     p.descriptor() + ": an input was written");
  const std::string diff = test::compare_with_reference(p, bufs);
  CONVBWD_FUZZ_CHECK(diff.empty(), diff + " (stride/padding/dilation of " + p.descriptor() + ")");
}

}  // namespace
}  // namespace convbwd::fuzz

extern "C" int convbwd_fuzz_plan(const uint8_t* data, size_t size) {
  convbwd::fuzz::Bytes b(data, size);
  convbwd::fuzz::run(b);
  return 0;
}
