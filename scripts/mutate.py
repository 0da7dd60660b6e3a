#!/usr/bin/env python3
"""Mutation testing on demand (not part of CI): plants one plausible bug at a
time in a scratch copy of the tree and asks whether the suite notices.

For each mutant in MUTANTS (file, search text, replacement): the search text
must occur exactly once in the file; the copy is mutated, rebuilt
incrementally, and `ctest` runs, then (if nothing failed) the `-L isa` tests
again with CONVBWD_ISA=scalar, as scripts/test.sh does. A mutant is *caught*
when a test fails (or the build breaks on purpose-free code: reported apart,
as it says nothing about the tests). The table of the run goes to
docs/mutation.md (--out), naming the tests that caught each mutant.

The worktree is never touched: the tracked files (with their uncommitted
edits) are copied to --scratch (default /tmp/convbwd-mutate), built there
once, and each mutated file is restored before the next mutant.

    scripts/mutate.py                   # every mutant, table to docs/mutation.md
    scripts/mutate.py --only dilation_clamp_in_space_of --out -
    scripts/mutate.py --list

When a real bug escapes the suite, add it here as a mutant, then write the
test that catches what it breaks.
"""
import argparse
import datetime
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (name, file, search, replacement, what the bug breaks)
MUTANTS = [
    # --- the four that survived the audit of issue 20 -------------------------
    ("dilation_clamp_in_space_of", "src/problem/spec.hpp",
     "s.d[shift + i] = g.dilation[i];",
     "s.d[shift + i] = g.dilation[i] > 2 ? 2 : g.dilation[i];",
     "dilation above 2 wrong in every path that reads Space (GEMMs, small channels, reference alike)"),
    ("use_hf32_does_not_round", "src/problem/validate.cpp",
     "s.rounding = OperandRounding::hf32;",
     "s.rounding = OperandRounding::none;",
     "cubeMathType 1/3 leave fp32 operands unrounded (reference included)"),
    ("tolerance_times_1000", "src/numeric/tolerance.hpp",
     "return 2 * unit_roundoff(out) * std::fabs(ref) +",
     "return 1000 * unit_roundoff(out) * std::fabs(ref) + 999 * 0x1p-24 * sum_abs_products +",
     "the comparison accepts errors a thousand times too large"),
    ("convbwd_isa_scalar_ignored", "src/runtime/cpu.cpp",
     "  const std::optional<Isa> want = isa_from_string(e);",
     "  const std::optional<Isa> want = std::string_view(e) == \"scalar\" ? std::optional<Isa>(best) : isa_from_string(e);",
     "the scalar rerun silently runs the best ISA again"),
    # --- operand rounding --------------------------------------------------------
    ("use_fp16_does_not_round", "src/problem/validate.cpp",
     "s.rounding = OperandRounding::fp16;",
     "s.rounding = OperandRounding::none;",
     "cubeMathType 2 leaves fp32 operands unrounded (reference included)"),
    ("avx2_hf32_ties_toward_zero", "src/kernels/avx2/float_formats_avx2.hpp",
     "_mm256_add_epi32(u, _mm256_set1_epi32(0x800))",
     "_mm256_add_epi32(u, _mm256_set1_epi32(0x7ff))",
     "AVX2 HF32 operand rounding breaks ties toward zero instead of away"),
    ("scalar_hf32_truncates", "src/numeric/float_formats.hpp",
     "return std::bit_cast<float>((u + 0x800u) & 0xfffff000u);",
     "return std::bit_cast<float>((u + 0x7ffu) & 0xfffff000u);",
     "the portable HF32 rounding breaks ties toward zero"),
    # --- reductions, tails and bounds ------------------------------------------------
    ("bias_drops_first_chunk", "src/impl/bias/bias_impl.cpp",
     "for (int64_t i = 0; i < p_.chunks; ++i) s += partials",
     "for (int64_t i = 1; i < p_.chunks; ++i) s += partials",
     "a long bias sum loses its first chunk's partial sum"),
    ("wgrad_1x1_restarts_per_image", "src/impl/gemm/wgrad_1x1.cpp",
     "ka.accumulate = !one_pass_ && !(n0 == 0 && p0 == 0);",
     "ka.accumulate = !one_pass_ && !(p0 == 0);",
     "the planar 1x1 weight gradient forgets earlier images when it takes several passes"),
    ("fp8_skips_first_column", "src/impl/fp8_direct/fp8_direct_impl.cpp",
     "out[o2] += wv * lut_a_[x[row + i2 * xs_[2]]];",
     "if (i2 > 0) out[o2] += wv * lut_a_[x[row + i2 * xs_[2]]];",
     "the fp8 transposed gradInput drops every product of the image's first column"),
    ("reference_dgrad_ignores_stride_phase", "src/reference/reference.cpp",
     "if (t < 0 || t % s.s[d] != 0 || t / s.s[d] >= s.y[d]) return;",
     "if (t < 0 || t / s.s[d] >= s.y[d]) return;",
     "the reference's data gradient takes taps that fall between strided positions"),
    ("small_channels_dgrad_short_tail", "src/impl/small_channels/dgrad_columns.cpp",
     "const size_t bytes = static_cast<size_t>(std::min<int64_t>(nr_, np - pt)) * sizeof(float);",
     "const size_t bytes = static_cast<size_t>(std::min<int64_t>(nr_, np - pt) - (np - pt < nr_ && np - pt > 1)) * sizeof(float);",
     "the small-channel data gradient leaves the last pixel of a short tile tail out"),
    ("gemm_gather_tail_tile_extra_row", "src/impl/gemm/gather_conv.cpp",
     "row_count[j] = static_cast<int>(std::min<int64_t>(mr_, batch_pixels - tl * mr_));",
     "row_count[j] = static_cast<int>(std::min<int64_t>(mr_, batch_pixels - tl * mr_ + 1));",
     "the implicit GEMM (forward, phase data gradient) stores a row past a batch's last pixel"),
    ("gemm_phase_bundle_members_swapped", "src/impl/gemm/gather_conv.cpp",
     "float* to = interleaved + (i * bundle_ + q) * nr_;",
     "float* to = interleaved + (i * bundle_ + (bundle_ - 1 - q)) * nr_;",
     "the phase data gradient's bundles interleave their members' pixels in reverse order"),
    ("small_channels_pairs_odd_tail_unpadded", "src/impl/small_channels/small_channels_common.hpp",
     "  if (len % 2)\n    for (int64_t j = 0; j < width; ++j)",
     "  if (false)\n    for (int64_t j = 0; j < width; ++j)",
     "the small-channel bf16 pair copies leave an odd chunk's last pair unwritten"),
    ("small_channels_dgrad_pair_pack_unzeroed", "src/impl/small_channels/dgrad_columns.cpp",
     "std::memset(d, 0, static_cast<size_t>(k_steps_ * cols_pad_) * sizeof(uint32_t));",
     "(void)d;",
     "the small-channel data gradient's bf16 weight pairs keep stale workspace past the last column and an odd K"),
    ("depthwise_cl_wide_blocks_drop_a_bit", "src/kernels/avx512/depthwise_simd_avx512.hpp",
     "  [[gnu::always_inline]] static void transpose(R* r) { transpose16x16(r); }",
     "  [[gnu::always_inline]] static void transpose(R* r) {\n    transpose16x16(r);\n    for (int c = 0; c < 16; ++c)\n"
     "      r[c] = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(r[c]), _mm512_set1_epi32(~1)));\n  }",
     "the 16-channel depthwise blocks pack operands a last bit off (within tolerance, but not the 8-channel blocks' bits)"),
    ("depthwise_cl_wide_blocks_skip_last_channel", "src/kernels/depthwise/depthwise_view_rows.hpp",
     "      if (c >= nv)\n        r[c] = V::zero();",
     "      if (c >= nv - (nv > 8))\n        r[c] = V::zero();",
     "the 16-channel depthwise blocks read a block's last channel as zeros"),
    ("depthwise_cl_copied_planes_short", "src/kernels/depthwise/depthwise_cl_kernel.hpp",
     "static_cast<size_t>(plane) * sizeof(float));",
     "static_cast<size_t>(plane - 1) * sizeof(float));",
     "the depthwise planes copied into a cache-sized output (not streamed) leave each plane's last value unwritten"),
    ("small_channels_dgrad_joined_tile_short", "src/impl/small_channels/dgrad_columns.cpp",
     "--tiles_, last_rows_ += mr_;",
     "--tiles_, last_rows_ += mr_ - 1;",
     "the small-channel data gradient's last column tile, joined to the one before it, drops a column"),
    ("bf16_cvtne_store_denormals_zero", "src/kernels/avx512/float_formats_avx512.hpp",
     "return denormal == 0 ? h : _mm256_mask_blend_epi16(denormal, h, float_to_bf16x16(v));",
     "return denormal == 0 ? h : h;",
     "the avx512_bf16 tier's bf16 stores keep vcvtneps2bf16's zero for a denormal fp32 result"),
    ("shift_pair_words_next_word", "src/kernels/interleave_pairs.hpp",
     "dst[i] = src[i] >> 16 | src[i + pitch] << 16;",
     "dst[i] = src[i] >> 16 | src[i + 1] << 16;",
     "the shifted pair words take the next word's low half, not the next slot's"),
    ("pixel_pair_odd_class_wrong_pitch", "src/impl/gemm/common.cpp",
     "shift_pair_words(o - slots * cp, slots * cp, cp, o);",
     "shift_pair_words(o - slots * cp, slots * cp, 1, o);",
     "the weight gradient's derived odd column class pairs each channel with the next channel"),
    ("depthwise_direct_planes_tail_past_plane", "src/kernels/depthwise/depthwise_cl_kernel.hpp",
     "if (direct_planes(p, nv) && r * count + count_round <= rows * count) {",
     "if (direct_planes(p, nv) && (count_round == count || r + 1 < rows)) {",
     "the depthwise planes written in place let a row's vector tail reach past the plane when it spans several rows"),
    ("wgrad_one_pass_runs_of_tap0", "src/impl/gemm/wgrad_conv.cpp",
     "const TapRuns& r = tap_runs_[static_cast<size_t>(t.tap)];",
     "const TapRuns& r = tap_runs_[0];",
     "the one-pass weight gradient runs every tap over the first tap's cached runs"),
    ("wgrad_unit_store_from_tap_zero", "src/impl/gemm/wgrad_conv.cpp",
     "const float* const src = tile + tap_lo * pitch + i * nr_;",
     "const float* const src = tile + i * nr_;",
     "the one-pass weight gradient's unit store reads a task's partial unit from its first tap's tile"),
    ("wgrad_1x1_transposed_col_stride", "src/impl/gemm/wgrad_1x1.cpp",
     "dst_col_ = w.strides[transposed_ ? 0 : 1];",
     "dst_col_ = w.strides[1];",
     "the planar 1x1 weight gradient stores dW^T tiles (x on the A side) with dW's column stride"),
    ("x_copy_phase_second_offset", "src/impl/gemm/common.cpp",
     "float* const to_second = o + (first_is_q0 ? phase_pitch : 0) + ((w_lo + 1) / 2) * cp;",
     "float* const to_second = o + (first_is_q0 ? phase_pitch : 0) + (w_lo / 2) * cp;",
     "the stride-2 weight gradient's x copy puts a padded row's second column phase one pixel off"),
    ("dw_w_rows_unrounded", "src/kernels/depthwise/depthwise_view_rows.hpp",
     "r[c] = V::round(V::from(base, T, rows[c] + j), R);",
     "r[c] = V::from(base, T, rows[c] + j);",
     "the depthwise loader's whole blocks of W channel rows skip the operand rounding (HF32, FP16 modes)"),
    ("dw_w_rows_tail_short", "src/kernels/depthwise/depthwise_view_rows.hpp",
     "r[c] = V::round(V::from_partial(base, T, rows[c] + j, cnt), R);",
     "r[c] = V::round(V::from_partial(base, T, rows[c] + j, cnt - 1), R);",
     "the depthwise loader drops the last pixel of a row's tail when it loads W channel rows"),
    ("dw_w_rows_nonfinite_unreported", "src/kernels/depthwise/depthwise_view_rows.hpp",
     "  return V::beyond_finite(mag);",
     "  return V::beyond_finite(mag) && false;",
     "the depthwise loader's whole blocks of W channel rows never report the NaN or Inf they load"),
    ("dw_planes_16bit_short", "src/kernels/depthwise/depthwise_cl_kernel.hpp",
     "p.store_rows(planes, p.plane_stride, nv, plane, dst, v.dtype, v.off + n * v.sn + ch0 * v.sc, v.sc);",
     "p.store_rows(planes, p.plane_stride, nv, plane - 1, dst, v.dtype, v.off + n * v.sn + ch0 * v.sc, v.sc);",
     "the depthwise plane mode leaves the last pixel of each 16-bit output plane unwritten"),
    ("weight_pack_rows_unrounded", "src/impl/gemm/common.cpp",
     "if (full > 0) convert(base, v.dtype, rounding, row, 1, nr, nr, full, o, block_floats());",
     "if (full > 0) convert(base, v.dtype, OperandRounding::none, row, 1, nr, nr, full, o, block_floats());",
     "the data gradient's unit-stride weight rows skip the operand rounding (HF32, FP16 modes)"),
    ("wgrad_group_offset", "src/impl/gemm/wgrad_conv.cpp",
     "return xs + t.g * x_image() + t.cb",
     "return xs + t.cb",
     "the weight gradient reads group 0's x copy for every group (one pass and chunked)"),
    ("planner_no_relaxed_budget", "src/plan/plan.cpp",
     "if (is_reference(p.impl) && ctx.budget_scale == 1) {",
     "if (false && is_reference(p.impl) && ctx.budget_scale == 1) {",
     "a large image falls to the single-threaded reference instead of a fast path"),
    ("registry_bias_length_drops_batch", "src/impl/registry.cpp",
     "int64_t r = op.a.dims[0];\n      for (int i = 2; i < op.a.rank; ++i) r *= op.a.dims[i];",
     "int64_t r = 1;\n      for (int i = 2; i < op.a.rank; ++i) r *= op.a.dims[i];",
     "the bias reduction length forgets N (chunking and tolerances planned for too short a sum)"),
]


def run(cmd, cwd, env=None, timeout=None, log=None):
    t0 = time.time()
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout)
        out, rc = p.stdout, p.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), -9
        out += "\n[timed out]\n"
    if log:
        with open(log, "a") as f:
            f.write("$ " + " ".join(cmd) + "\n" + out + "\n")
    return rc, out, time.time() - t0


FAILED_RE = re.compile(r"^\s*\d+ - (\S+)")  # parametrized names are followed by "  # GetParam() = ..."


def failed_tests(ctest_out):
    names, seen = [], False
    for line in ctest_out.splitlines():
        if line.startswith("The following tests FAILED"):
            seen = True
            continue
        if seen:
            m = FAILED_RE.match(line)
            if m:
                names.append(m.group(1))
    return names


def copy_tree(dst):
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, stdout=subprocess.PIPE, check=True).stdout
    for rel in files.decode().split("\0"):
        if not rel or not os.path.isfile(os.path.join(ROOT, rel)):
            continue
        target = os.path.join(dst, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        src = os.path.join(ROOT, rel)
        # Unchanged files keep their mtime, so a rerun rebuilds only what changed.
        if os.path.exists(target) and open(target, "rb").read() == open(src, "rb").read():
            continue
        shutil.copy(src, target)  # a fresh mtime, so the build sees the change


def ctest(build, log, scalar):
    env = dict(os.environ)
    # Without the check of the mutants' own search texts: in a mutated tree
    # the planted one is gone by design, so it would "catch" every mutant.
    cmd = ["ctest", "--test-dir", build, "-j", str(os.cpu_count() or 2), "--timeout", "300",
           "-E", "^mutants_name_one_place_each$"]
    if scalar:
        env["CONVBWD_ISA"] = "scalar"
        cmd += ["-L", "isa"]
    else:
        env.pop("CONVBWD_ISA", None)
    rc, out, secs = run(cmd, build, env=env, timeout=1800, log=log)
    return rc, failed_tests(out), secs


def write_table(rows, out, planned):
    """The doc's table of the mutants run so far (rewritten after each)."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                           stdout=subprocess.PIPE, text=True).stdout.strip()
    lines = [
        "# Mutation testing",
        "",
        "`scripts/mutate.py` plants one plausible bug at a time in a scratch copy of",
        "the tree, rebuilds, and runs `ctest` and then the `-L isa` tests with",
        "`CONVBWD_ISA=scalar` (as `scripts/test.sh` does). Every mutant of its list",
        "must be caught; when a real bug escapes the suite, add it as a mutant and",
        "write the test that catches what it breaks. Run on demand, not in CI:",
        "",
        "    scripts/mutate.py            # 1-6 minutes per mutant on 2 cores",
        "    scripts/mutate.py --list",
        "    scripts/mutate.py --only use_hf32_does_not_round --out -",
        "",
        f"Last run: {datetime.date.today().isoformat()}, tree {commit}{' (with uncommitted edits)' if dirty else ''},"
        f" {len(rows)} of {planned} mutants run, {sum(r[3].startswith('caught') for r in rows)} caught.",
        "",
        "| mutant | file | what it breaks | result | caught by (failing tests) |",
        "|---|---|---|---|---|",
    ]
    for name, path, what, result, by, _ in rows:
        lines.append(f"| `{name}` | `{path}` | {what} | {result} | {by} |")
    text = "\n".join(lines) + "\n"
    if out == "-":
        sys.stdout.write(text)
    else:
        os.makedirs(os.path.dirname(out), exist_ok=True)
        open(out, "w").write(text)


def stale_mutants(tree, mutants):
    """Every search text must name one place of the tree: a stale mutant (the
    code moved on) is an error to fix, not a silent pass. Returns one
    message per mutant that does not."""
    stale = []
    for name, path, search, _, _ in mutants:
        n = open(os.path.join(tree, path)).read().count(search)
        if n != 1:
            stale.append(f"mutant {name}: the search text occurs {n} times in {path} (expected exactly once)")
    return stale


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scratch", default="/tmp/convbwd-mutate")
    ap.add_argument("--only", nargs="*", help="names of the mutants to run (default: all)")
    ap.add_argument("--list", action="store_true", help="print the mutants and exit")
    ap.add_argument("--check", action="store_true",
                    help="only check that every mutant's search text occurs once in this tree (a ctest runs it)")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "mutation.md"), help="table file, or - for stdout")
    args = ap.parse_args()
    if args.list:
        for m in MUTANTS:
            print(f"{m[0]:40s} {m[1]}: {m[4]}")
        return 0
    if args.check:
        stale = stale_mutants(ROOT, MUTANTS)
        print("\n".join(stale) if stale else f"all {len(MUTANTS)} mutants name one place of the tree")
        return 1 if stale else 0
    chosen = [m for m in MUTANTS if not args.only or m[0] in args.only]
    unknown = set(args.only or []) - {m[0] for m in MUTANTS}
    if unknown:
        sys.exit("unknown mutant(s): " + ", ".join(sorted(unknown)) + "; see --list")

    src, build = os.path.join(args.scratch, "src"), os.path.join(args.scratch, "build")
    log = os.path.join(args.scratch, "mutate.log")
    os.makedirs(src, exist_ok=True)
    open(log, "w").close()
    copy_tree(src)
    stale = stale_mutants(src, chosen)
    if stale:
        sys.exit("\n".join(stale))

    print(f"scratch tree {src}, log {log}", flush=True)
    rc, out, _ = run(["cmake", "-S", src, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                      "-DCONVBWD_WERROR=OFF", "-DCONVBWD_BUILD_TESTS=ON"], src, log=log)
    if rc:
        sys.exit("configure failed; see " + log)
    rc, _, secs = run(["cmake", "--build", build], src, log=log)
    if rc:
        sys.exit("the unmutated tree does not build; see " + log)
    for scalar in (False, True):
        rc, failed, _ = ctest(build, log, scalar)
        if rc:
            sys.exit("the unmutated tree fails " + ", ".join(failed or ["ctest"]) + ("(scalar rerun)" if scalar else ""))
    print(f"baseline green (build {secs:.0f} s)", flush=True)

    rows = []
    for name, path, search, repl, what in chosen:
        target = os.path.join(src, path)
        original = open(target).read()
        open(target, "w").write(original.replace(search, repl, 1))
        t0 = time.time()
        try:
            rc, _, _ = run(["cmake", "--build", build], src, log=log, timeout=1800)
            if rc:
                result, by = "build error", ""
            else:
                result, by = "survived", ""
                for scalar in (False, True):
                    rc, failed, _ = ctest(build, log, scalar)
                    if rc:
                        result = "caught" + (" (scalar rerun)" if scalar else "")
                        by = ", ".join(failed[:8]) + (f" and {len(failed) - 8} more" if len(failed) > 8 else "")
                        break
        finally:
            open(target, "w").write(original)
        rows.append((name, path, what, result, by, time.time() - t0))
        print(f"{name}: {result} {by} ({rows[-1][5]:.0f} s)", flush=True)
        if args.out != "-":
            write_table(rows, args.out, len(chosen))
    run(["cmake", "--build", build], src, log=log)  # leave the scratch build unmutated

    write_table(rows, args.out, len(chosen))
    if args.out != "-":
        print("table written to " + args.out)
    return 0 if all(r[3].startswith("caught") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
