#include "npy.hpp"

#include <cctype>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>

namespace convbwd::cli::npy {
namespace {

constexpr unsigned char kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
// NumPy allows 64 dims; more than that cannot come from numpy.save.
constexpr size_t kMaxRank = 64;

Error bad(std::string message) { return Error{Status::invalid_parameter, ".npy: " + std::move(message)}; }

struct DescrInfo {
  std::string_view descr;
  size_t size;
};
// Every dtype string the reader accepts. Byte order must be little-endian
// ('<') or irrelevant ('|'); numpy never writes '=' into a file.
constexpr DescrInfo kDescrs[] = {
    {"<f4", 4}, {"<f2", 2},                                 // fp32, fp16
    {"<u2", 2}, {"<V2", 2}, {"|V2", 2},                     // bf16 bit patterns
    {"|u1", 1}, {"<u1", 1}, {"|V1", 1}, {"<V1", 1},         // 8-bit float bit patterns
};

std::string printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 40)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    }
  }
  if (s.size() > 40) out += "...";
  return out;
}

// A recursive-descent reader for the one Python literal numpy writes:
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// Only strings without escapes, True/False and tuples of non-negative
// integers are understood; anything else is an error, never a guess.
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : s_(text) {}

  std::optional<Error> parse(std::string& descr, bool& fortran, std::vector<int64_t>& shape) {
    bool have_descr = false, have_fortran = false, have_shape = false;
    skip_ws();
    if (!eat('{')) return fail("header does not start with '{'");
    skip_ws();
    while (!peek('}')) {
      std::string key;
      if (auto e = string_literal(key, "a dict key")) return e;
      skip_ws();
      if (!eat(':')) return fail("expected ':' after key '" + printable(key) + "'");
      skip_ws();
      if (key == "descr") {
        if (have_descr) return fail("key 'descr' appears twice");
        have_descr = true;
        if (peek('[')) return fail("'descr' is a list (a structured dtype); only plain numeric dtypes are supported");
        if (auto e = string_literal(descr, "the 'descr' string")) return e;
      } else if (key == "fortran_order") {
        if (have_fortran) return fail("key 'fortran_order' appears twice");
        have_fortran = true;
        if (eat_word("True")) {
          fortran = true;
        } else if (eat_word("False")) {
          fortran = false;
        } else {
          return fail("'fortran_order' must be True or False");
        }
      } else if (key == "shape") {
        if (have_shape) return fail("key 'shape' appears twice");
        have_shape = true;
        if (auto e = tuple(shape)) return e;
      } else {
        return fail("unexpected key '" + printable(key) + "'; expected only 'descr', 'fortran_order' and 'shape'");
      }
      skip_ws();
      if (eat(',')) {
        skip_ws();
        continue;
      }
      if (!peek('}')) return fail("expected ',' or '}' after the value of '" + key + "'");
    }
    eat('}');
    skip_ws();
    if (pos_ != s_.size()) return fail("unexpected text after the header dict: '" + printable(s_.substr(pos_)) + "'");
    if (!have_descr) return bad("header has no 'descr' key");
    if (!have_fortran) return bad("header has no 'fortran_order' key");
    if (!have_shape) return bad("header has no 'shape' key");
    return std::nullopt;
  }

 private:
  Error fail(const std::string& what) const {
    return bad("malformed header at character " + std::to_string(pos_) + ": " + what);
  }
  bool peek(char c) const { return pos_ < s_.size() && s_[pos_] == c; }
  bool eat(char c) {
    if (!peek(c)) return false;
    ++pos_;
    return true;
  }
  bool eat_word(std::string_view w) {
    if (s_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t' || s_[pos_] == '\r')) ++pos_;
  }
  std::optional<Error> string_literal(std::string& out, const char* what) {
    if (!(peek('\'') || peek('"'))) return fail("expected " + std::string(what) + " in quotes");
    const char q = s_[pos_++];
    const size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] != q) {
      if (s_[pos_] == '\\') return fail("escape sequences in strings are not supported");
      ++pos_;
    }
    if (pos_ == s_.size()) return fail("unterminated string");
    out.assign(s_.substr(start, pos_ - start));
    ++pos_;
    return std::nullopt;
  }
  std::optional<Error> tuple(std::vector<int64_t>& out) {
    out.clear();
    if (!eat('(')) return fail("'shape' must be a tuple such as (2, 3)");
    skip_ws();
    while (!peek(')')) {
      if (peek('-')) return fail("shape has a negative dimension");
      const size_t start = pos_;
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
      if (pos_ == start) return fail("shape must hold non-negative integers");
      int64_t v = 0;
      const auto [p, ec] = std::from_chars(s_.data() + start, s_.data() + pos_, v);
      if (ec != std::errc() || p != s_.data() + pos_)
        return fail("shape dimension " + printable(s_.substr(start, pos_ - start)) + " does not fit in 63 bits");
      eat('L');  // Python 2 long literals, written by old numpy versions
      if (out.size() == kMaxRank) return fail("shape has more than " + std::to_string(kMaxRank) + " dimensions");
      out.push_back(v);
      skip_ws();
      if (eat(',')) {
        skip_ws();
        continue;
      }
      if (!peek(')')) return fail("expected ',' or ')' in the shape tuple");
    }
    eat(')');
    return std::nullopt;
  }

  std::string_view s_;
  size_t pos_ = 0;
};

uint32_t le32(const unsigned char* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

}  // namespace

size_t descr_item_size(std::string_view descr) {
  for (const DescrInfo& d : kDescrs)
    if (d.descr == descr) return d.size;
  return 0;
}

int64_t Array::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // shapes in an Array were checked by parse
  return n;
}

size_t Array::item_size() const { return descr_item_size(descr); }

std::string format_shape(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string_view descr_for(DataType t) {
  switch (t) {
    case DataType::f32: return "<f4";
    case DataType::f16: return "<f2";
    case DataType::bf16: return "<u2";
    case DataType::hif8:
    case DataType::f8e4m3: return "|u1";
  }
  return "";
}

bool descr_holds(std::string_view descr, DataType t) {
  switch (t) {
    case DataType::f32: return descr == "<f4";
    case DataType::f16: return descr == "<f2";
    case DataType::bf16: return descr == "<u2" || descr == "<V2" || descr == "|V2";
    case DataType::hif8:
    case DataType::f8e4m3: return descr == "|u1" || descr == "<u1" || descr == "|V1" || descr == "<V1";
  }
  return false;
}

Result<Array> parse(std::span<const unsigned char> file) {
  if (file.size() < 10) return bad("file of " + std::to_string(file.size()) + " bytes is too short for a .npy header");
  if (std::memcmp(file.data(), kMagic, sizeof kMagic) != 0)
    return bad("bad magic: the file does not start with \\x93NUMPY; is it a .npy file?");
  const unsigned major = file[6], minor = file[7];
  if ((major < 1 || major > 3) || minor != 0)
    return bad("format version " + std::to_string(major) + "." + std::to_string(minor) +
               " is not supported; expected 1.0, 2.0 or 3.0");
  size_t start = 10;
  size_t header_len = static_cast<size_t>(file[8]) | static_cast<size_t>(file[9]) << 8;
  if (major >= 2) {
    if (file.size() < 12) return bad("file of " + std::to_string(file.size()) + " bytes is too short for a v2 header");
    start = 12;
    header_len = le32(file.data() + 8);
  }
  if (header_len > kMaxHeaderBytes)
    return bad("header length " + std::to_string(header_len) + " exceeds the limit of " +
               std::to_string(kMaxHeaderBytes) + " bytes");
  if (header_len > file.size() - start)
    return bad("header length " + std::to_string(header_len) + " runs past the end of the file (" +
               std::to_string(file.size() - start) + " bytes after the length field)");
  const std::string_view text(reinterpret_cast<const char*>(file.data() + start), header_len);
  for (char c : text)
    if (c == '\0') return bad("header contains a NUL byte");

  Array a;
  bool fortran = false;
  if (auto e = HeaderParser(text).parse(a.descr, fortran, a.shape)) return *e;
  if (fortran)
    return bad("fortran_order is True; convbwd reads C-order arrays only (save np.ascontiguousarray(x))");
  const size_t item = descr_item_size(a.descr);
  if (item == 0) {
    std::string hint;
    if (!a.descr.empty() && a.descr[0] == '>') hint = " (big-endian data is not supported)";
    else if (a.descr == "<f8") hint = " (save float64 arrays as float32: x.astype(np.float32))";
    return bad("dtype '" + printable(a.descr) + "' is not supported" + hint +
               "; expected <f4 (fp32), <f2 (fp16), <u2 or <V2 (bf16 bits), |u1 (8-bit float bits)");
  }
  // Elements and bytes, with every product checked: a hostile shape must not
  // wrap around to a small allocation.
  // Zero dims count as 1 in the check (as the library's validation does), so
  // every partial product of the shape fits, whatever the order of its dims.
  uint64_t elems = 1;
  bool zero = false;
  for (int64_t d : a.shape) {
    zero |= d == 0;
    const auto ud = static_cast<uint64_t>(d == 0 ? 1 : d);
    if (elems > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / ud)
      return bad("shape " + format_shape(a.shape) + " holds more than 2^63 elements (zero dims counted as 1)");
    elems *= ud;
  }
  if (zero) elems = 0;
  const uint64_t data_bytes_max = static_cast<uint64_t>(file.size() - start - header_len);
  if (elems > data_bytes_max / item)
    return bad("data is " + std::to_string(data_bytes_max) + " bytes, shorter than the " + std::to_string(elems) +
               " elements of " + std::to_string(item) + " bytes that shape " + format_shape(a.shape) + " needs");
  const uint64_t need = elems * item;
  if (need != data_bytes_max)
    return bad("data is " + std::to_string(data_bytes_max) + " bytes, longer than the " + std::to_string(need) +
               " bytes that shape " + format_shape(a.shape) + " and dtype " + a.descr + " need");
  const auto* first = file.data() + start + header_len;
  a.data.assign(first, first + need);
  return a;
}

Result<Array> read_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return Error{Status::invalid_parameter, path + ": no such file"};
  if (!std::filesystem::is_regular_file(path, ec))
    return Error{Status::invalid_parameter, path + ": not a regular file"};
  std::ifstream f(path, std::ios::binary);
  if (!f) return Error{Status::invalid_parameter, path + ": cannot open for reading"};
  f.seekg(0, std::ios::end);
  const std::streamoff size = f.tellg();
  if (size < 0) return Error{Status::invalid_parameter, path + ": cannot determine its size"};
  f.seekg(0, std::ios::beg);
  std::vector<unsigned char> bytes(static_cast<size_t>(size));
  if (size > 0 && !f.read(reinterpret_cast<char*>(bytes.data()), size))
    return Error{Status::invalid_parameter, path + ": read error"};
  auto a = parse(bytes);
  if (!a) return Error{a.error().status, path + ": " + a.error().message};
  return a;
}

Result<std::vector<unsigned char>> serialize(const Array& a) {
  const size_t item = a.item_size();
  if (item == 0) return bad("cannot write dtype '" + printable(a.descr) + "'");
  uint64_t elems = 1;
  for (int64_t d : a.shape) {
    if (d < 0) return bad("cannot write shape " + format_shape(a.shape) + " with a negative dimension");
    if (d != 0 && elems > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / static_cast<uint64_t>(d))
      return bad("shape " + format_shape(a.shape) + " is too large");
    elems *= static_cast<uint64_t>(d);
  }
  if (elems * item != a.data.size())
    return bad("data of " + std::to_string(a.data.size()) + " bytes does not match shape " + format_shape(a.shape) +
               " of " + a.descr);
  std::string h = "{'descr': '" + a.descr + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < a.shape.size(); ++i) h += (i ? ", " : "") + std::to_string(a.shape[i]);
  if (a.shape.size() == 1) h += ",";
  h += "), }";
  // Pad with spaces and a final newline so the data starts 64-byte aligned,
  // as numpy does.
  const bool v2 = h.size() + 1 + 10 > 65535;
  const size_t prefix = v2 ? 12 : 10;
  const size_t total = (prefix + h.size() + 1 + 63) / 64 * 64;
  h.append(total - prefix - h.size() - 1, ' ');
  h += '\n';
  std::vector<unsigned char> out(kMagic, kMagic + sizeof kMagic);
  out.push_back(v2 ? 2 : 1);
  out.push_back(0);
  const size_t len = h.size();
  out.push_back(static_cast<unsigned char>(len & 0xff));
  out.push_back(static_cast<unsigned char>((len >> 8) & 0xff));
  if (v2) {
    out.push_back(static_cast<unsigned char>((len >> 16) & 0xff));
    out.push_back(static_cast<unsigned char>((len >> 24) & 0xff));
  }
  out.insert(out.end(), h.begin(), h.end());
  out.insert(out.end(), a.data.begin(), a.data.end());
  return out;
}

Error write_file(const std::string& path, const Array& a) {
  auto bytes = serialize(a);
  if (!bytes) return Error{bytes.error().status, path + ": " + bytes.error().message};
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return Error{Status::invalid_parameter, path + ": cannot open for writing"};
  f.write(reinterpret_cast<const char*>(bytes->data()), static_cast<std::streamsize>(bytes->size()));
  f.close();
  if (!f) return Error{Status::runtime_error, path + ": write error"};
  return {};
}

}  // namespace convbwd::cli::npy
