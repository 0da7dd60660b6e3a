#include "args.hpp"

#include <charconv>
#include <regex>
#include <cstdlib>
#include <string>
#include <string_view>

#include "runtime/thread_pool.hpp"

namespace convbwd::cli {

const char* to_string(Mode m) {
  switch (m) {
    case Mode::check: return "check";
    case Mode::perf: return "perf";
    case Mode::all: return "all";
    case Mode::data: return "data";
  }
  return "?";
}

namespace {

Error usage(std::string message) {
  return Error{Status::invalid_parameter, std::move(message) + " (see convbwd --help)"};
}

template <class T>
std::optional<T> parse_int(std::string_view s, T lo, T hi) {
  T v{};
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < lo || v > hi) return std::nullopt;
  return v;
}

}  // namespace

Result<bool> apply_knob(std::string_view arg, Knobs& k) {
  auto bad = [&](std::string why) { return Error{Status::invalid_parameter, std::string(arg) + " " + why}; };
  if (arg == "--conv") return (k.deconv = false, true);
  if (arg == "--deconv") return (k.deconv = true, true);
  if (arg == "--reset") return (k = Knobs{}, true);
  const size_t eq = arg.find('=');
  if (eq == std::string_view::npos) return false;
  const std::string_view name = arg.substr(0, eq), value = arg.substr(eq + 1);
  if (name == "--dir") {
    // benchdnn's directions; convbwd computes backward passes only.
    if (value == "BWD_D") k.dir = std::array<bool, 3>{true, false, false};
    else if (value == "BWD_W") k.dir = std::array<bool, 3>{false, true, false};
    else if (value == "BWD_WB") k.dir = std::array<bool, 3>{false, true, true};
    else if (value.substr(0, 3) == "FWD")
      return bad("is a forward direction; convbwd computes the backward pass only: BWD_D, BWD_W or BWD_WB");
    else return bad("is unknown; expected BWD_D (gradInput), BWD_W (gradWeight) or BWD_WB (gradWeight, gradBias)");
    return true;
  }
  if (name == "--dt") {
    // benchdnn's order, src:wei:dst: input, weight, gradOutput.
    auto one = [](std::string_view t) -> std::optional<DataType> {
      if (t == "f32") return DataType::f32;
      if (t == "f16") return DataType::f16;
      if (t == "bf16") return DataType::bf16;
      return std::nullopt;
    };
    std::vector<std::string_view> parts;
    for (size_t a = 0;;) {
      const size_t c = value.find(':', a);
      parts.push_back(value.substr(a, c == std::string_view::npos ? std::string_view::npos : c - a));
      if (c == std::string_view::npos) break;
      a = c + 1;
    }
    if (parts.size() != 1 && parts.size() != 3) return bad("needs one dtype or three (src:wei:dst)");
    std::array<DataType, 3> t{};
    for (size_t i = 0; i < 3; ++i) {
      const auto d = one(parts[parts.size() == 1 ? 0 : i]);
      if (!d) return bad("names a dtype convbwd does not run; expected f32, f16 or bf16");
      t[i] = *d;
    }
    k.dt = std::array<DataType, 3>{t[2], t[0], t[1]};  // gradOutput, input, weight
    return true;
  }
  if (name == "--mb") {
    auto v = parse_int<int64_t>(value, 0, INT64_MAX);
    if (!v) return bad("is not a minibatch; expected a non-negative integer (0: the descriptor's)");
    k.mb = *v;
    return true;
  }
  if (name == "--match") {
    try {
      const std::regex check{std::string(value)};
      (void)check;
    } catch (const std::regex_error& e) {
      return bad(std::string("is not a regular expression: ") + e.what());
    }
    k.match = std::string(value);
    return true;
  }
  return false;
}

Result<Options> parse_args(int argc, const char* const* argv) {
  Options o;
  if (argc <= 1) {
    o.no_arguments = true;
    return o;
  }
  Knobs knobs;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    {
      auto k = apply_knob(arg, knobs);
      if (!k) return usage(k.error().message);
      if (k.value()) continue;
    }
    if (arg == "-h" || arg == "--help") {
      o.help = true;
      continue;
    }
    if (arg == "--version") {
      o.version = true;
      continue;
    }
    if (arg == "-v" || arg == "--verbose") {
      o.verbose = true;
      continue;
    }
    if (arg == "--check-all") {
      o.check_all = true;
      continue;
    }
    if (arg == "--cold-cache") {
      o.cold_cache = true;
      continue;
    }
    if (arg.size() < 2 || arg.substr(0, 2) != "--") {
      if (!arg.empty() && arg[0] == '-') return usage("unknown flag '" + std::string(arg) + "'");
      if (arg.empty()) return usage("empty argument; expected a descriptor such as " + std::string(kDefaultDescriptor));
      o.descriptors.emplace_back(arg);
      o.sources.push_back({std::string(arg), false, knobs});
      continue;
    }
    const size_t eq = arg.find('=');
    const std::string name(arg.substr(0, eq));
    if (eq == std::string_view::npos) {
      static const char* const kValued[] = {"--mode",  "--seed",   "--repeats",    "--warmup",
                                            "--threads", "--batch", "--gradOutput", "--input",
                                            "--weight", "--out-dir", "--fill",      "--check-budget", "--csv",
                                            "--json",  "--progress"};
      for (const char* v : kValued)
        if (name == v) return usage(name + " needs a value: " + name + "=VALUE");
      return usage("unknown flag '" + name + "'");
    }
    const std::string_view value = arg.substr(eq + 1);
    const std::string val(value);
    if (name == "--mode") {
      if (value == "check") o.mode = Mode::check;
      else if (value == "perf") o.mode = Mode::perf;
      else if (value == "all") o.mode = Mode::all;
      else if (value == "data") o.mode = Mode::data;
      // benchdnn's letters: C correctness, P performance.
      else if (value == "C") o.mode = Mode::check;
      else if (value == "P") o.mode = Mode::perf;
      else if (value == "CP" || value == "PC") o.mode = Mode::all;
      else return usage("--mode=" + val + " is unknown; expected check, perf, all or data (benchdnn's C, P or CP)");
    } else if (name == "--seed") {
      auto v = parse_int<uint64_t>(value, 0, UINT64_MAX);
      if (!v) return usage("--seed=" + val + " is not a non-negative integer");
      o.seed = *v;
    } else if (name == "--repeats") {
      auto v = parse_int<int>(value, 1, 1000000);
      if (!v) return usage("--repeats=" + val + " is not an integer in [1, 1000000]");
      o.repeats = *v;
    } else if (name == "--warmup") {
      auto v = parse_int<int>(value, 0, 1000000);
      if (!v) return usage("--warmup=" + val + " is not an integer in [0, 1000000]");
      o.warmup = *v;
    } else if (name == "--threads") {
      auto v = parse_int<int>(value, 1, convbwd::detail::kMaxThreads);
      if (!v)
        return usage("--threads=" + val + " is not an integer in [1, " +
                     std::to_string(convbwd::detail::kMaxThreads) + "]");
      o.threads = *v;
    } else if (name == "--fill") {
      if (value == "uniform") o.fill = Fill::uniform;
      else if (value == "ints") o.fill = Fill::small_ints;
      else return usage("--fill=" + val + " is unknown; expected uniform or ints");
    } else if (name == "--check-budget") {
      double v = 0;
      const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      if (ec != std::errc() || ptr != value.data() + value.size() || !(v > 0))
        return usage("--check-budget=" + val + " is not a positive number of GFLOP");
      // The cap keeps the budget's multiply-add count far inside a double's
      // exact integers; --check-all is the way to check everything.
      if (v > 1e9)
        return usage("--check-budget=" + val + " is above the cap of 1e9 GFLOP; use --check-all to check every element");
      o.check_budget_gflop = v;
    } else if (name == "--progress") {
      if (value == "auto") o.progress = Progress::auto_;
      else if (value == "always") o.progress = Progress::always;
      else if (value == "never") o.progress = Progress::never;
      else return usage("--progress=" + val + " is unknown; expected auto, always or never");
    } else if (name == "--batch" || name == "--gradOutput" || name == "--input" || name == "--weight" ||
               name == "--out-dir" || name == "--csv" || name == "--json") {
      if (value.empty()) return usage(name + "= needs a path");
      std::string& dst = name == "--batch"        ? o.batch_file
                         : name == "--gradOutput" ? o.grad_output_path
                         : name == "--input"      ? o.input_path
                         : name == "--weight"     ? o.weight_path
                         : name == "--csv"        ? o.csv_path
                         : name == "--json"       ? o.json_path
                                                  : o.out_dir;
      dst = val;
      if (name == "--batch") o.sources.push_back({val, true, knobs});
    } else {
      return usage("unknown flag '" + name + "'");
    }
  }
  if (o.help || o.version) return o;
  const bool data_files = !o.grad_output_path.empty() || !o.input_path.empty() || !o.weight_path.empty() ||
                          !o.out_dir.empty();
  if (data_files && o.mode != Mode::data)
    return usage("--gradOutput, --input, --weight and --out-dir belong to --mode=data");
  if (o.mode == Mode::data) {
    // Data mode writes .npy files and no case rows: a results file asked for
    // would silently stay unwritten.
    if (!o.csv_path.empty() || !o.json_path.empty())
      return usage("--csv and --json report check and perf runs; --mode=data writes .npy files only");
    if (!o.batch_file.empty()) return usage("--mode=data takes one descriptor, not --batch");
    if (o.descriptors.size() != 1)
      return usage("--mode=data needs exactly one descriptor (it gives stride, padding, dtypes, ...); got " +
                   std::to_string(o.descriptors.size()));
    if (o.grad_output_path.empty()) return usage("--mode=data needs --gradOutput=FILE.npy");
    if (o.out_dir.empty()) return usage("--mode=data needs --out-dir=DIR");
  } else if (o.sources.empty()) {
    return usage("no descriptor given; expected e.g. convbwd " + std::string(kDefaultDescriptor) +
                 ", --batch=FILE, or no arguments at all for the built-in default");
  }
  return o;
}

const char* help_text() {
  return R"(convbwd: the backward pass of a convolution (gradInput, gradWeight, gradBias)
on the CPU, with the numerics of CANN's aclnnConvolutionBackward.

USAGE
  convbwd                                   run the built-in default problem (checked and timed)
  convbwd [FLAGS] DESCRIPTOR...             run each problem (default mode: check)
  convbwd [FLAGS] --batch=FILE              run every descriptor in FILE
  convbwd --mode=data DESCRIPTOR --gradOutput=go.npy [--input=x.npy] [--weight=w.npy] --out-dir=DIR

  With no arguments convbwd runs the CANN 2D sample's problem,
  mb4ic30ih80oc320kh3ph1 (N=4, C=30, 80x80, 320 filters 3x3, pad 1, fp32):
  it checks it against the reference, times it, and ends with PASS.

MODES (--mode=...)
  check   Fill gradOutput, input and weight with seeded data, run the plan,
          run the fp64 reference on the same data, and compare every requested
          output. Prints the implementation chosen per gradient, the worst
          scaled error |got - ref| / tolerance and PASS (all <= 1) or FAIL.
          tolerance = 2*u_out*|ref| + n*2^-24*sum|products| + 2^-24
          (u_out: 2^-24 fp32, 2^-11 fp16, 2^-8 bf16; n: reduction length).
          The reference runs on all cores. Problems whose reference work
          exceeds --check-budget GFLOP are checked on a seeded random subset
          of output slices (always the first and last), and the report says so;
          --check-all checks everything.
  perf    Time Plan::execute: --warmup runs, then --repeats timed runs.
          Prints median and min ms, GFLOP/s (Plan::flops() / median; 2 flops
          per multiply-add, padding taps included), the implementations,
          threads and ISA.
  all     check, then perf.
  data    Read gradOutput/input/weight from .npy files, compute the gradients
          the descriptor's mask asks for, write gradInput.npy, gradWeight.npy
          and gradBias.npy into --out-dir (created if missing). The files'
          shapes give the sizes; the descriptor gives stride, padding,
          dilation, groups, transposed, dtypes, mask and math mode (sizes it
          restates, and the dtypes, must agree with the files).
          --input is needed for gradWeight, --weight for gradInput.

FLAGS
  --mode=check|perf|all|data   see MODES (default: check; no arguments: all)
  --seed=N          seed of the generated data (default 1). With --fill=uniform
                    the data equals the tests' check_against_reference(seed=N)
                    with contiguous layouts.
  --fill=uniform|ints  data: uniform in [-1,1] (default), or integers in
                    [-3,3], for which fp32 results must match exactly
  --repeats=N       perf: timed runs (default 5; 3 when one run takes > 1 s)
  --warmup=N        perf: untimed runs before timing (default 1)
  --cold-cache      perf: before every run, write a 64 MiB buffer, so the
                    operands come from memory as in a training step rather
                    than from the cache the previous run filled
  --threads=N       threads for the library (convbwd::set_num_threads) and for
                    the reference in check mode (default: CONVBWD_NUM_THREADS,
                    else all cores)
  --check-all       check every output element, however large the problem
  --check-budget=G  reference work in GFLOP (values plus sum|products|) above
                    which a subset is checked (default 1: the reference is
                    plain loops, about 0.1 GFLOP/s per thread)
  --batch=FILE      run FILE's descriptors: words as on a command line, knobs
                    and nested --batch= among them; '#' starts a comment
  --gradOutput=F --input=F --weight=F --out-dir=DIR   data mode files
  --csv=FILE        also write one CSV row per case to FILE (check and perf):
                    name,descriptor,mode,gradients,dtype,outcome,
                    worst_scaled_error,subset,median_ms,gflops,repro
  --json=FILE       also write the same fields to FILE as one JSON array of
                    objects, one per case; FILE is rewritten after every case
                    (via FILE.tmp), so it is valid JSON even if a run stops
  --progress=auto|always|never  the progress line on stderr, rewritten in
                    place (never on stdout): a batch's case count when the
                    report goes to a file, and how many elements of which
                    gradient a check running over 1 s has done. auto (default):
                    when stderr is a terminal; always: also when it is not,
                    and at once
  -v, --verbose     print why each implementation was chosen or declined
                    (sets CONVBWD_VERBOSE=1)
  -h, --help        this text

BENCHDNN KNOBS (apply to the descriptors after them; also in batch files)
  --conv, --deconv  normal or transposed problems (--deconv is _tr)
  --dir=BWD_D|BWD_W|BWD_WB  gradInput | gradWeight | gradWeight and gradBias
  --dt=T or --dt=SRC:WEI:DST  dtypes of input, weight, gradOutput (f32 f16 bf16)
  --mb=N            minibatch of every descriptor (0: the descriptor's)
  --match=REGEX     only the descriptors REGEX matches
  --mode=C|P|CP     check | perf | both
  --reset           the knobs' defaults again
  --version         the library's version and the instruction-set tier in use

  Every case prints a one-line 'repro:' command that reruns it.
  Exit status: 0 all passed, 1 a check failed, 2 bad flag, descriptor, file
  or problem (message on stderr).

DESCRIPTOR SYNTAX
  A problem is one string of tokens: a lowercase name followed by a
  non-negative integer, e.g. mb4ic30ih80oc320kh3ph1, plus options introduced
  by '_'. Token order does not matter; each token may appear once.

  mbN     minibatch N                                          (default 2)
  gN      groups (Cin and Cout divisible by N)                 (default 1)
  icN     input channels Cin                                   (required)
  ocN     output channels Cout                                 (default ic)
  idN ihN iwN   input depth/height/width                       (required)
  odN ohN owN   output size: optional; a padding not given is deduced
                from it as benchdnn does (trailing: what it leaves)
  kdN khN kwN   kernel size                                    (default 1)
  sdN shN swN   stride                                         (default 1)
  pdN phN pwN   padding before (and after, unless given below) (default 0)
  pdrN phrN pwrN  padding after, for asymmetric padding        (default: before)
  ddN dhN dwN   dilation counted from 0 (dh0 dense, dh1 factor 2) (default 0)
  n"NAME"       the name shown in reports (benchdnn's shape files)
  opdN ophN opwN  output padding, transposed only, < stride    (default 0)
  mathN   cubeMathType: 0 KEEP_DTYPE, 1 ALLOW_FP32_DOWN_PRECISION (HF32),
          2 USE_FP16, 3 USE_HF32                               (default 0)
  _tr     transposed convolution: input [N,Cin,...], weight [Cin,Cout/g,k...]
  _dtT    dtype of all tensors, T = f32 (fp32), f16 (fp16), bf16, hif8,
          f8e4m3 (e4m3); _dtA:B:C gives gradOutput:input:weight separately
          (mixed types compute in the wider type; fp16 with bf16 in fp32)
  _maskXYZ  which gradients: X gradInput, Y gradWeight, Z gradBias (default 111)

  Rank: the deepest spatial dim named by any token: 'd' tokens make it 3D,
  else 'h' tokens 2D, else 'w' tokens 1D. Within a family, a dim that is not
  given takes the value of the dim before it (ih32 means ih32iw32, kh3 means
  kh3kw3), else the family's default. After-padding tokens (pdr/phr/pwr) set
  only their own dim. Output size per dim:
    normal:     o = (i + p_before + p_after - d*(k-1) - 1) / s + 1
    transposed: o = (i - 1)*s - p_before - p_after + d*(k-1) + op + 1

EXAMPLES
  mb4ic30ih80oc320kh3ph1              2D, the CANN sample (the default)
  mb2ic16iw100oc32kw5sw2pw2           1D, stride 2
  mb1ic8id16oc16kd3pd1                3D: 16x16x16 input, 3x3x3 kernel, pad 1
  mb2ic32ih16oc16kh3sh2ph1oph1_tr     transposed, output padding: 32x32 output
  mb2g4ic32ih28oc64kh3ph1             4 groups
  mb2g32ic32ih28oc32kh3ph1            depthwise
  mb2ic16ih32oc16kh3dh1ph2            dilation 2
  mb2ic16ih32oc16kh3ph1pw2phr0pwr1    asymmetric padding [top,bottom,left,right] = [1,0,2,1]
  mb2ic16ih32oc16kh3ph1_dtbf16        bf16 tensors
  mb2ic16ih32oc16kh3ph1_dtf16:f32:f32 fp16 gradOutput, fp32 input and weight
  mb2ic16ih32oc16kh3ph1_mask100       gradInput only
  mb2ic16ih32oc16kh3ph1_math1         fp32 inputs rounded to HF32

DATA MODE FILES (.npy)
  C order, little-endian, format version 1.0, 2.0 or 3.0. Accepted dtypes:
  fp32 '<f4', fp16 '<f2'. NumPy has no bfloat16: bf16 tensors are stored as
  their 16-bit patterns, '<u2' (x.view(np.uint16)) or '<V2' (what ml_dtypes'
  bfloat16 writes); hif8/f8e4m3 as '|u1'. The descriptor's dtype says which
  float type the bits are. Outputs are written the same way (bf16 as '<u2').

ENVIRONMENT
  CONVBWD_NUM_THREADS=N   default thread count, 1 to 256 (--threads overrides it)
  CONVBWD_ISA=TIER        force a lower instruction-set tier than the one detected
                          from the CPU's features (perf mode prints the tier in use)
  CONVBWD_VERBOSE=1       print, while planning, why each implementation was
                          chosen or declined (0: quiet)
  An invalid value is reported with what is accepted, and the tool exits 2.
)";
}

}  // namespace convbwd::cli
