// Data gradient for very few image-side channels per group, in two levels:
//
//   T[o, col]   = sum over k of dy[n, g, k, o] * w[g, k, col]   (a GEMM: M =
//                 output pixels, N = C * taps columns, reduction K)
//   dx[c, i]    = sum over taps r with o*s - pad + r*d = i of T[o, (c, r)]
//
// The GEMM runs the tier's "strided" microkernel (mr x nr from the kernel
// config: 8x32 on AVX-512, 6x16 on AVX2) on T's transpose: mr columns
// (c, tap) of the packed weights ([k][column], the A operand, mr words
// broadcast per step) against nr consecutive output pixels of a band of dy
// copied (converted, operand-rounded) into planar rows [k][pixel] (the B
// operand), reduced over K. A tile is then mr rows of T's [column][pixel]
// layout as they stand, which the gather below reads (with pixels on the
// tile's rows, each tile went through a register transpose into T: 18% of
// the stem's bf16 data gradient). Reading NCHW dy in place instead of the
// band copy touched one new cache line per step (one per channel), 512 lines
// per tile for wav2vec2's K = 512, and ran at a third of PyTorch's speed
// there.
//
// One task owns one (image, group) and walks its output pixels in bands: the
// band's dy copy and T stay in L2, and T's entries are added into an fp32
// accumulator of the whole dx image (phase-split along the last dim, so each
// tap adds one contiguous run). Each dx element is summed in a fixed order
// (band, row segment, taps) by the single task that owns it: the bits do not
// depend on the thread count, and nothing is scattered across threads.
//
// bf16 operands on a tier with bf16 pair kernels (KernelConfig::bf16) run
// them: the weights pack as pairs of neighbouring k ([k/2][column], bit for
// bit) and the band copy as pairs of neighbouring channels ([k/2][pixel]:
// bit for bit from planar dy, else repacked from the fp32 copy), so a
// reduction step multiplies a pair; an odd K chunk ends in a pair padded
// with zero on both operands. A pair copy holds twice the channels of an
// fp32 one in the same bytes, so a kernel call still reduces as many:
// wav2vec2's front end (K chunks of 20 channels) ran 4% slower at 10 steps.
#include <cstring>
#include <memory>

#include "impl/registry_entries.hpp"
#include "impl/small_channels/small_channels_common.hpp"
#include "runtime/thread_pool.hpp"

namespace convbwd::detail::small_channels {
namespace {

// Output pixels per band: as many as keep T of a band within 256 KiB, in
// whole nr-pixel tiles: 416 for the stem's 152 (147 rounded up to whole
// 8-column tiles), a whole 3199-pixel image for wav2vec2's 16.
// The reduction over K runs in chunks whose dy copy is at most 256 KiB (all
// 64 channels of the stem; 20 of wav2vec2's 512), so each channel is read in
// runs as long as the band. Short runs per channel (a band of 60 pixels over
// all 512 channels of wav2vec2) made the copy latency-bound: many short
// interleaved streams defeat the prefetcher.
constexpr int64_t kTFloats = 65536;
constexpr int64_t kCopyFloats = 65536;
constexpr int64_t kMaxChunkChannels = 64;

class DgradKernel final : public OpKernel {
 public:
  DgradKernel(const OpSpec& op, const PlanContext& ctx) : op_(op), threads_(ctx.threads) {}

  // Plans the kernel for op_ (planning is not construction): false, with
  // the reason in *why, when it declines; the factory then drops it.
  bool init(const PlanContext& ctx, std::string* why) {
    const OpSpec& op = op_;
    const Geometry& g = op.geo;
    sp_ = space_of(g);
    const KernelConfig& cfg = gemm::kernels_for(ctx.isa);
    pairs_ = gemm::bf16_pairs(op, cfg) && cfg.bf16.strided != nullptr;
    const GemmKernels& family = gemm::wide_family(cfg, pairs_);  // columns are (c, tap): 147 on the stem
    nr_ = family.nr;
    cols_ = g.c * sp_.taps();
    // T's columns in tiles of mr rows, the last one padded; or, where the
    // tier has strided kernels of each row count, the last one of the
    // columns left, nothing padded (wav2vec2's 10 columns padded to 16 rows
    // ran 1.3x slower), and joined to the tile before it where both fit one
    // kernel (10 columns in one tile ran 1.05x faster than 8 + 2).
    // Full tiles stay at mr rows: 14-row tiles ran the stem's data
    // gradient 0.94x as fast (fp32 and bf16, 2 threads, Zen 4).
    mr_ = family.mr;
    tiles_ = ceil_div(cols_, mr_);
    last_rows_ = cols_ - (tiles_ - 1) * mr_;
    kern_ = tail_kern_ = family.strided;
    cols_pad_ = round_up(cols_, mr_);
    if (family.strided_of_rows) {
      if (tiles_ > 1 && mr_ + last_rows_ <= family.strided_rows_max) --tiles_, last_rows_ += mr_;
      tail_kern_ = family.strided_kernel(static_cast<int>(last_rows_));
      cols_pad_ = cols_;
    } else {
      last_rows_ = mr_;
    }
    convert_ = cfg.to_channels_last;
    store_row_ = cfg.store_row;
    add_row_ = cfg.add_row;
    interleave_ = cfg.interleave_pair_rows;
    groups_ = g.groups;
    n_ = g.n;
    k_ = g.k;
    c_ = g.c;
    taps_ = sp_.taps();
    pixels_ = sp_.y_pixels();
    band_ = std::min(round_up(pixels_, nr_), std::max<int64_t>(nr_, kTFloats / cols_pad_ / nr_ * nr_));
    band_pitch_ = band_;
    const int64_t per_float = pairs_ ? 2 : 1;  // channels per 32-bit slot of the band copy
    kc_ = std::min({k_, kMaxChunkChannels * per_float, std::max<int64_t>(8, kCopyFloats * per_float / band_)});
    if (pairs_ && kc_ < k_) kc_ &= ~int64_t{1};  // chunks start on a pair (every chunk but the last is even)
    // The fp32 band copy: all but the planar bf16 pair copy go through it.
    band_fp32_ = !pairs_ || !spatial_flat(op.a);
    k_steps_ = pairs_ ? (k_ + 1) / 2 : k_;
    u2_ = ceil_div(sp_.x[2], sp_.s[2]);
    acc_row_ = sp_.s[2] * u2_;
    // Where each last-dim tap lands: i2 = o2*s2 - p2 + r2*d2 = f2 + s2*u with
    // phase f2 and u = o2 + u0; o2 in [lo, hi) keeps u inside phase f2.
    for (int64_t r2 = 0; r2 < sp_.k[2]; ++r2) {
      const int64_t t = r2 * sp_.d[2] - sp_.pb[2];
      const int64_t f = ((t % sp_.s[2]) + sp_.s[2]) % sp_.s[2];
      const int64_t u0 = (t - f) / sp_.s[2];
      const int64_t uf = f < sp_.x[2] ? ceil_div(sp_.x[2] - f, sp_.s[2]) : 0;
      Tap2 tp;
      tp.dst = f * u2_ + u0;
      tp.lo = std::max<int64_t>(0, -u0);
      tp.hi = std::max(tp.lo, std::min(sp_.y[2], uf - u0));
      tap2_[static_cast<size_t>(r2)] = tp;
    }

    // Sizes in checked arithmetic: hostile channel counts overflow them (a
    // fuzz finding: 2.2e17 output channels).
    const Checked acc = Checked(c_) * sp_.x[0] * sp_.x[1] * acc_row_;
    const Checked pack = (Checked(groups_) * k_steps_ * cols_pad_).rounded_up(16);
    const Checked t_floats = (Checked(cols_pad_) * band_pitch_).rounded_up(16);
    // Pairs: the band's pair copy follows its fp32 copy.
    const Checked a_floats = (Checked(band_fp32_ ? kc_ : 0) * band_pitch_).rounded_up(16) +
                             (Checked(pairs_ ? (kc_ + 1) / 2 : 0) * band_pitch_).rounded_up(16);
    // Accumulator tiles of a band between K chunks (none with one chunk).
    const Checked tacc = kc_ < k_ ? t_floats : Checked(0);
    const Checked slot = t_floats + a_floats + acc.rounded_up(16) + (std::max(mr_, last_rows_) * nr_) + tacc;
    const Checked total = slot * std::max(threads_, 1) + pack;
    if (!total.ok() || total.value() > workspace_budget(op, ctx) / 4) {
      *why = "the per-thread band and dx accumulator exceed the workspace budget";
      return false;
    }
    acc_floats_ = acc.value();
    pack_floats_ = pack.value();
    tacc_floats_ = tacc.value();
    slot_floats_ = slot.value();
    return true;
  }

  size_t workspace_bytes() const override {
    return static_cast<size_t>(pack_floats_ + slot_floats_ * std::max(threads_, 1)) * sizeof(float);
  }
  // T multiplies existing dy and w elements only; taps that fall into the
  // padding are dropped when T is gathered into dx, never multiplied by a
  // zero. So each dx element sums the reference's terms, and nothing needs
  // the scan (21% of the wav2vec2 k10 data gradient).
  NonfiniteMode nonfinite_mode() const override { return NonfiniteMode::native; }

  void run(const OpArgs& args, ThreadPool& pool) const override {
    float* const pack = reinterpret_cast<float*>(args.workspace);
    pool.parallel_for(groups_, threads_,
                      [&](int64_t g, int) { pack_group(args.b, g, pack + g * k_steps_ * cols_pad_); });
    pool.parallel_for(n_ * groups_, threads_, [&](int64_t t, int thread) {
      image(args, pack, t / groups_, t % groups_, pack + pack_floats_ + thread * slot_floats_);
    });
  }

 private:
  struct Tap2 {
    int64_t dst = 0, lo = 0, hi = 0;
  };

  // w[g, k, col] of group g: [k][cols_pad_], zero past the last column,
  // operand-rounded; pairs: [k/2][cols_pad_] bf16 pairs, bit for bit, zero
  // past an odd K.
  void pack_group(const void* w, int64_t g, float* dst) const {
    const Strides ws = strides_of(op_.b, op_.geo.spatial);
    const auto base_of = [&](int64_t col) {
      const int64_t c = col / taps_, tap = col % taps_;
      const int64_t r2 = tap % sp_.k[2], r1 = (tap / sp_.k[2]) % sp_.k[1], r0 = tap / (sp_.k[2] * sp_.k[1]);
      return ws.offset + c * ws.ch + r0 * ws.sp[0] + r1 * ws.sp[1] + r2 * ws.sp[2] + g * k_ * ws.n;
    };
    if (pairs_) {
      uint16_t* const d = reinterpret_cast<uint16_t*>(dst);
      std::memset(d, 0, static_cast<size_t>(k_steps_ * cols_pad_) * sizeof(uint32_t));
      for (int64_t col = 0; col < cols_; ++col) {
        const int64_t base = base_of(col);
        for (int64_t k = 0; k < k_; ++k)
          d[(k / 2 * cols_pad_ + col) * 2 + k % 2] = static_cast<const uint16_t*>(w)[base + k * ws.n];
      }
      return;
    }
    dispatch(op_.b.dtype, op_.rounding, [&]<DataType T, OperandRounding R>() {
      for (int64_t col = 0; col < cols_pad_; ++col) {
        if (col >= cols_) {
          for (int64_t k = 0; k < k_; ++k) dst[k * cols_pad_ + col] = 0.0f;
          continue;
        }
        const int64_t base = base_of(col);
        for (int64_t k = 0; k < k_; ++k) dst[k * cols_pad_ + col] = round_operand<R>(load<T>(w, base + k * ws.n));
      }
    });
  }

  // Converts dy channels [k0, k0 + kn), pixels [p0, p0 + np) of (n, g) into
  // the planar fp32 copy [kn][band_pitch_], zero from the band's last pixel
  // to the end of its last nr-pixel tile: the kernel reads whole tiles (the
  // T entries past the band that those zeros make are never read; zero keeps
  // every value the kernel reads initialized).
  void copy_band(const void* dy, int64_t n, int64_t g, int64_t k0, int64_t kn, int64_t p0, int64_t np,
                 float* dst) const {
    const Strides s = strides_of(op_.a, op_.geo.spatial);
    const int64_t padded = round_up(np, nr_);
    if (spatial_flat(op_.a)) {
      // A channel's pixels are one run: a row of np "channels" of one pixel
      // for the ISA's converter (see ToChannelsLast).
      const int64_t base = s.offset + n * s.n + (g * k_ + k0) * s.ch + p0;
      for (int64_t k = 0; k < kn; ++k) {
        float* const o = dst + k * band_pitch_;
        convert_(dy, op_.a.dtype, op_.rounding, base + k * s.ch, 1, 0, np, 1, o, 0);
        std::fill(o + np, o + padded, 0.0f);
      }
      return;
    }
    dispatch(op_.a.dtype, op_.rounding, [&]<DataType T, OperandRounding R>() {
      for (int64_t k = 0; k < kn; ++k) {
        const int64_t plane = s.offset + n * s.n + (g * k_ + k0 + k) * s.ch;
        float* o = dst + k * band_pitch_;
        for (int64_t p = p0; p < p0 + np;) {
          const int64_t row = p / sp_.y[2], a = p % sp_.y[2], b = std::min(sp_.y[2], a + (p0 + np - p));
          int64_t src = plane + (row / sp_.y[1]) * s.sp[0] + (row % sp_.y[1]) * s.sp[1] + a * s.sp[2];
          for (int64_t q = a; q < b; ++q, src += s.sp[2]) *o++ = round_operand<R>(load<T>(dy, src));
          p += b - a;
        }
        std::fill(o, o + (padded - np), 0.0f);
      }
    });
  }

  // The same channels as bf16 pairs of neighbouring channels, [kn/2][band_pitch_]
  // (zero past an odd kn, and as copy_band past the band's last pixel):
  // planar dy bit for bit, channel pair by pair; other layouts through the
  // fp32 copy (`scratch`).
  void copy_band_pairs(const void* dy, int64_t n, int64_t g, int64_t k0, int64_t kn, int64_t p0, int64_t np,
                       float* scratch, uint32_t* dst) const {
    const int64_t steps = (kn + 1) / 2, padded = round_up(np, nr_);
    if (band_fp32_) {
      copy_band(dy, n, g, k0, kn, p0, np, scratch);
      pack_row_pairs(scratch, kn, band_pitch_, dst);
      return;
    }
    const Strides s = strides_of(op_.a, op_.geo.spatial);
    const uint16_t* const src = static_cast<const uint16_t*>(dy) + (s.offset + n * s.n + (g * k_ + k0) * s.ch + p0);
    for (int64_t kk = 0; kk < steps; ++kk) {
      const uint16_t* const even = src + 2 * kk * s.ch;
      uint32_t* const o = dst + kk * band_pitch_;
      interleave_(even, 2 * kk + 1 < kn ? even + s.ch : nullptr, np, o);
      std::fill(o + np, o + padded, 0u);
    }
  }

  void image(const OpArgs& args, const float* pack, int64_t n, int64_t g, float* slot) const {
    float* const tb = slot;  // T band: [cols_pad][band_pitch_]
    float* const ab = tb + round_up(cols_pad_ * band_pitch_, 16);
    uint32_t* const abp = reinterpret_cast<uint32_t*>(ab + round_up(band_fp32_ ? kc_ * band_pitch_ : 0, 16));
    float* const acc = reinterpret_cast<float*>(abp) + round_up((pairs_ ? (kc_ + 1) / 2 : 0) * band_pitch_, 16);
    float* const tile = acc + round_up(acc_floats_, 16);
    float* const tacc = tile + std::max(mr_, last_rows_) * nr_;
    std::memset(acc, 0, static_cast<size_t>(acc_floats_) * sizeof(float));

    const int64_t zero = 0;
    MicroArgs ka;
    int64_t kn = 0, steps = 0;  // channels of the K chunk; kernel steps (pairs: half, rounded up)
    ka.a_off = &zero;
    ka.b_off = &zero;
    ka.len = &steps;
    ka.runs = 1;
    ka.as = cols_pad_;
    ka.bs = band_pitch_;
    ka.acc = tile;
    for (int64_t p0 = 0; p0 < pixels_; p0 += band_) {
      const int64_t np = std::min(band_, pixels_ - p0);
      // Each tile sums k = 0, 1, ... in order across the chunks (its fp32
      // accumulators rest exactly in tacc between them).
      for (int64_t k0 = 0; k0 < k_; k0 += kc_) {
        kn = std::min(kc_, k_ - k0);
        steps = pairs_ ? (kn + 1) / 2 : kn;
        const bool last = k0 + kn == k_;
        if (pairs_)
          copy_band_pairs(args.a, n, g, k0, kn, p0, np, ab, abp);
        else
          copy_band(args.a, n, g, k0, kn, p0, np, ab);
        const float* const band = pairs_ ? reinterpret_cast<const float*>(abp) : ab;
        ka.accumulate = k0 > 0;
        for (int64_t t = 0; t < tiles_; ++t) {
          const int64_t c0 = t * mr_, rows = t + 1 < tiles_ ? mr_ : last_rows_;
          const MicroKernel kern = t + 1 < tiles_ ? kern_ : tail_kern_;
          ka.a[0] = pack + (g * k_steps_ + (pairs_ ? k0 / 2 : k0)) * cols_pad_ + c0;
          for (int64_t pt = 0; pt < np; pt += nr_) {
            ka.b = band + pt;
            // A tile of `rows` x nr_ accumulators: tacc holds each tile's in
            // its own rows x nr_ block of T's [column][pixel] extent.
            ka.acc = tacc_floats_ > 0 ? tacc + c0 * band_pitch_ + pt * rows : tile;
            kern(ka);
            if (!last) continue;
            // The tile's rows are T's columns c0 + i at pixels pt..
            const size_t bytes = static_cast<size_t>(std::min<int64_t>(nr_, np - pt)) * sizeof(float);
            for (int64_t i = 0; i < rows && c0 + i < cols_; ++i)
              std::memcpy(tb + (c0 + i) * band_pitch_ + pt, ka.acc + i * nr_, bytes);
          }
        }
      }
      gather_band(tb, p0, np, acc);
    }
    store(args.dst, acc, n, g);
  }

  // Adds the T entries of a band into the dx accumulator, row segment by row
  // segment, taps in (r0, r1, r2) order.
  void gather_band(const float* tb, int64_t p0, int64_t np, float* acc) const {
    for (int64_t p = p0; p < p0 + np;) {
      const int64_t r = p / sp_.y[2], a = p % sp_.y[2], b = std::min(sp_.y[2], a + (p0 + np - p));
      const int64_t o0 = r / sp_.y[1], o1 = r % sp_.y[1];
      const int64_t toff = p - p0 - a;  // T column of o2, minus o2
      p += b - a;
      for (int64_t r0 = 0; r0 < sp_.k[0]; ++r0) {
        const int64_t i0 = o0 * sp_.s[0] - sp_.pb[0] + r0 * sp_.d[0];
        if (i0 < 0 || i0 >= sp_.x[0]) continue;
        for (int64_t r1 = 0; r1 < sp_.k[1]; ++r1) {
          const int64_t i1 = o1 * sp_.s[1] - sp_.pb[1] + r1 * sp_.d[1];
          if (i1 < 0 || i1 >= sp_.x[1]) continue;
          for (int64_t c = 0; c < c_; ++c) {
            float* const arow = acc + ((c * sp_.x[0] + i0) * sp_.x[1] + i1) * acc_row_;
            const int64_t col0 = c * taps_ + (r0 * sp_.k[1] + r1) * sp_.k[2];
            for (int64_t r2 = 0; r2 < sp_.k[2]; ++r2) {
              const Tap2& tp = tap2_[static_cast<size_t>(r2)];
              const int64_t lo = std::max(tp.lo, a), hi = std::min(tp.hi, b);
              if (lo >= hi) continue;
              // Offsets start at lo, so no pointer is formed before arow.
              float* const d = arow + (tp.dst + lo);
              add_row_(d, tb + (col0 + r2) * band_pitch_ + (toff + lo), hi - lo);
            }
          }
        }
      }
    }
  }

  // Phase by phase, so no element costs a division (with two per element,
  // this was 10% of the stem's data gradient).
  void store(void* dst, const float* acc, int64_t n, int64_t g) const {
    const Strides ds = strides_of(op_.dst, op_.geo.spatial);
    const int64_t s2 = sp_.s[2];
    for (int64_t c = 0; c < c_; ++c)
      for (int64_t i0 = 0; i0 < sp_.x[0]; ++i0)
        for (int64_t i1 = 0; i1 < sp_.x[1]; ++i1) {
          const float* const arow = acc + ((c * sp_.x[0] + i0) * sp_.x[1] + i1) * acc_row_;
          const int64_t base = ds.offset + n * ds.n + (g * c_ + c) * ds.ch + i0 * ds.sp[0] + i1 * ds.sp[1];
          // Phase f holds elements f, f + s2, ...: one row store each
          // (the ISA's, sixteen conversions at a time for 16-bit outputs).
          for (int64_t f = 0; f < s2 && f < sp_.x[2]; ++f) {
            const int64_t count = ceil_div(sp_.x[2] - f, s2);
            if (op_.dst.dtype == DataType::f32)
              store_row_f32(arow + f * u2_, count, static_cast<float*>(dst) + base + f * ds.sp[2], s2 * ds.sp[2]);
            else
              store_row_(arow + f * u2_, count, dst, op_.dst.dtype, base + f * ds.sp[2], s2 * ds.sp[2]);
          }
        }
  }

  OpSpec op_;
  int threads_ = 1;
  Space sp_;
  MicroKernel kern_ = nullptr;       // a tile of mr_ rows
  MicroKernel tail_kern_ = nullptr;  // the last tile, of last_rows_ rows
  int64_t tiles_ = 0, last_rows_ = 0;  // tiles of T's columns: mr_ rows each but the last
  int64_t mr_ = 0, nr_ = 0;  // the tile: rows (T's columns per tile), and pixels per tile (kernel config)
  ToChannelsLast convert_ = nullptr;
  StoreRow store_row_ = nullptr;
  AddRow add_row_ = nullptr;
  InterleavePairRows interleave_ = nullptr;
  int64_t groups_ = 1, n_ = 0, k_ = 0, c_ = 0, taps_ = 1, cols_ = 0;
  int64_t cols_pad_ = 0;  // columns, rounded up to whole mr-row tiles without kernels of each row count: the packed weights' and T's rows
  int64_t pixels_ = 0, band_ = 0, band_pitch_ = 0, u2_ = 0, acc_row_ = 0, acc_floats_ = 0;
  int64_t kc_ = 0, tacc_floats_ = 0, pack_floats_ = 0, slot_floats_ = 0;
  bool pairs_ = false;   // bf16 pair kernels (kernels/gemm.hpp)
  bool band_fp32_ = true;  // the band goes through the fp32 copy (all but planar bf16 pairs)
  int64_t k_steps_ = 0;  // kernel steps over all of K (pairs: half, rounded up)
  std::array<Tap2, 1024> tap2_{};
};

}  // namespace
}  // namespace convbwd::detail::small_channels

namespace convbwd::detail {

const Implementation kSmallChannelsBwdDataImpl = {
    "small_channels_dgrad",
    [](const OpSpec& op, const PlanContext& ctx, std::string* why) -> std::unique_ptr<OpKernel> {
      if (!small_channels::supported(op, Op::bwd_data, why)) return nullptr;
      auto k = std::make_unique<small_channels::DgradKernel>(op, ctx);
      if (!k->init(ctx, why)) return nullptr;
      return k;
    }};

}  // namespace convbwd::detail
