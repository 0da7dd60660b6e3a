// Data mode end to end: the test writes gradOutput/input/weight as .npy, runs
// the convbwd binary, reads the gradients it wrote and compares them with the
// C++ API run on the same data (bit for bit: same library, deterministic).
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <random>
#include <string>

#include "host.hpp"
#include "npy.hpp"

#ifndef CONVBWD_CLI_PATH
#error "CONVBWD_CLI_PATH must name the convbwd binary (tests/cli/CMakeLists.txt sets it)"
#endif

namespace cli = convbwd::cli;
namespace npy = convbwd::cli::npy;
namespace fs = std::filesystem;
using convbwd::Gradient;
using convbwd::Problem;

namespace {

fs::path scratch_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("convbwd_cli_data_test_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Runs the CLI; returns its exit status (-1 if it did not exit normally).
int run_cli(const std::string& args, const fs::path& log) {
  const std::string cmd = std::string("\"") + CONVBWD_CLI_PATH + "\" " + args + " >\"" + log.string() + "\" 2>&1";
  const int status = std::system(cmd.c_str());
  if (status == -1 || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void write(const fs::path& path, const cli::HostTensor& t) {
  npy::Array a;
  a.descr = std::string(npy::descr_for(t.dtype));
  a.shape = t.dims;
  a.data = t.bytes;
  ASSERT_FALSE(npy::write_file(path.string(), a));
}

// One round trip: CLI output files == Plan::execute on the same data. The
// CLI is given `cli_descriptor` (default: the full one): the .npy files'
// shapes supply the sizes it leaves out.
void round_trip(const std::string& descriptor, std::string cli_descriptor = "") {
  if (cli_descriptor.empty()) cli_descriptor = descriptor;
  SCOPED_TRACE(descriptor + " given as " + cli_descriptor);
  auto parsed = Problem::parse(descriptor);
  ASSERT_TRUE(parsed) << parsed.error().message;
  Problem p = parsed.value();
  std::mt19937_64 rng(21);
  cli::HostTensor go = cli::make_host(p.grad_output.dtype, p.grad_output.dims);
  cli::HostTensor in = cli::make_host(p.input.dtype, p.input.dims);
  cli::HostTensor w = cli::make_host(p.weight.dtype, p.weight.dims);
  for (cli::HostTensor* t : {&go, &in, &w}) cli::fill(*t, cli::Fill::uniform, rng);
  const fs::path dir = scratch_dir(std::to_string(std::hash<std::string>{}(descriptor)));
  write(dir / "go.npy", go);
  write(dir / "x.npy", in);
  write(dir / "w.npy", w);
  const fs::path out = dir / "out";
  const int rc = run_cli("--mode=data " + cli_descriptor + " --gradOutput=" + (dir / "go.npy").string() +
                             " --input=" + (dir / "x.npy").string() + " --weight=" + (dir / "w.npy").string() +
                             " --out-dir=" + out.string(),
                         dir / "log.txt");
  ASSERT_EQ(rc, 0) << slurp(dir / "log.txt");
  EXPECT_NE(slurp(dir / "log.txt").find("repro: convbwd --mode=data " + cli_descriptor), std::string::npos);

  // The same computation through the C++ API.
  p.grad_output = go.desc();
  p.input = in.desc();
  p.weight = w.desc();
  cli::HostTensor outs[3];
  convbwd::TensorDesc* descs[3] = {&p.grad_input, &p.grad_weight, &p.grad_bias};
  for (int i = 0; i < 3; ++i) {
    if (!p.output_mask[i]) continue;
    outs[i] = cli::make_host(p.gradient_dtype(static_cast<Gradient>(i)), p.gradient_dims(static_cast<Gradient>(i)));
    *descs[i] = outs[i].desc();
  }
  auto plan = convbwd::Plan::create(p);
  ASSERT_TRUE(plan) << plan.error().message;
  std::vector<unsigned char> ws(plan->workspace_size() + 64);
  void* aligned = ws.data() + (64 - reinterpret_cast<uintptr_t>(ws.data()) % 64) % 64;
  ASSERT_FALSE(plan->execute({go.data(), in.data(), w.data(), outs[0].data(), outs[1].data(), outs[2].data()},
                             aligned, plan->workspace_size()));

  const char* const names[3] = {"gradInput.npy", "gradWeight.npy", "gradBias.npy"};
  for (int i = 0; i < 3; ++i) {
    if (!p.output_mask[i]) {
      EXPECT_FALSE(fs::exists(out / names[i])) << names[i] << " written though not requested";
      continue;
    }
    auto a = npy::read_file((out / names[i]).string());
    ASSERT_TRUE(a) << a.error().message;
    EXPECT_EQ(a->descr, npy::descr_for(outs[i].dtype)) << names[i];
    EXPECT_EQ(a->shape, outs[i].dims) << names[i];
    EXPECT_EQ(a->data, outs[i].bytes) << names[i] << " differs from Plan::execute";
  }
  fs::remove_all(dir);
}

}  // namespace

TEST(CliData, RoundTripF32) { round_trip("mb2ic5ih9oc7kh3ph1"); }
TEST(CliData, RoundTripBf16AsUint16Bits) { round_trip("mb2ic4ih6oc6kh3sh2ph1_dtbf16"); }
TEST(CliData, RoundTripF16Transposed1DMask) { round_trip("mb2ic6iw9oc4kw3sw2pw1opw1_tr_dtf16_mask101"); }
TEST(CliData, RoundTripGroups3D) { round_trip("mb1g2ic4id4oc6kd3pd1_mask010"); }

// The files hold the shapes: the descriptor needs only what they cannot say.
TEST(CliData, ShapesComeFromTheFiles) {
  round_trip("mb2ic5ih9oc7kh3ph1", "ph1");
  round_trip("mb2ic4ih6iw5oc6kh3kw2sh2ph1pw0_dtbf16", "sh2ph1pw0_dtbf16");
  round_trip("mb2ic6iw9oc4kw3sw2pw1opw1_tr_dtf16_mask101", "sw2pw1opw1_tr_dtf16_mask101");
  round_trip("mb1g2ic4id4oc6kd3pd1_mask010", "g2pd1_mask010");
  // Sizes restated by the descriptor are kept (and must agree with the files).
  round_trip("mb2ic5ih9oc7kh3ph1", "ic5kh3ph1");
}

TEST(CliData, MismatchedFilesAreClearErrors) {
  const fs::path dir = scratch_dir("mismatch");
  cli::HostTensor go = cli::make_host(convbwd::DataType::f32, {1, 2, 4, 4});
  cli::HostTensor bf = cli::make_host(convbwd::DataType::bf16, {1, 2, 4, 4});
  write(dir / "go.npy", go);
  write(dir / "go_bf16.npy", bf);
  // Shape: the descriptor implies [1,2,6,6].
  int rc = run_cli("--mode=data mb1ic2ih6oc2kh3ph1_mask001 --gradOutput=" + (dir / "go.npy").string() +
                       " --out-dir=" + (dir / "out").string(),
                   dir / "log.txt");
  EXPECT_EQ(rc, 2);
  std::string log = slurp(dir / "log.txt");
  EXPECT_NE(log.find("shape [1,2,4,4] does not match gradOutput shape [1,2,6,6]"), std::string::npos) << log;
  // Dtype: the file holds bf16 bits (<u2), the descriptor says fp32.
  rc = run_cli("--mode=data mb1ic2ih4oc2kh3ph1_mask001 --gradOutput=" + (dir / "go_bf16.npy").string() +
                   " --out-dir=" + (dir / "out").string(),
               dir / "log.txt");
  EXPECT_EQ(rc, 2);
  log = slurp(dir / "log.txt");
  EXPECT_NE(log.find("dtype '<u2' does not match gradOutput dtype f32"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(dir / "out" / "gradBias.npy"));
  fs::remove_all(dir);
}
