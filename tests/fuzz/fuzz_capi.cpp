// Fuzz target: aclnnConvolutionBackward through the whole C API.
//
// The input first builds a VALID call (rank, groups, channels, kernel,
// stride, padding, dilation, outputPadding, dtypes, cubeMathType, mask,
// strided views with holes and offsets, storage shapes, formats), then applies
// up to three mutations that make it hostile: dims that are zero, negative,
// huge or whose products overflow; strides and offsets that are negative,
// overlapping or reach out of storage; dtype and format values out of range;
// mask and array lengths; groups; parameter values; null pointers in every
// position; workspaces that are too small or null; ranks that disagree.
//
// The promises checked:
//   - an unmutated call is accepted (no false rejections);
//   - every rejection is 161001 or 161002 with a message, and a null pointer
//     in a required position is 161001 whatever else is wrong;
//   - a workspace too small is 161002, a null one 161001, and the executor
//     stays the caller's;
//   - an accepted call on a small problem (< 1e5 multiply-adds) runs, and its
//     outputs equal the fp64 reference within tests/util's tolerance, with no
//     byte written outside the output views and no input byte changed;
//   - nothing leaks, crashes, or touches memory outside the buffers: every
//     buffer is allocated with exactly the bytes its claimed storage holds,
//     so AddressSanitizer sees any stray access.
#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "aclnn/aclnn_base.h"
#include "aclnnop/aclnn_convolution_backward.h"
#include "fuzz_common.hpp"
#include "numeric/float_formats.hpp"
#include "problem/checked.hpp"
#include "problem/spec.hpp"
#include "util/guarded.hpp"

namespace convbwd::fuzz {
namespace {

using test::storage_extent;
using test::view_index;

enum Slot { kGradOutput, kInput, kWeight, kGradInput, kGradWeight, kGradBias, kSlots };
const char* const kSlotName[kSlots] = {"gradOutput", "input", "weight", "gradInput", "gradWeight", "gradBias"};

struct TensorArgs {
  bool handle = true;        // false: pass a null aclTensor*
  bool null_dims = false;    // aclCreateTensor(nullptr, count > 0): it must fail cleanly
  bool null_data = false;    // a live handle whose data pointer is null
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;  // one per dim
  bool null_strides = false;     // contiguous
  int64_t offset = 0;
  int32_t dtype = ACL_FLOAT;
  int32_t format = ACL_FORMAT_ND;
  std::vector<int64_t> storage;
};

struct IntArray {
  std::vector<int64_t> v;
  bool null = false;
};

struct Call {
  TensorArgs t[kSlots];
  IntArray bias, stride, pad, dil, outpad;
  std::vector<uint8_t> mask = {1, 1, 1};
  bool null_mask = false;
  bool transposed = false;
  int groups = 1;
  int8_t math = 0;
  bool null_ws_size = false, null_executor = false;
  int ws_mode = 0;  // 0 exact, 1 one byte short, 2 null pointer, 3 generous
  int stream_mode = 0;  // 0 default stream, 1 own stream, 2 own stream destroyed while the work is pending
  int mutations = 0;
  bool required_null = false;  // a required pointer is null: 161001 whatever else is wrong
};

size_t elem_size(int32_t dtype) {
  switch (dtype) {
    case ACL_FLOAT: return 4;
    case ACL_FLOAT16:
    case ACL_BF16: return 2;
    case ACL_HIFLOAT8:
    case ACL_FLOAT8_E4M3FN: return 1;
    default: return 0;
  }
}

std::optional<DataType> core_dtype(int32_t dtype) {
  switch (dtype) {
    case ACL_FLOAT: return DataType::f32;
    case ACL_FLOAT16: return DataType::f16;
    case ACL_BF16: return DataType::bf16;
    case ACL_HIFLOAT8: return DataType::hif8;
    case ACL_FLOAT8_E4M3FN: return DataType::f8e4m3;
    default: return std::nullopt;
  }
}

int32_t rank_format(size_t rank) {
  return rank == 3 ? ACL_FORMAT_NCL : rank == 4 ? ACL_FORMAT_NCHW : rank == 5 ? ACL_FORMAT_NCDHW : ACL_FORMAT_ND;
}

// Strides, offset, storage and format of a valid view of t.dims.
void lay_out(Bytes& in, TensorArgs& t) {
  const size_t rank = t.dims.size();
  const int64_t mode = in.range(0, 3);  // contiguous implicit, explicit, permuted, permuted with holes
  std::vector<size_t> order(rank);
  for (size_t i = 0; i < rank; ++i) order[i] = i;
  if (mode >= 2)
    for (size_t i = rank; i > 1; --i) std::swap(order[i - 1], order[static_cast<size_t>(in.range(0, static_cast<int64_t>(i) - 1))]);
  t.strides.assign(rank, 1);
  int64_t running = 1;
  for (size_t j = rank; j-- > 0;) {
    t.strides[order[j]] = running;
    running *= std::max<int64_t>(t.dims[order[j]], 1) + (mode == 3 ? in.range(0, 2) : 0);
  }
  t.null_strides = mode == 0;
  t.offset = mode == 3 ? in.range(0, 4) : 0;
  int64_t reach = t.offset;
  for (size_t i = 0; i < rank; ++i) reach += (std::max<int64_t>(t.dims[i], 1) - 1) * t.strides[i];
  if (mode <= 1 && in.flip()) {
    t.storage = t.dims;  // CANN's usual call: storage shape = view shape
    for (int64_t& d : t.storage) d = std::max<int64_t>(d, 1);
  } else {
    t.storage = {reach + 1 + (in.flip(4) ? in.range(0, 3) : 0)};
  }
  t.format = in.flip() ? ACL_FORMAT_ND : rank_format(rank);
}

Call generate(Bytes& in) {
  Call c;
  const int sp = static_cast<int>(in.range(1, 3));
  c.transposed = in.flip();
  const int64_t g = in.range(1, 3);
  const int64_t n = in.range(0, 7) == 0 ? 0 : in.range(1, 3);
  const int64_t xc = in.range(0, 9) == 0 ? 0 : in.range(1, 3);  // input channels per group
  const int64_t yc = in.range(0, 9) == 0 ? 0 : in.range(1, 3);  // gradOutput channels per group
  const int dt_kind = static_cast<int>(in.range(0, 5));
  const bool eight_bit = dt_kind == 5 && c.transposed;
  c.groups = eight_bit ? 1 : static_cast<int>(g);
  const bool asym = sp == 2 && in.flip(3);
  std::vector<int64_t> xs, ys, ks, pb, pa;
  for (int d = 0; d < sp; ++d) {
    const int64_t k = in.range(1, 3), s = in.range(1, 3), dil = in.range(1, 2);
    int64_t p0 = in.range(0, 2), p1 = asym ? in.range(0, 2) : p0;
    const int64_t op = c.transposed && !eight_bit ? in.range(0, s - 1) : 0;
    int64_t x = in.range(1, sp == 3 ? 4 : 6);
    const int64_t span = dil * (k - 1);
    int64_t out;
    if (!c.transposed) {
      if (x + p0 + p1 - span - 1 < 0) x = span + 1;
      out = (x + p0 + p1 - span - 1) / s + 1;
    } else {
      out = (x - 1) * s - p0 - p1 + span + op + 1;
      if (out < 1) {
        p0 = p1 = 0;
        out = (x - 1) * s + span + op + 1;
      }
    }
    xs.push_back(x);
    ys.push_back(out);
    ks.push_back(k);
    pb.push_back(p0);
    pa.push_back(p1);
    c.stride.v.push_back(s);
    c.dil.v.push_back(dil);
    c.outpad.v.push_back(op);
  }
  if (asym)
    c.pad.v = {pb[0], pa[0], pb[1], pa[1]};
  else
    c.pad.v = pb;
  const int64_t cin = c.groups * xc, cout = c.groups * yc;
  auto with = [](std::vector<int64_t> head, const std::vector<int64_t>& tail) {
    head.insert(head.end(), tail.begin(), tail.end());
    return head;
  };
  c.t[kInput].dims = with({n, cin}, xs);
  c.t[kGradOutput].dims = with({n, cout}, ys);
  c.t[kWeight].dims = c.transposed ? with({cin, yc}, ks) : with({cout, xc}, ks);
  c.bias.v = {cout};

  static constexpr int32_t kFloat[3] = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16};
  int32_t dts[3];
  for (int i = 0; i < 3; ++i) dts[i] = kFloat[dt_kind < 3 ? dt_kind : in.range(0, 2)];
  if (eight_bit) dts[0] = dts[1] = dts[2] = in.flip() ? ACL_HIFLOAT8 : ACL_FLOAT8_E4M3FN;
  c.t[kGradOutput].dtype = dts[0];
  c.t[kInput].dtype = dts[1];
  c.t[kWeight].dtype = dts[2];
  c.math = static_cast<int8_t>(in.range(0, 3));
  const int64_t m = in.range(0, 7);
  c.mask = {static_cast<uint8_t>(m & 1), static_cast<uint8_t>((m >> 1) & 1), static_cast<uint8_t>((m >> 2) & 1)};
  if (eight_bit) c.mask = {1, 0, c.mask[2]};

  c.t[kGradInput].dims = c.t[kInput].dims;
  c.t[kGradInput].dtype = dts[1];
  c.t[kGradWeight].dims = c.t[kWeight].dims;
  c.t[kGradWeight].dtype = dts[2];
  c.t[kGradBias].dims = {cout};
  c.t[kGradBias].dtype = eight_bit ? ACL_FLOAT : dts[0];
  for (TensorArgs& t : c.t) lay_out(in, t);
  c.ws_mode = in.flip(4) ? 3 : 0;
  // Mostly the default stream: creating a stream starts a thread, which is
  // slow under the sanitizers; one in four inputs still gets its own.
  const int64_t sm = in.range(0, 7);
  c.stream_mode = sm < 6 ? 0 : static_cast<int>(sm - 5);
  return c;
}

IntArray& array(Call& c, int64_t which) {
  IntArray* a[5] = {&c.bias, &c.stride, &c.pad, &c.dil, &c.outpad};
  return *a[which];
}

void mutate(Bytes& in, Call& c) {
  ++c.mutations;
  TensorArgs& t = c.t[in.range(0, kSlots - 1)];
  const auto pick = [&](size_t size) { return static_cast<size_t>(in.range(0, std::max<int64_t>(static_cast<int64_t>(size), 1) - 1)); };
  switch (in.range(0, 15)) {
    case 0:
      if (!t.dims.empty()) t.dims[pick(t.dims.size())] = in.hostile();
      break;
    case 1:
      if (!t.strides.empty()) t.strides[pick(t.strides.size())] = in.hostile();
      t.null_strides = false;
      break;
    case 2: t.offset = in.hostile(); break;
    case 3:
      if (in.flip() && !t.storage.empty())
        t.storage[pick(t.storage.size())] = in.hostile();
      else if (in.flip() && t.storage.size() == 1 && t.storage[0] > 0)
        t.storage[0] -= 1;  // the view now reaches one element past its storage
      else
        t.storage.resize(static_cast<size_t>(in.range(0, 3)), in.range(0, 3));
      break;
    case 4: t.dtype = in.flip() ? static_cast<int32_t>(in.range(-2, 40)) : static_cast<int32_t>(in.u64()); break;
    case 5: t.format = in.flip() ? static_cast<int32_t>(in.range(-2, 50)) : static_cast<int32_t>(in.u64()); break;
    case 6: c.mask.resize(static_cast<size_t>(in.range(0, 5)), 1); break;
    case 7: c.groups = static_cast<int>(in.hostile()); break;
    case 8: {
      IntArray& a = array(c, in.range(0, 4));
      if (!a.v.empty()) a.v[pick(a.v.size())] = in.hostile();
      break;
    }
    case 9: array(c, in.range(0, 4)).v.resize(static_cast<size_t>(in.range(0, 6)), in.range(0, 3)); break;
    case 10: {  // a null pointer, in one of every position there is
      const int64_t pos = in.range(0, 16);
      if (pos < kSlots) {
        c.t[pos].handle = false;
        c.required_null |= pos < 3;
      } else if (pos < kSlots + 5) {
        array(c, pos - kSlots).null = true;
        c.required_null |= pos > kSlots;  // stride, padding, dilation, outputPadding; biasSizes only if used
      } else if (pos == 11) {
        c.null_mask = c.required_null = true;
      } else if (pos == 12) {
        c.null_ws_size = c.required_null = true;
      } else if (pos == 13) {
        c.null_executor = c.required_null = true;
      } else if (pos == 14) {
        const int64_t s = in.range(0, kSlots - 1);
        c.t[s].null_dims = true;
        c.required_null |= s < 3 && !c.t[s].dims.empty();
      } else {
        t.null_data = true;
      }
      break;
    }
    case 11: c.ws_mode = static_cast<int>(in.range(1, 2)); break;
    case 12: c.transposed = !c.transposed; break;
    case 13: c.math = static_cast<int8_t>(in.u8()); break;
    case 14:
      if (in.flip() && !t.dims.empty()) {
        t.dims.pop_back();
        t.strides.pop_back();
      } else {
        t.dims.push_back(in.range(0, 4));
        t.strides.push_back(in.range(0, 4));
      }
      break;
    case 15:  // an output (or input) view overlapping itself
      if (t.strides.size() >= 2) t.strides[pick(t.strides.size())] = t.strides[pick(t.strides.size())];
      t.null_strides = false;
      break;
  }
}

// The problem the call describes, built independently of the C API's own
// conversion, so that a mismatch between the two shows up as a wrong result.
std::optional<Problem> core_problem(const Call& c) {
  auto desc = [](const TensorArgs& t) -> std::optional<TensorDesc> {
    const auto dt = core_dtype(t.dtype);
    if (!dt) return std::nullopt;
    TensorDesc d;
    d.dtype = *dt;
    d.dims = t.dims;
    if (!t.null_strides) d.strides = t.strides;
    d.offset = t.offset;
    detail::Checked storage(1);
    for (int64_t s : t.storage) storage = storage * s;
    d.storage_elements = storage.ok() ? storage.value() : -1;
    return d;
  };
  if (c.mask.size() != 3) return std::nullopt;  // the C API rejects it before the core sees it
  Problem p;
  TensorDesc* slots[kSlots] = {&p.grad_output, &p.input, &p.weight, &p.grad_input, &p.grad_weight, &p.grad_bias};
  for (int i = 0; i < kSlots; ++i) {
    if (i >= 3 && !c.mask[static_cast<size_t>(i - 3)]) continue;
    auto d = desc(c.t[i]);
    if (!d) return std::nullopt;
    *slots[i] = *d;
  }
  p.stride = c.stride.v;
  p.dilation = c.dil.v;
  p.output_padding = c.outpad.v;
  if (c.t[kInput].dims.size() == 4 && c.pad.v.size() == 4) {
    p.padding_before = {c.pad.v[0], c.pad.v[2]};
    p.padding_after = {c.pad.v[1], c.pad.v[3]};
  } else {
    p.padding_before = c.pad.v;
  }
  p.transposed = c.transposed;
  p.groups = c.groups;
  p.output_mask = {c.mask[0] != 0, c.mask[1] != 0, c.mask[2] != 0};
  if (c.mask[2]) p.bias_sizes = c.bias.v;
  p.math_mode = static_cast<MathMode>(c.math);
  return p;
}

// One tensor's buffer: exactly the bytes its claimed storage holds, or, when
// that is more than a test can allocate, exactly up to the view's reach.
struct Buffer {
  std::unique_ptr<unsigned char[]> bytes;
  int64_t elements = 0;
  size_t es = 4;
};

constexpr int64_t kMaxBufferBytes = int64_t{1} << 20;

Buffer allocate(const TensorArgs& t) {
  Buffer b;
  b.es = elem_size(t.dtype) ? elem_size(t.dtype) : 4;
  const auto es = static_cast<int64_t>(b.es);
  detail::Checked claimed(1);
  for (int64_t s : t.storage) claimed = claimed * s;
  detail::Checked reach(t.offset), running(1);
  bool empty = false;
  for (size_t i = t.dims.size(); i-- > 0;) {
    empty |= t.dims[i] == 0;
    // Null strides: contiguous, as aclCreateTensor fills them in.
    const detail::Checked stride = t.null_strides ? running : detail::Checked(t.strides[i]);
    reach = reach + (detail::Checked(t.dims[i]) - 1) * stride;
    running = running * std::max<int64_t>(t.dims[i], 1);
  }
  if (claimed.ok() && claimed.value() >= 0 && claimed.value() <= kMaxBufferBytes / es)
    b.elements = claimed.value();
  else if (!empty && reach.ok() && reach.value() >= 0 && reach.value() < kMaxBufferBytes / es)
    b.elements = reach.value() + 1;
  b.bytes.reset(new unsigned char[static_cast<size_t>(b.elements) * b.es]);
  return b;
}


std::string describe(const Call& c) {
  std::string s = c.transposed ? "transposed" : "normal";
  s += " groups " + std::to_string(c.groups) + " mask " + std::to_string(c.mask.size()) + ":";
  for (uint8_t m : c.mask) s += m ? '1' : '0';
  for (int i = 0; i < kSlots; ++i)
    s += std::string(" ") + kSlotName[i] + detail::format_dims(c.t[i].dims) + "/" +
         (c.t[i].null_strides ? std::string("contig") : detail::format_dims(c.t[i].strides)) + "+" +
         std::to_string(c.t[i].offset) + " dt" + std::to_string(c.t[i].dtype);
  return s;
}

constexpr unsigned char kPoisonByte = test::kPoison;

// Outcome counts, printed at exit when CONVBWD_FUZZ_STATS is set: a fuzzer
// that only ever sees rejections tests nothing, so this is worth watching.
struct Stats {
  long rejected = 0, accepted = 0, executed = 0, phase2_rejected = 0;
  ~Stats() {
    if (std::getenv("CONVBWD_FUZZ_STATS"))
      std::fprintf(stderr, "fuzz_capi: %ld rejected, %ld accepted, %ld executed and checked, %ld phase-two rejections\n",
                   rejected, accepted, executed, phase2_rejected);
  }
};
Stats stats;

void run(Bytes& in, Call& c) {
  const std::string what = describe(c);
  // Buffers first: data pointers are bound in phase one.
  Buffer buf[kSlots];
  std::mt19937_64 rng(in.u64());
  std::uniform_real_distribution<double> value(-2.0, 2.0);
  for (int i = 0; i < kSlots; ++i) {
    if (!c.t[i].handle) continue;
    buf[i] = allocate(c.t[i]);
    const size_t bytes = static_cast<size_t>(buf[i].elements) * buf[i].es;
    if (i >= 3) {
      std::memset(buf[i].bytes.get(), kPoisonByte, bytes);
      continue;
    }
    // Inputs: NaN everywhere, so a read outside the view shows in the result;
    // then finite values in every element the view covers.
    // All-ones bytes are a NaN in fp32, fp16, bf16 and E4M3FN; HiFloat8's
    // one NaN is 0x80.
    std::memset(buf[i].bytes.get(), c.t[i].dtype == ACL_HIFLOAT8 ? 0x80 : 0xff, bytes);
  }
  const std::optional<Problem> problem = core_problem(c);
  std::optional<detail::Spec> spec;
  if (problem) {
    auto s = detail::validate(*problem);
    if (s) spec = std::move(s.value());
  }
  if (spec) {  // fill the operand views (reads stay inside the buffers)
    const detail::View* views[3] = {&spec->grad_output, &spec->input, &spec->weight};
    for (int i = 0; i < 3; ++i)
      if (c.t[i].handle && storage_extent(*views[i]) <= buf[i].elements)
        for (int64_t j = 0, n = views[i]->elements(); j < n; ++j)
          detail::store_from_double(buf[i].bytes.get(), view_index(*views[i], j), views[i]->dtype, value(rng));
  }
  std::vector<unsigned char> input_copy[3];
  for (int i = 0; i < 3; ++i)
    if (c.t[i].handle)
      input_copy[i].assign(buf[i].bytes.get(), buf[i].bytes.get() + buf[i].elements * static_cast<int64_t>(buf[i].es));

  // Handles.
  aclTensor* t[kSlots] = {};
  for (int i = 0; i < kSlots; ++i) {
    const TensorArgs& a = c.t[i];
    if (!a.handle) continue;
    t[i] = aclCreateTensor(a.null_dims ? nullptr : a.dims.data(), a.dims.size(), static_cast<aclDataType>(a.dtype),
                           a.null_strides ? nullptr : a.strides.data(), a.offset, static_cast<aclFormat>(a.format),
                           a.storage.data(), a.storage.size(), a.null_data ? nullptr : buf[i].bytes.get());
    if (t[i] == nullptr) {
      CONVBWD_FUZZ_CHECK(a.null_dims && !a.dims.empty(), "aclCreateTensor failed for " + std::string(kSlotName[i]) +
                                                               ": " + aclGetRecentErrMsg());
      CONVBWD_FUZZ_CHECK(*aclGetRecentErrMsg() != '\0', "aclCreateTensor failed without a message");
    }
  }
  aclIntArray* arrays[5] = {};
  for (int i = 0; i < 5; ++i) {
    const IntArray& a = array(c, i);
    if (!a.null) arrays[i] = aclCreateIntArray(a.v.data(), a.v.size());
    CONVBWD_FUZZ_CHECK(a.null || arrays[i] != nullptr, "aclCreateIntArray failed");
  }
  bool mask_values[8] = {};
  for (size_t i = 0; i < c.mask.size(); ++i) mask_values[i] = c.mask[i] != 0;
  aclBoolArray* mask = c.null_mask ? nullptr : aclCreateBoolArray(mask_values, c.mask.size());
  uint64_t ws_size = 12345;
  aclOpExecutor* exec = nullptr;
  const aclnnStatus st = aclnnConvolutionBackwardGetWorkspaceSize(
      t[kGradOutput], t[kInput], t[kWeight], arrays[0], arrays[1], arrays[2], arrays[3], c.transposed, arrays[4],
      c.groups, mask, c.math, t[kGradInput], t[kGradWeight], t[kGradBias], c.null_ws_size ? nullptr : &ws_size,
      c.null_executor ? nullptr : &exec);
  const std::string msg = aclGetRecentErrMsg();

  auto cleanup = [&] {
    for (aclTensor* x : t) CONVBWD_FUZZ_CHECK(aclDestroyTensor(x) == ACLNN_SUCCESS, "aclDestroyTensor");
    for (aclIntArray* a : arrays) CONVBWD_FUZZ_CHECK(aclDestroyIntArray(a) == ACLNN_SUCCESS, "aclDestroyIntArray");
    CONVBWD_FUZZ_CHECK(aclDestroyBoolArray(mask) == ACLNN_SUCCESS, "aclDestroyBoolArray");
  };

  if (st != ACLNN_SUCCESS) {
    CONVBWD_FUZZ_CHECK(st == ACLNN_ERR_PARAM_NULLPTR || st == ACLNN_ERR_PARAM_INVALID,
                       "status " + std::to_string(st) + " (" + msg + ") for " + what);
    CONVBWD_FUZZ_CHECK(!msg.empty(), "rejected with status " + std::to_string(st) + " but no message: " + what);
    CONVBWD_FUZZ_CHECK(!c.required_null || st == ACLNN_ERR_PARAM_NULLPTR,
                       "a required pointer is null but the status is " + std::to_string(st) + " (" + msg + ")");
    CONVBWD_FUZZ_CHECK(c.mutations > 0, "a valid call was rejected: " + msg + " -- " + what);
    CONVBWD_FUZZ_CHECK(exec == nullptr, "an executor was returned with an error status");
    ++stats.rejected;
    cleanup();
    return;
  }
  CONVBWD_FUZZ_CHECK(!c.required_null, "a required pointer was null but the call was accepted: " + what);
  CONVBWD_FUZZ_CHECK(exec != nullptr, "accepted without an executor");
  ++stats.accepted;
  CONVBWD_FUZZ_CHECK(spec.has_value(), "the C API accepted a call whose problem the core rejects: " +
                                           (problem ? detail::validate(*problem).error().message : "unknown dtype") +
                                           " -- " + what);

  // Run only what is small: the buffers must cover every bound view (they do
  // when the storage was small enough to allocate) and the work must be cheap.
  const detail::Geometry& g = spec->geo;
  bool runnable = oracle_steps(g) <= kMaxOracleSteps && ws_size <= (uint64_t{1} << 26);
  const detail::View* views[kSlots] = {&spec->grad_output, &spec->input, &spec->weight,
                                       &spec->grads[0],    &spec->grads[1], &spec->grads[2]};
  for (int i = 0; i < kSlots; ++i) {
    const bool bound = i < 3 || c.mask[static_cast<size_t>(i - 3)];
    if (bound && storage_extent(*views[i]) > buf[i].elements) {
      // Accepted views stay inside their claimed storage: a small claim
      // was allocated in full, so only a huge one can get here.
      detail::Checked claimed(1);
      for (int64_t s : c.t[i].storage) claimed = claimed * s;
      CONVBWD_FUZZ_CHECK(!claimed.ok() || claimed.value() > kMaxBufferBytes / static_cast<int64_t>(buf[i].es),
                         std::string(kSlotName[i]) + " view reaches element " +
                             std::to_string(storage_extent(*views[i]) - 1) + " beyond its storage of " + std::to_string(buf[i].elements) + " elements: " + what);
      runnable = false;
    }
  }
  if (!runnable) {
    CONVBWD_FUZZ_CHECK(aclDestroyAclOpExecutor(exec) == ACLNN_SUCCESS, "aclDestroyAclOpExecutor");
    cleanup();
    return;
  }

  // Phase two, with the workspace as the input says.
  std::unique_ptr<unsigned char[]> ws(new unsigned char[static_cast<size_t>(ws_size) + (c.ws_mode == 3 ? 64 : 0)]);
  void* ws_ptr = ws.get();
  uint64_t ws_given = ws_size + (c.ws_mode == 3 ? 64 : 0);
  if (c.ws_mode == 1 && ws_size > 0) ws_given = ws_size - 1;
  if (c.ws_mode == 2 && ws_size > 0) ws_ptr = nullptr;
  aclrtStream stream = nullptr;
  if (c.stream_mode > 0) CONVBWD_FUZZ_CHECK(aclrtCreateStream(&stream) == ACL_SUCCESS, "aclrtCreateStream");
  const aclnnStatus st2 = aclnnConvolutionBackward(ws_ptr, ws_given, exec, stream);
  bool null_data = false;
  for (const TensorArgs& a : c.t) null_data |= a.handle && a.null_data;
  if (c.ws_mode == 1 && ws_size > 0) {
    CONVBWD_FUZZ_CHECK(st2 == ACLNN_ERR_PARAM_INVALID, "a workspace one byte short gave " + std::to_string(st2));
  } else if (c.ws_mode == 2 && ws_size > 0) {
    CONVBWD_FUZZ_CHECK(st2 == ACLNN_ERR_PARAM_NULLPTR, "a null workspace gave " + std::to_string(st2));
  } else if (null_data) {
    // Phase two checks the buffers before it enqueues: a null one the plan
    // needs is refused there (an unneeded one is fine).
    CONVBWD_FUZZ_CHECK(st2 == ACLNN_SUCCESS || st2 == ACLNN_ERR_PARAM_NULLPTR,
                       "a null data pointer gave " + std::to_string(st2) + ": " + aclGetRecentErrMsg());
  } else {
    CONVBWD_FUZZ_CHECK(st2 == ACLNN_SUCCESS, "aclnnConvolutionBackward: " + std::string(aclGetRecentErrMsg()));
  }
  if (st2 != ACLNN_SUCCESS) {
    CONVBWD_FUZZ_CHECK(*aclGetRecentErrMsg() != '\0', "phase two failed without a message");
    ++stats.phase2_rejected;
    // The executor is still the caller's.
    CONVBWD_FUZZ_CHECK(aclDestroyAclOpExecutor(exec) == ACLNN_SUCCESS, "the executor was not left to the caller");
    if (stream) CONVBWD_FUZZ_CHECK(aclrtDestroyStream(stream) == ACL_SUCCESS, "aclrtDestroyStream");
    cleanup();
    return;
  }
  aclError synced = ACL_SUCCESS;
  if (c.stream_mode == 2) {
    // Destroyed while the work may still be pending: the stream drains first.
    CONVBWD_FUZZ_CHECK(aclrtDestroyStream(stream) == ACL_SUCCESS, "aclrtDestroyStream with pending work");
  } else {
    synced = aclrtSynchronizeStream(stream);
    if (stream) CONVBWD_FUZZ_CHECK(aclrtDestroyStream(stream) == ACL_SUCCESS, "aclrtDestroyStream");
  }
  cleanup();
  if (null_data) {
    // Accepted: the null buffer was not needed, or a check missed it and the
    // run fails with a message; it must not crash.
    if (synced != ACL_SUCCESS) CONVBWD_FUZZ_CHECK(*aclGetRecentErrMsg() != '\0', "sync failed without a message");
    return;
  }
  CONVBWD_FUZZ_CHECK(synced == ACL_SUCCESS, "the run failed: " + std::string(aclGetRecentErrMsg()) + " -- " + what);

  // The oracle.
  for (int i = 0; i < 3; ++i)
    CONVBWD_FUZZ_CHECK(input_copy[i].empty() ||  // memcmp takes no null pointer, even for 0 bytes
                           std::memcmp(input_copy[i].data(), buf[i].bytes.get(), input_copy[i].size()) == 0,
                       std::string(kSlotName[i]) + " (an input) was written: " + what);
  for (int i = 3; i < kSlots; ++i) {
    if (!c.t[i].handle) continue;
    std::vector<bool> covered(static_cast<size_t>(buf[i].elements), false);
    if (c.mask[static_cast<size_t>(i - 3)])
      for (int64_t j = 0, n = views[i]->elements(); j < n; ++j) covered[static_cast<size_t>(view_index(*views[i], j))] = true;
    for (int64_t e = 0; e < buf[i].elements; ++e)
      if (!covered[static_cast<size_t>(e)])
        for (size_t k = 0; k < buf[i].es; ++k)
          CONVBWD_FUZZ_CHECK(buf[i].bytes[static_cast<size_t>(e) * buf[i].es + k] == kPoisonByte,
                             std::string(kSlotName[i]) + " storage element " + std::to_string(e) +
                                 " outside the view was written: " + what);
  }
  Buffers b{buf[0].bytes.get(), buf[1].bytes.get(), buf[2].bytes.get(),
            buf[3].bytes.get(), buf[4].bytes.get(), buf[5].bytes.get()};
  ++stats.executed;
  const std::string mismatch = test::compare_with_reference(*problem, b);
  CONVBWD_FUZZ_CHECK(mismatch.empty(), mismatch + " -- " + what);
}

}  // namespace
}  // namespace convbwd::fuzz

extern "C" int convbwd_fuzz_capi(const uint8_t* data, size_t size) {
  using namespace convbwd::fuzz;
  Bytes in(data, size);
  // Mostly one mutation or none; sometimes two or three.
  const uint8_t m = in.u8();
  const int mutations = m < 64 ? 0 : m < 192 ? 1 : m < 240 ? 2 : 3;
  Call c = generate(in);
  for (int i = 0; i < mutations; ++i) mutate(in, c);
  run(in, c);
  return 0;
}
