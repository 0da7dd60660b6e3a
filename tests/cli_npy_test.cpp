// The CLI's .npy reader and writer (tools/convbwd/npy.cpp): round trips, files
// laid out byte for byte as numpy writes them, and every kind of malformed
// file, each rejected with a message that names what is wrong.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "npy.hpp"

namespace npy = convbwd::cli::npy;
using Bytes = std::vector<unsigned char>;

namespace {

// A version-1.0 file with the given header text (padded as numpy pads it)
// followed by `data_bytes` bytes.
Bytes make_file(const std::string& dict, size_t data_bytes, unsigned char major = 1, bool pad = true) {
  std::string h = dict;
  const size_t prefix = major == 1 ? 10 : 12;
  if (pad) {
    while ((prefix + h.size() + 1) % 64 != 0) h += ' ';
    h += '\n';
  }
  Bytes b = {0x93, 'N', 'U', 'M', 'P', 'Y', major, 0};
  const size_t len = h.size();
  b.push_back(static_cast<unsigned char>(len & 0xff));
  b.push_back(static_cast<unsigned char>(len >> 8));
  if (major != 1) {
    b.push_back(static_cast<unsigned char>(len >> 16));
    b.push_back(static_cast<unsigned char>(len >> 24));
  }
  b.insert(b.end(), h.begin(), h.end());
  for (size_t i = 0; i < data_bytes; ++i) b.push_back(static_cast<unsigned char>(i * 7 + 1));
  return b;
}

std::string error_of(const Bytes& b) {
  auto r = npy::parse(b);
  if (r) return "";
  return r.error().message;
}

#define EXPECT_REJECTED(bytes, fragment)                                      \
  do {                                                                        \
    const std::string msg_ = error_of(bytes);                                 \
    EXPECT_NE(msg_, "") << "accepted a malformed file";                       \
    EXPECT_NE(msg_.find(fragment), std::string::npos) << "message: " << msg_; \
  } while (0)

}  // namespace

TEST(CliNpy, ParsesNumpyV1Layout) {
  // Exactly what numpy 1.x np.save writes for np.zeros((2, 3), np.float32).
  Bytes f = make_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24);
  ASSERT_EQ(f.size(), 128u + 24u);  // header padded to 128 bytes, as numpy does
  auto a = npy::parse(f);
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->descr, "<f4");
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a->elements(), 6);
  EXPECT_EQ(a->item_size(), 4u);
  ASSERT_EQ(a->data.size(), 24u);
  EXPECT_EQ(0, std::memcmp(a->data.data(), f.data() + 128, 24));
}

TEST(CliNpy, ParsesVariants) {
  // 1-tuple, scalar, empty dim, double quotes, no trailing comma, other key
  // order, version 2 and 3 headers, Python-2 long suffix.
  struct Case {
    std::string dict;
    size_t bytes;
    std::vector<int64_t> shape;
    unsigned char major;
  } cases[] = {
      {"{'descr': '<f2', 'fortran_order': False, 'shape': (5,), }", 10, {5}, 1},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 4, {}, 1},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3, 0, 2), }", 0, {3, 0, 2}, 1},
      {"{\"shape\": (2,2), \"fortran_order\": False, \"descr\": \"<u2\"}", 8, {2, 2}, 1},
      {"{'descr': '|u1', 'fortran_order': False, 'shape': (4,), }", 4, {4}, 2},
      {"{'descr': '<V2', 'fortran_order': False, 'shape': (3L, 1L), }", 6, {3, 1}, 3},
  };
  for (const Case& c : cases) {
    auto a = npy::parse(make_file(c.dict, c.bytes, c.major));
    ASSERT_TRUE(a) << c.dict << ": " << a.error().message;
    EXPECT_EQ(a->shape, c.shape) << c.dict;
    EXPECT_EQ(a->data.size(), c.bytes) << c.dict;
  }
}

TEST(CliNpy, RoundTripsEveryWrittenDtype) {
  std::mt19937 rng(3);
  for (convbwd::DataType t : {convbwd::DataType::f32, convbwd::DataType::f16, convbwd::DataType::bf16,
                              convbwd::DataType::hif8, convbwd::DataType::f8e4m3}) {
    for (const std::vector<int64_t>& shape :
         {std::vector<int64_t>{}, {0}, {7}, {2, 3, 4}, {1, 2, 3, 4, 5}, {2, 0, 3}}) {
      npy::Array a;
      a.descr = std::string(npy::descr_for(t));
      ASSERT_TRUE(npy::descr_holds(a.descr, t));
      a.shape = shape;
      a.data.resize(static_cast<size_t>(a.elements()) * a.item_size());
      for (auto& byte : a.data) byte = static_cast<unsigned char>(rng());
      auto bytes = npy::serialize(a);
      ASSERT_TRUE(bytes) << bytes.error().message;
      // numpy's alignment: the data starts on a 64-byte boundary, the header
      // ends in a newline.
      const size_t header_end = bytes->size() - a.data.size();
      EXPECT_EQ(header_end % 64, 0u);
      EXPECT_EQ(bytes.value()[header_end - 1], '\n');
      auto b = npy::parse(bytes.value());
      ASSERT_TRUE(b) << b.error().message;
      EXPECT_EQ(b->descr, a.descr);
      EXPECT_EQ(b->shape, a.shape);
      EXPECT_EQ(b->data, a.data);
    }
  }
}

TEST(CliNpy, DescrConventions) {
  using convbwd::DataType;
  EXPECT_TRUE(npy::descr_holds("<f4", DataType::f32));
  EXPECT_FALSE(npy::descr_holds("<f2", DataType::f32));
  EXPECT_TRUE(npy::descr_holds("<f2", DataType::f16));
  EXPECT_FALSE(npy::descr_holds("<u2", DataType::f16));  // fp16 has a numpy type; raw bits would hide mistakes
  EXPECT_TRUE(npy::descr_holds("<u2", DataType::bf16));
  EXPECT_TRUE(npy::descr_holds("<V2", DataType::bf16));  // ml_dtypes.bfloat16 saved by np.save
  EXPECT_FALSE(npy::descr_holds("<f2", DataType::bf16));
  EXPECT_TRUE(npy::descr_holds("|u1", DataType::hif8));
  EXPECT_FALSE(npy::descr_holds("<f4", DataType::hif8));
}

TEST(CliNpy, RejectsMalformedFiles) {
  const std::string ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  EXPECT_REJECTED(Bytes{}, "too short");
  EXPECT_REJECTED((Bytes{0x93, 'N', 'U', 'M'}), "too short");
  Bytes f = make_file(ok, 24);
  f[1] = 'X';
  EXPECT_REJECTED(f, "bad magic");
  f = make_file(ok, 24);
  f[6] = 4;
  EXPECT_REJECTED(f, "format version 4.0");
  f[6] = 0;
  EXPECT_REJECTED(f, "format version 0.0");
  f = make_file(ok, 24);
  f[7] = 1;
  EXPECT_REJECTED(f, "format version 1.1");
  // Header length beyond the file, in v1 and v2 (and beyond the sanity limit).
  f = make_file(ok, 24);
  f[8] = 0xff;
  f[9] = 0xff;
  EXPECT_REJECTED(f, "runs past the end");
  f = make_file(ok, 24, 2);
  f[11] = 0x7f;
  EXPECT_REJECTED(f, "exceeds the limit");
  f = make_file(ok, 0, 2);
  f.resize(11);
  EXPECT_REJECTED(f, "too short for a v2 header");

  // Keys.
  EXPECT_REJECTED(make_file("{'fortran_order': False, 'shape': (2, 3), }", 24), "no 'descr'");
  EXPECT_REJECTED(make_file("{'descr': '<f4', 'shape': (2, 3), }", 24), "no 'fortran_order'");
  EXPECT_REJECTED(make_file("{'descr': '<f4', 'fortran_order': False, }", 24), "no 'shape'");
  EXPECT_REJECTED(make_file("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (6,)}", 24),
                  "appears twice");
  EXPECT_REJECTED(make_file("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'extra': 1}", 24),
                  "unexpected key 'extra'");
  EXPECT_REJECTED(make_file("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 24), "fortran_order is True");
  EXPECT_REJECTED(make_file("{'descr': '<f4', 'fortran_order': Fals, 'shape': (2, 3), }", 24), "True or False");

  // Dtypes.
  EXPECT_REJECTED(make_file("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", 24), "float32");
  EXPECT_REJECTED(make_file("{'descr': '>f4', 'fortran_order': False, 'shape': (6,), }", 24), "big-endian");
  EXPECT_REJECTED(make_file("{'descr': '<i4', 'fortran_order': False, 'shape': (6,), }", 24), "'<i4' is not supported");
  EXPECT_REJECTED(make_file("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,), }", 24),
                  "structured dtype");
  EXPECT_REJECTED(make_file("{'descr': '', 'fortran_order': False, 'shape': (6,), }", 24), "not supported");

  // Shapes.
  EXPECT_REJECTED(make_file("{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 3), }", 24), "negative");
  EXPECT_REJECTED(make_file("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 24),
                  "does not fit");
  EXPECT_REJECTED(
      make_file("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 24),
      "more than 2^63");
  // Fits in 63 bits, but the file cannot hold it.
  EXPECT_REJECTED(make_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000, 1000000000), }", 24),
                  "shorter than");  // fits in 63 bits but the file cannot hold it
  EXPECT_REJECTED(make_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2.5,), }", 24), "expected ','");
  EXPECT_REJECTED(make_file("{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3], }", 24), "must be a tuple");
  EXPECT_REJECTED(make_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, }", 24), "non-negative integers");
  {
    std::string many = "(";
    for (int i = 0; i < 65; ++i) many += "1,";
    EXPECT_REJECTED(make_file("{'descr': '<f4', 'fortran_order': False, 'shape': " + many + "), }", 4),
                    "more than 64 dimensions");
  }

  // Data size.
  EXPECT_REJECTED(make_file(ok, 23), "shorter than");
  EXPECT_REJECTED(make_file(ok, 0), "shorter than");
  EXPECT_REJECTED(make_file(ok, 25), "longer than");

  // Syntax.
  EXPECT_REJECTED(make_file("'descr': '<f4'", 24), "does not start with '{'");
  EXPECT_REJECTED(make_file("{'descr: '<f4', 'fortran_order': False, 'shape': (6,)}", 24), "expected ':'");
  EXPECT_REJECTED(make_file("{'descr': '<f4", 24), "unterminated string");
  EXPECT_REJECTED(make_file("{'descr': '<f4', 'fortran_order': False, 'shape': (6,)} x", 24), "after the header");
  EXPECT_REJECTED(make_file("{'descr': '<f\\x34', 'fortran_order': False, 'shape': (6,)}", 24), "escape");
  EXPECT_REJECTED(make_file("{'descr': '<f4' 'fortran_order': False, 'shape': (6,)}", 24), "expected ',' or '}'");
  EXPECT_REJECTED(make_file("{descr: '<f4'}", 24), "in quotes");
  {
    std::string nul = "{'descr': '<f4', 'fortran_order': False, 'shape': (6,)}";
    nul[16] = '\0';
    EXPECT_REJECTED(make_file(nul, 24), "NUL");
  }
  EXPECT_REJECTED(make_file("{'descr': '<f4', 'fortran_order': False, 'shape': (6,)", 24, 1, false), "expected");
}

TEST(CliNpy, SerializeRejectsInconsistentArrays) {
  npy::Array a;
  a.descr = "<f8";
  EXPECT_FALSE(npy::serialize(a));
  a.descr = "<f4";
  a.shape = {2, 2};
  a.data.resize(12);
  EXPECT_FALSE(npy::serialize(a));
  a.shape = {-1, 2};
  EXPECT_FALSE(npy::serialize(a));
}

// Mutated and truncated versions of valid files: every result is either a
// clean array whose data matches its shape or an error; never a crash or an
// out-of-bounds read (the sanitizer build would see one).
TEST(CliNpy, SurvivesMutations) {
  std::mt19937_64 rng(11);
  const Bytes base = make_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24);
  int accepted = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    Bytes f = base;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      switch (rng() % 4) {
        case 0: f[rng() % f.size()] = static_cast<unsigned char>(rng()); break;
        case 1: f.resize(rng() % (f.size() + 1)); break;
        case 2: f.insert(f.begin() + static_cast<long>(rng() % (f.size() + 1)), static_cast<unsigned char>(rng())); break;
        case 3: if (!f.empty()) f.erase(f.begin() + static_cast<long>(rng() % f.size())); break;
      }
      if (f.empty()) break;
    }
    auto a = npy::parse(f);
    if (a) {
      ++accepted;
      ASSERT_EQ(a->data.size(), static_cast<size_t>(a->elements()) * a->item_size());
    } else {
      ASSERT_FALSE(a.error().message.empty());
    }
  }
  EXPECT_GT(accepted, 0);  // some mutations (e.g. in the data) stay valid
}

TEST(CliNpy, FileErrorsNameThePath) {
  auto missing = npy::read_file("/nonexistent/dir/x.npy");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("/nonexistent/dir/x.npy: no such file"), std::string::npos);
  const auto dir = std::filesystem::temp_directory_path();
  auto d = npy::read_file(dir.string());
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("not a regular file"), std::string::npos);

  const auto path = (dir / ("convbwd_cli_npy_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                            ".npy"))
                        .string();
  npy::Array a;
  a.descr = "<f4";
  a.shape = {3};
  a.data.assign(12, 0x3f);
  ASSERT_FALSE(npy::write_file(path, a));
  auto b = npy::read_file(path);
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(b->data, a.data);
  std::filesystem::remove(path);
  EXPECT_TRUE(npy::write_file("/nonexistent/dir/y.npy", a));
}
