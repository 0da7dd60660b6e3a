// Data gradient for very few image-side channels per group, in two levels:
//
//   T[o, col]   = sum over k of dy[n, g, k, o] * w[g, k, col]   (a GEMM: M =
//                 output pixels, N = C * taps columns, reduction K)
//   dx[c, i]    = sum over taps r with o*s - pad + r*d = i of T[o, (c, r)]
//
// The GEMM runs the tier's "strided" microkernel (mr x nr from the kernel
// config: 8x32 on AVX-512, 6x16 on AVX2): mr consecutive output pixels
// against an nr-column block of packed weights, reduced over K. Its A
// operand is a band of dy copied (converted, operand-rounded) into a blocked
// [mr-pixel tile][k][mr] layout, so each reduction step reads mr contiguous
// floats. Reading NCHW dy in place instead touched one new cache line per
// step (one per channel), 512 lines per tile for wav2vec2's K = 512, and ran
// at a third of PyTorch's speed there.
//
// One task owns one (image, group) and walks its output pixels in bands: the
// band's dy copy and T stay in L2, and T's entries are added into an fp32
// accumulator of the whole dx image (phase-split along the last dim, so each
// tap adds one contiguous run). Each dx element is summed in a fixed order
// (band, row segment, taps) by the single task that owns it: the bits do not
// depend on the thread count, and nothing is scattered across threads.
//
// bf16 operands on a tier with bf16 pair kernels (KernelConfig::bf16) run
// them: the weights pack as pairs of neighbouring k ([k/2][nr], bit for bit)
// and the band copy as pairs of neighbouring channels ([tile][k/2][mr]:
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
// whole mr-pixel tiles (so the blocked copy fills exactly a band): 408 for
// the stem's 160 columns, a whole 3199-pixel image for wav2vec2's 16.
// The reduction over K runs in chunks whose dy copy is at most 256 KiB (all
// 64 channels of the stem; 20 of wav2vec2's 512), so each channel is read in
// runs as long as the band. Short runs per channel (a band of 60 pixels over
// all 512 channels of wav2vec2) made the copy latency-bound: many short
// interleaved streams defeat the prefetcher.
constexpr int64_t kTFloats = 65536;
constexpr int64_t kCopyFloats = 65536;
constexpr int64_t kMaxChunkChannels = 64;
constexpr int64_t kAheadPixels = 128;  // how far ahead the band copy prefetches each channel

class DgradKernel final : public OpKernel {
 public:
  DgradKernel(const OpSpec& op, const PlanContext& ctx, std::string* why) : op_(op), threads_(ctx.threads) {
    const Geometry& g = op.geo;
    sp_ = space_of(g);
    const KernelConfig& cfg = gemm::kernels_for(ctx.isa);
    pairs_ = gemm::bf16_pairs(op, cfg) && cfg.bf16.strided != nullptr;
    const GemmKernels& family = gemm::wide_family(cfg, pairs_);  // columns are (c, tap): 147 on the stem
    kern_ = family.strided;
    mr_ = family.mr;
    nr_ = family.nr;
    convert_ = cfg.to_channels_last;
    store_row_ = cfg.store_row;
    add_row_ = cfg.add_row;
    groups_ = g.groups;
    n_ = g.n;
    k_ = g.k;
    c_ = g.c;
    taps_ = sp_.taps();
    cols_ = c_ * taps_;
    cbn_ = ceil_div(cols_, nr_);
    pixels_ = sp_.y_pixels();
    band_ = std::min(round_up(pixels_, mr_), std::max<int64_t>(mr_, kTFloats / (cbn_ * nr_) / mr_ * mr_));
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
    const Checked pack = (Checked(groups_) * cbn_ * k_steps_ * nr_).rounded_up(16);
    const Checked t_floats = (Checked(cbn_) * nr_ * band_pitch_).rounded_up(16);
    // Pairs: the band's pair copy follows its fp32 copy.
    const Checked a_floats = (Checked(band_fp32_ ? kc_ : 0) * band_pitch_).rounded_up(16) +
                             (Checked(pairs_ ? (kc_ + 1) / 2 : 0) * band_pitch_).rounded_up(16);
    // Accumulator tiles of a band between K chunks (none with one chunk).
    const Checked tacc = kc_ < k_ ? t_floats : Checked(0);
    const Checked slot = t_floats + a_floats + acc.rounded_up(16) + (mr_ * nr_) + tacc;
    const Checked total = slot * std::max(threads_, 1) + pack;
    if (!total.ok() || total.value() > workspace_budget(op, ctx) / 4) {
      *why = "the per-thread band and dx accumulator exceed the workspace budget";
      ok_ = false;
      return;
    }
    acc_floats_ = acc.value();
    pack_floats_ = pack.value();
    tacc_floats_ = tacc.value();
    slot_floats_ = slot.value();
  }

  bool ok() const { return ok_; }
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
    pool.parallel_for(groups_ * cbn_, threads_,
                      [&](int64_t t, int) {
                        pack_block(args.b, t / cbn_, t % cbn_, pack + t * k_steps_ * nr_);
                      });
    pool.parallel_for(n_ * groups_, threads_, [&](int64_t t, int thread) {
      image(args, pack, t / groups_, t % groups_, pack + pack_floats_ + thread * slot_floats_);
    });
  }

 private:
  struct Tap2 {
    int64_t dst = 0, lo = 0, hi = 0;
  };

  // w[g, k, col] for the nr columns of block cb: [k][nr], zero past the
  // last column, operand-rounded; pairs: [k/2][nr] bf16 pairs, bit for bit,
  // zero past an odd K.
  void pack_block(const void* w, int64_t g, int64_t cb, float* dst) const {
    const Strides ws = strides_of(op_.b, op_.geo.spatial);
    if (pairs_) {
      uint16_t* const d = reinterpret_cast<uint16_t*>(dst);
      std::memset(d, 0, static_cast<size_t>(k_steps_ * nr_) * sizeof(uint32_t));
      for (int64_t j = 0; j < nr_ && cb * nr_ + j < cols_; ++j) {
        const int64_t col = cb * nr_ + j, c = col / taps_, tap = col % taps_;
        const int64_t r2 = tap % sp_.k[2], r1 = (tap / sp_.k[2]) % sp_.k[1], r0 = tap / (sp_.k[2] * sp_.k[1]);
        const int64_t base = ws.offset + c * ws.ch + r0 * ws.sp[0] + r1 * ws.sp[1] + r2 * ws.sp[2];
        for (int64_t k = 0; k < k_; ++k)
          d[(k / 2 * nr_ + j) * 2 + k % 2] = static_cast<const uint16_t*>(w)[base + (g * k_ + k) * ws.n];
      }
      return;
    }
    dispatch(op_.b.dtype, op_.rounding, [&]<DataType T, OperandRounding R>() {
      for (int64_t j = 0; j < nr_; ++j) {
        const int64_t col = cb * nr_ + j;
        if (col >= cols_) {
          for (int64_t k = 0; k < k_; ++k) dst[k * nr_ + j] = 0.0f;
          continue;
        }
        const int64_t c = col / taps_, tap = col % taps_;
        const int64_t r2 = tap % sp_.k[2], r1 = (tap / sp_.k[2]) % sp_.k[1], r0 = tap / (sp_.k[2] * sp_.k[1]);
        const int64_t base = ws.offset + c * ws.ch + r0 * ws.sp[0] + r1 * ws.sp[1] + r2 * ws.sp[2];
        for (int64_t k = 0; k < k_; ++k)
          dst[k * nr_ + j] = round_operand<R>(load<T>(w, base + (g * k_ + k) * ws.n));
      }
    });
  }

  // Converts dy channels [k0, k0 + kn), pixels [p0, p0 + np) of (n, g) into
  // the blocked fp32 copy [tile][kn][mr], zero past the band's last pixel.
  void copy_band(const void* dy, int64_t n, int64_t g, int64_t k0, int64_t kn, int64_t p0, int64_t np,
                 float* dst) const {
    const Strides s = strides_of(op_.a, op_.geo.spatial);
    const int64_t tiles = ceil_div(np, mr_);
    const bool flat = spatial_flat(op_.a);
    dispatch(op_.a.dtype, op_.rounding, [&]<DataType T, OperandRounding R>() {
      if (flat) {
        // Tile by tile, so the copy's stores are sequential: k-outer order
        // stored 24 bytes per line across the whole copy per channel, and
        // every store missed L1.
        using E = typename Elem<T>::type;
        const int64_t base = s.offset + n * s.n + (g * k_ + k0) * s.ch + p0;
        for (int64_t t = 0; t < tiles; ++t) {
          float* const w = dst + t * kn * mr_;
          const int64_t q0 = t * mr_, m = std::min<int64_t>(mr_, np - q0);
          if constexpr (T == DataType::f16) {
            // fp16 through the ISA's converter (F16C): decoded one element
            // at a time, fp16 was 1.45x slower than fp32 on the k10 mono
            // front end. fp32 and bf16 stay below: their loads are a move
            // or a shift, and the converter's masked 6-wide rows cost more.
            if (q0 + kAheadPixels < np)
              for (int64_t k = 0; k < kn; ++k)
                __builtin_prefetch(static_cast<const E*>(dy) + (base + k * s.ch + q0 + kAheadPixels));
            convert_(dy, T, R, base + q0, 1, s.ch, m, kn, w, mr_);
            if (m < mr_)
              for (int64_t k = 0; k < kn; ++k) std::fill(w + k * mr_ + m, w + (k + 1) * mr_, 0.0f);
            continue;
          }
          for (int64_t k = 0; k < kn; ++k) {
            const int64_t src = base + k * s.ch + q0;
            // kn streams advance together; ask for each one 128 pixels ahead
            // at every tile (every 4th tile skipped lines: 5.5 vs 7 ms CPU on
            // wav2vec2; 64 and 384 pixels ahead measured alike or worse).
            if (q0 + kAheadPixels < np)
              __builtin_prefetch(static_cast<const E*>(dy) + (src + kAheadPixels));
            for (int64_t i = 0; i < m; ++i) w[k * mr_ + i] = round_operand<R>(load<T>(dy, src + i));
            for (int64_t i = m; i < mr_; ++i) w[k * mr_ + i] = 0.0f;
          }
        }
        return;
      }
      for (int64_t k = 0; k < kn; ++k) {
        const int64_t plane = s.offset + n * s.n + (g * k_ + k0 + k) * s.ch;
        float* const o = dst + k * mr_;
        // Pixel q of the band goes to tile q / 6, lane q % 6: walk both
        // without a division per element.
        float* w = o;
        int64_t lane = 0;
        for (int64_t p = p0; p < p0 + np;) {
          const int64_t row = p / sp_.y[2], a = p % sp_.y[2], b = std::min(sp_.y[2], a + (p0 + np - p));
          int64_t src = plane + (row / sp_.y[1]) * s.sp[0] + (row % sp_.y[1]) * s.sp[1] + a * s.sp[2];
          for (int64_t q = a; q < b; ++q, src += s.sp[2]) {
            w[lane] = round_operand<R>(load<T>(dy, src));
            if (++lane == mr_) lane = 0, w += kn * mr_;
          }
          p += b - a;
        }
        for (int64_t q = np; q < tiles * mr_; ++q) {
          w[lane] = 0.0f;
          if (++lane == mr_) lane = 0, w += kn * mr_;
        }
      }
    });
  }

  // The same channels as bf16 pairs of neighbouring channels, [tile][kn/2][mr]
  // (zero past an odd kn and past the band's last pixel): planar dy bit for
  // bit, tile by tile; other layouts through the fp32 copy (`scratch`).
  void copy_band_pairs(const void* dy, int64_t n, int64_t g, int64_t k0, int64_t kn, int64_t p0, int64_t np,
                       float* scratch, uint32_t* dst) const {
    const int64_t tiles = ceil_div(np, mr_), steps = (kn + 1) / 2;
    if (band_fp32_) {
      copy_band(dy, n, g, k0, kn, p0, np, scratch);
      for (int64_t t = 0; t < tiles; ++t) pack_row_pairs(scratch + t * kn * mr_, kn, mr_, dst + t * steps * mr_);
      return;
    }
    const Strides s = strides_of(op_.a, op_.geo.spatial);
    const uint16_t* const src = static_cast<const uint16_t*>(dy) + (s.offset + n * s.n + (g * k_ + k0) * s.ch + p0);
    for (int64_t t = 0; t < tiles; ++t) {
      uint32_t* const w = dst + t * steps * mr_;
      const int64_t q0 = t * mr_, m = std::min<int64_t>(mr_, np - q0);
      for (int64_t kk = 0; kk < steps; ++kk) {
        const uint16_t* const even = src + 2 * kk * s.ch + q0;
        if (q0 + kAheadPixels < np) {
          __builtin_prefetch(even + kAheadPixels);
          if (2 * kk + 1 < kn) __builtin_prefetch(even + s.ch + kAheadPixels);
        }
        uint32_t* const o = w + kk * mr_;
        gemm::interleave_pair_rows(even, 2 * kk + 1 < kn ? even + s.ch : nullptr, m, o);
        for (int64_t i = m; i < mr_; ++i) o[i] = 0;
      }
    }
  }

  void image(const OpArgs& args, const float* pack, int64_t n, int64_t g, float* slot) const {
    float* const tb = slot;  // T band: [cols_pad][band_pitch_]
    float* const ab = tb + round_up(cbn_ * nr_ * band_pitch_, 16);
    uint32_t* const abp = reinterpret_cast<uint32_t*>(ab + round_up(band_fp32_ ? kc_ * band_pitch_ : 0, 16));
    float* const acc = reinterpret_cast<float*>(abp) + round_up((pairs_ ? (kc_ + 1) / 2 : 0) * band_pitch_, 16);
    float* const tile = acc + round_up(acc_floats_, 16);
    float* const tacc = tile + mr_ * nr_;
    std::memset(acc, 0, static_cast<size_t>(acc_floats_) * sizeof(float));

    const int64_t zero = 0;
    MicroArgs ka;
    int64_t kn = 0, steps = 0;  // channels of the K chunk; kernel steps (pairs: half, rounded up)
    ka.a_off = &zero;
    ka.b_off = &zero;
    ka.len = &steps;
    ka.runs = 1;
    ka.as = mr_;
    ka.bs = nr_;
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
        for (int64_t cb = 0; cb < cbn_; ++cb) {
          ka.b = pack + ((g * cbn_ + cb) * k_steps_ + (pairs_ ? k0 / 2 : k0)) * nr_;
          float* const tcb = tb + cb * nr_ * band_pitch_;
          for (int64_t pt = 0; pt < np; pt += mr_) {
            ka.a[0] = band + pt * steps;
            ka.acc = tacc_floats_ > 0 ? tacc + (cb * band_pitch_ + pt) * nr_ : tile;
            kern_(ka);
            if (!last) continue;
            // The tile transposed into T's columns by the channels-last
            // converter's register transpose (the tile's pixels as its
            // channels): element by element, this was a third of the GEMM's
            // time on the stem.
            const int64_t rows = std::min<int64_t>(mr_, np - pt);
            convert_(ka.acc, DataType::f32, OperandRounding::none, 0, nr_, 1, rows, nr_, tcb + pt, band_pitch_);
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
  MicroKernel kern_ = nullptr;
  int64_t mr_ = 0, nr_ = 0;  // the kernel\'s tile: rows, and columns per block (kernel config)
  ToChannelsLast convert_ = nullptr;
  StoreRow store_row_ = nullptr;
  AddRow add_row_ = nullptr;
  int64_t groups_ = 1, n_ = 0, k_ = 0, c_ = 0, taps_ = 1, cols_ = 0, cbn_ = 0;
  int64_t pixels_ = 0, band_ = 0, band_pitch_ = 0, u2_ = 0, acc_row_ = 0, acc_floats_ = 0;
  int64_t kc_ = 0, tacc_floats_ = 0, pack_floats_ = 0, slot_floats_ = 0;
  bool pairs_ = false;   // bf16 pair kernels (kernels/gemm.hpp)
  bool band_fp32_ = true;  // the band goes through the fp32 copy (all but planar bf16 pairs)
  int64_t k_steps_ = 0;  // kernel steps over all of K (pairs: half, rounded up)
  std::array<Tap2, 1024> tap2_{};
  bool ok_ = true;
};

}  // namespace
}  // namespace convbwd::detail::small_channels

namespace convbwd::detail {

const Implementation kSmallChannelsBwdDataImpl = {
    "small_channels_dgrad",
    [](const OpSpec& op, const PlanContext& ctx, std::string* why) -> std::unique_ptr<OpKernel> {
      if (!small_channels::supported(op, Op::bwd_data, why)) return nullptr;
      auto k = std::make_unique<small_channels::DgradKernel>(op, ctx, why);
      if (!k->ok()) return nullptr;
      return k;
    }};

}  // namespace convbwd::detail
