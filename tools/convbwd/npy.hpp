// Reading and writing NumPy .npy files (format versions 1.0, 2.0 and 3.0).
//
// The parser takes the whole file as bytes and is written for hostile input:
// it never reads outside the span it is given, never allocates more than the
// file itself claims and proves it holds, and turns every malformed file into
// an Error naming what is wrong. parse() is the entry point a fuzzer drives.
//
// Only what convbwd needs is accepted: C order (fortran_order False),
// little-endian or byte-sized dtypes from the table in npy.cpp ("<f4", "<f2",
// "<u2", "|u1", ...). NumPy has no bfloat16 or 8-bit float types, so those
// travel as their raw bit patterns: bf16 as "<u2" (or "<V2", which is what
// ml_dtypes' bfloat16 writes), hif8 and f8e4m3 as "|u1" (or "|V1"). The
// problem descriptor, not the file, says which float type the bits are.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "convbwd/convbwd.hpp"

namespace convbwd::cli::npy {

struct Array {
  std::string descr;              // the dtype string as written in the header, e.g. "<f4"
  std::vector<int64_t> shape;     // () for a scalar
  std::vector<unsigned char> data;  // C order, little-endian, elements() * item_size() bytes

  int64_t elements() const;
  size_t item_size() const;  // from descr; 0 for an unsupported descr
};

// Largest header a reader accepts (numpy's own limit for untrusted files is
// 10000 bytes; version 2 headers may legitimately be larger for huge shapes,
// so this is generous but bounded).
constexpr size_t kMaxHeaderBytes = 1u << 20;

// Parses a complete .npy file. The data must be exactly as long as the shape
// needs (trailing bytes are rejected too: they mean the shape is wrong).
Result<Array> parse(std::span<const unsigned char> file);
// Reads and parses a file; errors name the path.
Result<Array> read_file(const std::string& path);

// A version 1.0 file (2.0 if the header needs it), header padded to 64 bytes.
// The array's descr must be supported and data.size() must match the shape.
Result<std::vector<unsigned char>> serialize(const Array&);
Error write_file(const std::string& path, const Array&);

// The descr convbwd writes for a tensor of dtype t ("<f4", "<f2", "<u2" for
// bf16 bits, "|u1" for 8-bit float bits).
std::string_view descr_for(DataType t);
// Whether a file with this descr can hold a tensor of dtype t (see above).
bool descr_holds(std::string_view descr, DataType t);
// Bytes per element of a supported descr; 0 if unsupported.
size_t descr_item_size(std::string_view descr);
// "[4,30,80,80]" / "()" for messages.
std::string format_shape(const std::vector<int64_t>& shape);

}  // namespace convbwd::cli::npy
