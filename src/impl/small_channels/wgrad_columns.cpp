// Weight gradient for very few image-side channels per group, as one GEMM
// over an im2col of x:
//
//   dW[g, k, col] = sum over images n, output pixels o of
//                   dy[n, g, k, o] * xcol[n, g, o, col]
//   xcol[n, g, o, (c, r)] = x[n, g, c, o*s - pad + r*d]   (0 in the padding)
//
// A tile is mr output channels k by nr columns (c, r) (the kernel config's
// gather shape: 8x32 on AVX-512, 6x16 on AVX2). The "gather" microkernel
// reads the mr k as mr dy channel planes (unit pixel stride in NCHW: fp32
// NCHW gradients are read in place; other dtypes, roundings and layouts go
// through a chunk-sized planar copy) and the columns as one nr-float row of
// the im2col block per pixel.
//
// The pixels are walked in chunks of one image; each task builds the im2col
// blocks of its own columns for the chunk (L1/L2 sized) and runs its tiles
// over it, accumulators resting in the workspace between chunks. Every tile
// sums over chunks in order, and within a chunk pixel by pixel: the bits do
// not depend on the thread count or on which task owns a tile.
//
// bf16 operands on a tier with bf16 pair kernels (KernelConfig::bf16) run
// them: both operands as pairs of neighbouring pixels, so each kernel step
// multiplies a pair and a chunk is half as many steps; an odd chunk (the
// last of an odd image) ends in a pair padded with zero on both operands.
// The im2col block is made from a bf16 image copy (copy_image_bf16) whose
// rows are pair words already, or else repacked from the fp32 one; planar
// dy is read in place, its words being the pairs (an odd chunk, or a run
// that zeroes NaN and Inf, copies them).
#include <cstring>
#include <memory>

#include "impl/nonfinite/nonfinite.hpp"
#include "impl/registry_entries.hpp"
#include "impl/small_channels/small_channels_common.hpp"
#include "runtime/thread_pool.hpp"

namespace convbwd::detail::small_channels {
namespace {

// Pixels per chunk: a 16-column im2col block of 32 KiB (L1), and enough
// steps (512 x 12 FMAs) that a tile's accumulator load and store are noise.
// 256, 512 and 1024 measured the same on the stem (CPU time, 1 thread).
constexpr int64_t kChunkPixels = 512;

class WgradKernel final : public OpKernel {
 public:
  WgradKernel(const OpSpec& op, const PlanContext& ctx) : op_(op), threads_(ctx.threads) {}

  // Plans the kernel for op_ (planning is not construction): false, with
  // the reason in *why, when it declines; the factory then drops it.
  bool init(const PlanContext& ctx, std::string* why) {
    const OpSpec& op = op_;
    const Geometry& g = op.geo;
    sp_ = space_of(g);
    const KernelConfig& cfg = gemm::kernels_for(ctx.isa);
    pairs_ = gemm::bf16_pairs(op, cfg);
    // Columns are (c, tap): 147 on the stem (wide tiles), 10 on wav2vec2's
    // first layer, which the narrow tiles fill twice as well (0.58x the AVX2
    // tier's speed in 8x32 tiles on a Zen 4; see gemm_family).
    const GemmKernels& family = gemm::gemm_family(cfg, pairs_, g.c * space_of(g).taps());
    kern_ = family.gather;
    mr_ = family.gather_rows();
    nr_ = family.nr;
    convert_ = cfg.to_channels_last;
    any_nonfinite_ = cfg.any_nonfinite;
    groups_ = g.groups;
    n_ = g.n;
    k_ = g.k;
    c_ = g.c;
    taps_ = sp_.taps();
    cols_ = c_ * taps_;
    cbn_ = ceil_div(cols_, nr_);
    kt_ = ceil_div(k_, mr_);
    tiles_ = groups_ * cbn_ * kt_;
    tasks_ = std::min<int64_t>(tiles_, std::max(threads_, 1));
    direct_ = op.a.dtype == DataType::f32 && op.rounding == OperandRounding::none && spatial_flat(op.a);
    dy_pairs_as_stored_ = pairs_ && op.a.dtype == DataType::bf16 && spatial_flat(op.a);
    // The phase-split fp32 image copy (copy_image). One group per layer, so
    // a task converts each image once: with groups, a task's tiles can span
    // several and would convert them again per chunk.
    u2_ = ceil_div(sp_.x[2], sp_.s[2]);
    copy_row_ = sp_.s[2] * u2_;
    x_copy_ = g.groups == 1 && spatial_flat(op.b);
    pixels_ = sp_.y_pixels();
    chunk_ = std::min(pixels_, kChunkPixels);

    // Sizes in checked arithmetic: hostile channel counts overflow them (a
    // fuzz finding: 2.2e17 output channels).
    const int64_t threads = std::max(threads_, 1);
    const int64_t budget_floats = workspace_budget(op, ctx) / 4;
    const Checked acc = (Checked(tiles_) * (mr_ * nr_)).rounded_up(16);
    // The dy copy is reserved even when dy is read in place: with NaN or Inf in
    // the operands (OpArgs::zero_nonfinite) it is copied with them zeroed.
    // Pairs: the pair copies of the im2col block and of the dy rows follow.
    pair_steps_ = pairs_ ? (chunk_ + 1) / 2 : 0;
    Checked slot = (Checked(chunk_) * nr_).rounded_up(16) * 2 + (Checked(k_) * chunk_).rounded_up(16) +
                   (Checked(kt_) * 2).rounded_up(16) + (Checked(pair_steps_) * nr_).rounded_up(16) +
                   (Checked(k_) * pair_steps_).rounded_up(16);
    // The image copy is a speed-up, not a need: a long signal whose copy per
    // thread would overflow the budget is read element by element instead.
    const Checked with_copy = slot + (Checked(c_) * sp_.x[0] * sp_.x[1] * copy_row_).rounded_up(16) +
                              (Checked(sp_.x[2])).rounded_up(16);
    const Checked with_copy_total = with_copy * threads + acc;
    x_copy_ = x_copy_ && with_copy_total.ok() && with_copy_total.value() <= budget_floats;
    if (x_copy_) slot = with_copy;
    const Checked total = slot * threads + acc;
    if (!total.ok() || total.value() > budget_floats) {
      *why = "accumulator tiles and per-thread chunk copies exceed the workspace budget";
      return false;
    }
    acc_floats_ = acc.value();
    slot_floats_ = slot.value();
    return true;
  }

  size_t workspace_bytes() const override {
    return static_cast<size_t>(acc_floats_ + slot_floats_ * std::max(threads_, 1)) * sizeof(float);
  }

  void run(const OpArgs& args, ThreadPool& pool) const override {
    float* const acc = reinterpret_cast<float*>(args.workspace);
    NonfiniteSeen seen;
    pool.parallel_for(tasks_, threads_, [&](int64_t t, int thread) {
      const NonfiniteFound f = compute(args, acc, acc + acc_floats_ + thread * slot_floats_, t);
      seen.add(f.a, f.b);
    });
    seen.report(args.found);
  }
  // It checks, in cache, every x and dy value its tiles multiply: the x
  // copies it makes and the dy rows of each chunk, copied or read in place
  // (execute's scan read all of dy again: ~10% of the wav2vec2 k10 layer).
  NonfiniteMode nonfinite_mode() const override { return NonfiniteMode::report; }

 private:
  // With pairs, the image copy holds bf16 bits (copy_image_bf16).
  bool words_copy() const { return x_copy_ && pairs_; }

  // Tasks own whole (group, column block) units when there are enough of
  // them, so no two tasks build the same im2col block; otherwise they split
  // the k-tiles of a unit.
  int64_t task_begin(int64_t t) const {
    const int64_t units = groups_ * cbn_;
    if (units >= tasks_) return units * t / tasks_ * kt_;
    return tiles_ * t / tasks_;
  }

  // xcol[p][nr] for pixels [pix0, pix0 + np) of image n, group g, columns of
  // block cb; zero in the padding and past the last column.
  // The source is the caller's x (strides xs, its dtype and the operand
  // rounding) or, from_copy, the task's phase-split copy of the image
  // (copy_image), where each run of a row is one contiguous copy.
  // Each column is built as a row of `rows` ([nr][chunk_]), stored
  // contiguously, and the converter's register transpose then moves the
  // rows into xcol: built in place, every element was a store nr floats
  // from the last (im2col was a third of the stem's weight gradient).
  // pair_dst (pairs_): the block goes to pair_dst as [pair][nr] instead,
  // each row's neighbouring pixels merged into words first (in dst's
  // space) and those transposed, so no fp32 block is transposed and then
  // repacked. From the bf16 image copy (copy_image_bf16) a column's row of
  // bf16 values is its row of words as it stands, so it is built there.
  void im2col(const void* x, const Strides& xs, DataType dtype, OperandRounding rounding, bool from_copy, int64_t n,
              int64_t g, int64_t cb, int64_t pix0, int64_t np, float* dst, float* rows, uint32_t* pair_dst,
              bool zero_nonfinite) const {
    const int64_t steps = (np + 1) / 2;
    uint32_t* const words = reinterpret_cast<uint32_t*>(dst);  // [nr][steps]
    if (words_copy()) {
      auto* const halves = reinterpret_cast<uint16_t*>(words);
      column_rows(static_cast<const uint16_t*>(x), xs, DataType::bf16, rounding, true, n, g, cb, pix0, np, halves,
                  2 * steps, false);
      if (np % 2)
        for (int64_t j = 0; j < nr_; ++j) halves[j * 2 * steps + np] = 0;  // the last pair's high half
    } else {
      column_rows(x, xs, dtype, rounding, from_copy, n, g, cb, pix0, np, rows, chunk_, zero_nonfinite);
      if (pair_dst == nullptr) {
        convert_(rows, DataType::f32, OperandRounding::none, 0, chunk_, 1, nr_, np, dst, nr_);
        return;
      }
      for (int64_t j = 0; j < nr_; ++j) pack_row_pairs(rows + j * chunk_, np, 1, words + j * steps);
    }
    gemm::transpose_words(convert_, words, steps, nr_, steps, pair_dst, nr_);
  }

  // im2col's rows: column j of block cb at rows + j * pitch, element type
  // E that of the source: the image copy's (float or, copy_image_bf16,
  // bf16 bits), or float from the caller's x read element by element.
  template <class E>
  void column_rows(const void* x, const Strides& xs, DataType dtype, OperandRounding rounding, bool from_copy,
                   int64_t n, int64_t g, int64_t cb, int64_t pix0, int64_t np, E* rows, int64_t pitch,
                   bool zero_nonfinite) const {
    dispatch(dtype, rounding, [&]<DataType T, OperandRounding R>() {
      for (int64_t j = 0; j < nr_; ++j) {
        const int64_t col = cb * nr_ + j;
        E* const o = rows + j * pitch;
        if (col >= cols_) {
          std::fill(o, o + np, E{0});
          continue;
        }
        const int64_t c = col / taps_, tap = col % taps_;
        const int64_t r2 = tap % sp_.k[2], r1 = (tap / sp_.k[2]) % sp_.k[1], r0 = tap / (sp_.k[2] * sp_.k[1]);
        // o2 in [lo2, hi2) reads inside the image along the last dim.
        const int64_t t2 = r2 * sp_.d[2] - sp_.pb[2];
        const int64_t lo2 = std::clamp<int64_t>(ceil_div(std::max<int64_t>(-t2, 0), sp_.s[2]), 0, sp_.y[2]);
        const int64_t hi2 = std::clamp<int64_t>(sp_.x[2] - t2 > 0 ? ceil_div(sp_.x[2] - t2, sp_.s[2]) : 0, lo2,
                                                sp_.y[2]);
        const int64_t plane = xs.offset + n * xs.n + (g * c_ + c) * xs.ch;
        const int64_t step = sp_.s[2] * xs.sp[2];
        // In the copy, o2 reads phase f of its row at u = o2 + u0.
        const int64_t f = ((t2 % sp_.s[2]) + sp_.s[2]) % sp_.s[2], u0 = (t2 - f) / sp_.s[2];
        for (int64_t p = pix0; p < pix0 + np;) {
          const int64_t row = p / sp_.y[2], o2a = p % sp_.y[2];
          const int64_t o2b = std::min(sp_.y[2], o2a + (pix0 + np - p));
          const int64_t i0 = (row / sp_.y[1]) * sp_.s[0] - sp_.pb[0] + r0 * sp_.d[0];
          const int64_t i1 = (row % sp_.y[1]) * sp_.s[1] - sp_.pb[1] + r1 * sp_.d[1];
          E* const q = o + (p - pix0) - o2a;  // q[o2]: pixel o2 of this row
          if (i0 < 0 || i0 >= sp_.x[0] || i1 < 0 || i1 >= sp_.x[1]) {
            std::fill(q + o2a, q + o2b, E{0});
          } else {
            const int64_t a = std::clamp(lo2, o2a, o2b), b = std::clamp(hi2, a, o2b);
            std::fill(q + o2a, q + a, E{0});
            if (from_copy) {
              // Phase f of the row; o2 reads its element o2 + u0 (u0 < 0 in
              // the left padding, where o2 >= a keeps the index in the row;
              // with no pixel inside, a + u0 need not be in it: a fuzz
              // finding, padding of 2^40).
              const E* const phase =
                  static_cast<const E*>(x) + (((c * sp_.x[0] + i0) * sp_.x[1] + i1) * copy_row_ + f * u2_);
              if (b > a) std::copy(phase + (a + u0), phase + (b + u0), q + a);
            } else if constexpr (std::is_same_v<E, float>) {
              const int64_t src = plane + i0 * xs.sp[0] + i1 * xs.sp[1] + t2 * xs.sp[2];
              for (int64_t o2 = a; o2 < b; ++o2) q[o2] = operand_value<R>(load<T>(x, src + o2 * step), zero_nonfinite);
            }
            std::fill(q + b, q + o2b, E{0});
          }
          p += o2b - o2a;
        }
      }
    });
  }

  // Group g's channels of image n of x, converted once (operand rounding
  // and zero_nonfinite applied) into an fp32 copy [c][x0][x1][copy_row_]
  // whose rows are split by phase along the last dim: element i2 at
  // (i2 % s2) * u2_ + i2 / s2, zero in each phase's tail. A tap then reads
  // consecutive output pixels from consecutive floats, so im2col's runs are
  // plain copies. Why a copy: each element is read taps/stride^2 times (12
  // on the stem): reading fp16 element by element through every tap made
  // the stem's fp16 weight gradient 1.3x slower than fp32's, and the
  // stride-2 reads of the stem's x, even in fp32, left im2col a quarter of
  // its weight gradient.
  void copy_image(const void* x, int64_t n, int64_t g, float* dst, float* row, bool zero_nonfinite) const {
    const Strides xs = strides_of(op_.b, op_.geo.spatial);
    const int64_t s2 = sp_.s[2], x2 = sp_.x[2];
    for (int64_t c = 0; c < c_; ++c)
      for (int64_t r = 0; r < sp_.x[0] * sp_.x[1]; ++r) {
        float* const o = dst + (c * sp_.x[0] * sp_.x[1] + r) * copy_row_;
        float* const in = s2 == 1 ? o : row;
        convert_(x, op_.b.dtype, op_.rounding, xs.offset + n * xs.n + (g * c_ + c) * xs.ch + r * x2, 1, 0, x2, 1, in,
                 0);
        if (zero_nonfinite) detail::zero_nonfinite(in, x2);
        if (s2 > 1) split_phases(in, o, [](float v) { return v; });
      }
  }

  // Row `in` (x's last dim) into the image copy's row o, split by phase:
  // element i2, as `value` gives it, at (i2 % s2) * u2_ + i2 / s2; zero in
  // each phase's tail.
  template <class E, class Value>
  void split_phases(const E* in, E* o, Value value) const {
    const int64_t s2 = sp_.s[2], x2 = sp_.x[2];
    for (int64_t f = 0; f < s2; ++f) {
      E* const phase = o + f * u2_;
      int64_t u = 0;
      for (; f + s2 * u < x2; ++u) phase[u] = value(in[f + s2 * u]);
      std::fill(phase + u, phase + u2_, E{0});
    }
  }

  // copy_image for the pair kernels: group g's channels of image n of a
  // bf16 x, phase-split as there but kept as bf16 bits (NaN and +-Inf
  // zeroed if asked), so that im2col's runs copy half the bytes and are
  // rows of words already (widened to fp32 and merged back into words, the
  // stem's bf16 weight gradient spent a sixth of its time on the way).
  void copy_image_bf16(const uint16_t* x, int64_t n, int64_t g, uint16_t* dst, bool zero_nonfinite) const {
    const Strides xs = strides_of(op_.b, op_.geo.spatial);
    const auto value = [zero_nonfinite](uint16_t v) {
      return zero_nonfinite && gemm::bf16_nonfinite(v) ? uint16_t{0} : v;
    };
    for (int64_t c = 0; c < c_; ++c)
      for (int64_t r = 0; r < sp_.x[0] * sp_.x[1]; ++r)
        split_phases(x + xs.offset + n * xs.n + (g * c_ + c) * xs.ch + r * sp_.x[2],
                     dst + (c * sp_.x[0] * sp_.x[1] + r) * copy_row_, value);
  }

  // dy channels [k0, k0 + kn) of image n, group g, pixels [pix0, pix0 + np)
  // into the planar fp32 copy [k][chunk_], walking row segments (a division
  // per element made bf16/fp16 wgrad 25x slower than fp32). Unit-stride
  // segments go through the ISA's converter, eight elements at a time (one
  // at a time, fp16 wgrad of a k10 mono front end was 3.5x slower than fp32).
  void copy_rows(const void* dy, int64_t n, int64_t g, int64_t k0, int64_t kn, int64_t pix0, int64_t np,
                 float* dst, bool zero_nonfinite) const {
    const Strides s = strides_of(op_.a, op_.geo.spatial);
    dispatch(op_.a.dtype, op_.rounding, [&]<DataType T, OperandRounding R>() {
      for (int64_t k = k0; k < k0 + kn; ++k) {
        const int64_t plane = s.offset + n * s.n + (g * k_ + k) * s.ch;
        float* o = dst + k * chunk_;
        for (int64_t p = pix0; p < pix0 + np;) {
          const int64_t row = p / sp_.y[2], a = p % sp_.y[2], b = std::min(sp_.y[2], a + (pix0 + np - p));
          int64_t src = plane + (row / sp_.y[1]) * s.sp[0] + (row % sp_.y[1]) * s.sp[1] + a * s.sp[2];
          if (s.sp[2] == 1) {
            // A row of b - a "channels" of one pixel (see ToChannelsLast).
            convert_(dy, T, R, src, 1, 0, b - a, 1, o, 0);
            if (zero_nonfinite) detail::zero_nonfinite(o, b - a);
            o += b - a;
          } else {
            for (int64_t q = a; q < b; ++q, src += s.sp[2]) *o++ = operand_value<R>(load<T>(dy, src), zero_nonfinite);
          }
          p += b - a;
        }
      }
    });
  }

  // Pairs, with dy's pixels contiguous in each channel plane: rows k0..
  // of the chunk's pixel pairs are dy's bf16 values as they lie (little-
  // endian: a pair of neighbours, low half first, is their bytes), a NaN or
  // +-Inf zeroed if asked, and after an odd chunk the last pair's high half
  // zero. Returns whether a NaN or +-Inf was read. (Widened to fp32 rows and
  // merged back into pairs, they took as long as the stem's pair kernel.)
  bool copy_pair_rows(const uint16_t* dy, int64_t n, int64_t g, int64_t k0, int64_t kn, int64_t pix0, int64_t np,
                      uint32_t* dst, bool zero_nonfinite) const {
    const Strides s = strides_of(op_.a, op_.geo.spatial);
    unsigned nonfinite = 0;
    for (int64_t k = k0; k < k0 + kn; ++k) {
      const uint16_t* const src = dy + s.offset + n * s.n + (g * k_ + k) * s.ch + pix0;
      uint16_t* const d = reinterpret_cast<uint16_t*>(dst + k * pair_steps_);
      for (int64_t j = 0; j < np; ++j) {
        const uint16_t x = src[j];
        const bool bad = gemm::bf16_nonfinite(x);
        nonfinite |= static_cast<unsigned>(bad);
        d[j] = zero_nonfinite && bad ? uint16_t{0} : x;
      }
      if (np % 2) d[np] = 0;
    }
    return nonfinite != 0;
  }

  // Returns, when args.found asks, whether the x and dy values it read
  // held a NaN or +-Inf.
  NonfiniteFound compute(const OpArgs& args, float* acc, float* slot, int64_t task) const {
    NonfiniteFound seen;
    const int64_t lo = task_begin(task), hi = task_begin(task + 1);
    if (lo >= hi) return seen;
    const bool direct = direct_ && !args.zero_nonfinite;
    // bf16 dy planes with contiguous pixels are already pairs of neighbours
    // (little-endian: low half first), so a chunk of whole pairs multiplies
    // them where they lie, as fp32 reads its planes in place: copied, each
    // task copied every dy row its tiles read, and with 2 tasks over the
    // stem's column blocks both copied all of dy (the stem's bf16 weight
    // gradient took as long as fp32's on 2 threads). An odd chunk still
    // goes through the copy, for the zero high half after its last pixel,
    // as does a run that zeroes NaN and Inf.
    const bool dy_in_place = dy_pairs_as_stored_ && !args.zero_nonfinite;
    const bool check = args.found != nullptr;
    float* const xcol = slot;
    float* const xrows = slot + round_up(chunk_ * nr_, 16);  // im2col's rows before the transpose
    float* const dyc = xrows + round_up(chunk_ * nr_, 16);
    // Which (chunk, group) each k-tile's rows of dyc were converted for, so
    // a task does it only for its own tiles, once per chunk.
    int64_t* const stamp = reinterpret_cast<int64_t*>(dyc + round_up(k_ * chunk_, 16));
    if (!direct) std::fill(stamp, stamp + kt_, int64_t{-1});
    // The pair copies (pairs_): the im2col block's [pair][nr], dy's [k][pair].
    uint32_t* const xpair = reinterpret_cast<uint32_t*>(stamp + round_up(2 * kt_, 16) / 2);
    uint32_t* const dypair = xpair + round_up(pair_steps_ * nr_, 16);
    float* const ximg = reinterpret_cast<float*>(dypair + round_up(k_ * pair_steps_, 16));
    float* const ximg_row = ximg + round_up(c_ * sp_.x[0] * sp_.x[1] * copy_row_, 16);  // copy_image's row
    int64_t image_stamp = -1;  // n * groups + g of the image in ximg
    const Strides xs = strides_of(op_.b, op_.geo.spatial);
    int64_t chunk_id = 0;
    const Strides ys = strides_of(op_.a, op_.geo.spatial);
    const float* const dy = static_cast<const float*>(args.a);
    const uint16_t* const dy16 = static_cast<const uint16_t*>(args.a);
    int64_t a_off = 0, len = 0, steps = 0;  // pixels of the chunk; kernel steps (pairs: half, rounded up)
    const int64_t b_off = 0;
    MicroArgs ka;
    ka.b = pairs_ ? reinterpret_cast<const float*>(xpair) : xcol;
    ka.bs = nr_;
    ka.a_off = &a_off;
    ka.b_off = &b_off;
    ka.len = &steps;
    ka.runs = 1;
    bool first = true;
    for (int64_t n = 0; n < n_; ++n)
      for (int64_t pix0 = 0; pix0 < pixels_; pix0 += chunk_, first = false, ++chunk_id) {
        len = std::min(chunk_, pixels_ - pix0);
        steps = pairs_ ? (len + 1) / 2 : len;
        const bool dy_words = dy_in_place && len % 2 == 0;
        int64_t have_unit = -1;
        for (int64_t tl = lo; tl < hi; ++tl) {
          const int64_t kt = tl % kt_, unit = tl / kt_, cb = unit % cbn_, g = unit / cbn_;
          if (unit != have_unit) {
            if (x_copy_) {
              if (image_stamp != n * groups_ + g) {
                const int64_t image = c_ * sp_.x[0] * sp_.x[1] * copy_row_;
                if (words_copy()) {
                  auto* const ximg16 = reinterpret_cast<uint16_t*>(ximg);
                  copy_image_bf16(static_cast<const uint16_t*>(args.b), n, g, ximg16, args.zero_nonfinite);
                  if (check && bf16_run_has_nonfinite(ximg16, image)) seen.b = true;
                } else {
                  copy_image(args.b, n, g, ximg, ximg_row, args.zero_nonfinite);
                  if (check && any_nonfinite_(ximg, image)) seen.b = true;
                }
                image_stamp = n * groups_ + g;
              }
              im2col(ximg, xs, DataType::f32, OperandRounding::none, true, n, g, cb, pix0, len, xcol, xrows,
                     pairs_ ? xpair : nullptr, false);
            } else {
              im2col(args.b, xs, op_.b.dtype, op_.rounding, false, n, g, cb, pix0, len, xcol, xrows,
                     pairs_ ? xpair : nullptr, args.zero_nonfinite);
              // im2col's fp32 rows, [nr][chunk_] (xcol holds words with pairs).
              if (check)
                for (int64_t j = 0; j < nr_; ++j)
                  if (any_nonfinite_(xrows + j * chunk_, len)) seen.b = true;
            }
            have_unit = unit;
          }
          const int64_t k0 = kt * mr_, kn = std::min<int64_t>(mr_, k_ - k0);
          if (!direct && !dy_words && stamp[kt] != chunk_id * groups_ + g) {
            if (dy_pairs_as_stored_) {
              if (copy_pair_rows(static_cast<const uint16_t*>(args.a), n, g, k0, kn, pix0, len, dypair,
                                 args.zero_nonfinite) &&
                  check)
                seen.a = true;
            } else {
              copy_rows(args.a, n, g, k0, kn, pix0, len, dyc, args.zero_nonfinite);
              if (pairs_)
                for (int64_t k = k0; k < k0 + kn; ++k)
                  pack_row_pairs(dyc + k * chunk_, len, 1, dypair + k * pair_steps_);
            }
            stamp[kt] = chunk_id * groups_ + g;
          }
          // Every column block's tiles read the same dy rows of a k-tile;
          // only the owner of tile (g, kt mod cbn_, kt) checks them, so they
          // are checked once in all, not once per task (with 2 tasks over
          // the stem's column blocks, both scanned all 13 MB of dy: 14% of
          // the weight gradient, and no gain from the second thread). The
          // pair rows copied as stored were checked by their copy.
          const auto dy_plane = [&](int64_t k) { return ys.offset + n * ys.n + (g * k_ + k) * ys.ch; };
          if (check && cb == kt % cbn_ && (!dy_pairs_as_stored_ || dy_words))
            for (int64_t k = k0; k < k0 + kn; ++k)
              if (dy_words ? bf16_run_has_nonfinite(dy16 + dy_plane(k) + pix0, len)
                           : any_nonfinite_(direct ? dy + dy_plane(k) + pix0 : dyc + k * chunk_, len))
                seen.a = true;
          // Rows past K repeat the tile's first row; they are never stored.
          for (int64_t i = 0; i < mr_; ++i) {
            const int64_t k = kt * mr_ + (kt * mr_ + i < k_ ? i : 0);
            if (direct) {
              ka.a[i] = dy + dy_plane(k);
            } else if (dy_words) {
              // Typed float* only to share MicroArgs: the pair kernels
              // read words with memcpy, so an odd plane start is fine.
              ka.a[i] = reinterpret_cast<const float*>(dy16 + dy_plane(k) + pix0);
            } else if (pairs_) {
              ka.a[i] = reinterpret_cast<const float*>(dypair + k * pair_steps_);
            } else {
              ka.a[i] = dyc + k * chunk_;
            }
          }
          a_off = direct ? pix0 : 0;
          ka.acc = acc + tl * mr_ * nr_;
          ka.accumulate = !first;
          kern_(ka);
        }
      }
    store(args.dst, acc, lo, hi);
    return seen;
  }

  void store(void* dst, const float* acc, int64_t lo, int64_t hi) const {
    const Strides ws = strides_of(op_.dst, op_.geo.spatial);
    for (int64_t tl = lo; tl < hi; ++tl) {
      const int64_t kt = tl % kt_, unit = tl / kt_, cb = unit % cbn_, g = unit / cbn_;
      const float* const t = acc + tl * mr_ * nr_;
      for (int64_t i = 0; i < mr_ && kt * mr_ + i < k_; ++i)
        for (int64_t j = 0; j < nr_ && cb * nr_ + j < cols_; ++j) {
          const int64_t col = cb * nr_ + j, c = col / taps_, tap = col % taps_;
          const int64_t r2 = tap % sp_.k[2], r1 = (tap / sp_.k[2]) % sp_.k[1], r0 = tap / (sp_.k[2] * sp_.k[1]);
          const int64_t at = ws.offset + (g * k_ + kt * mr_ + i) * ws.n + c * ws.ch + r0 * ws.sp[0] +
                             r1 * ws.sp[1] + r2 * ws.sp[2];
          store_one(dst, op_.dst.dtype, at, t[i * nr_ + j]);
        }
    }
  }

  OpSpec op_;
  int threads_ = 1;
  Space sp_;
  MicroKernel kern_ = nullptr;
  int64_t mr_ = 0, nr_ = 0;  // the kernel\'s tile: rows, and columns per block (kernel config)
  ToChannelsLast convert_ = nullptr;
  AnyNonfinite any_nonfinite_ = nullptr;
  int64_t groups_ = 1, n_ = 0, k_ = 0, c_ = 0, taps_ = 1, cols_ = 0, cbn_ = 0, kt_ = 0, tiles_ = 0, tasks_ = 1;
  bool direct_ = false, x_copy_ = false;
  bool pairs_ = false;       // bf16 pair kernels (kernels/gemm.hpp)
  bool dy_pairs_as_stored_ = false;  // pairs from dy's own words (copy_pair_rows)
  int64_t pair_steps_ = 0;   // pairs: kernel steps of a full chunk
  int64_t u2_ = 0, copy_row_ = 0;  // the image copy: phase length and row pitch (s2 * u2_ floats)
  int64_t pixels_ = 0, chunk_ = 0, acc_floats_ = 0, slot_floats_ = 0;
};

}  // namespace
}  // namespace convbwd::detail::small_channels

namespace convbwd::detail {

const Implementation kSmallChannelsBwdWeightsImpl = {
    "small_channels_wgrad",
    [](const OpSpec& op, const PlanContext& ctx, std::string* why) -> std::unique_ptr<OpKernel> {
      if (!small_channels::supported(op, Op::bwd_weights, why)) return nullptr;
      auto k = std::make_unique<small_channels::WgradKernel>(op, ctx);
      if (!k->init(ctx, why)) return nullptr;
      return k;
    }};

}  // namespace convbwd::detail
