// 64-bit size arithmetic that reports overflow instead of wrapping, so hostile
// shapes are rejected rather than turned into small numbers.
#pragma once

#include <cstdint>
#include <optional>

namespace convbwd::detail {

inline std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}
inline std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}
inline std::optional<int64_t> checked_sub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// Chains checked operations: Checked(a) * b + c, then .value() or .ok().
class Checked {
 public:
  explicit Checked(int64_t v) : v_(v) {}
  Checked(std::optional<int64_t> v) : v_(v) {}  // NOLINT(google-explicit-constructor)
  Checked operator*(int64_t b) const { return v_ ? Checked(checked_mul(*v_, b)) : *this; }
  Checked operator+(int64_t b) const { return v_ ? Checked(checked_add(*v_, b)) : *this; }
  Checked operator-(int64_t b) const { return v_ ? Checked(checked_sub(*v_, b)) : *this; }
  Checked operator+(const Checked& b) const { return b.v_ ? *this + *b.v_ : b; }
  Checked operator*(const Checked& b) const { return b.v_ ? *this * *b.v_ : b; }
  // The next multiple of m (m > 0, v >= 0), as workspace sizes are rounded.
  Checked rounded_up(int64_t m) const {
    const Checked padded = *this + (m - 1);
    return padded.v_ ? Checked(*padded.v_ / m * m) : padded;
  }
  bool ok() const { return v_.has_value(); }
  int64_t value() const { return *v_; }
  // The value, or `otherwise` when some step overflowed (a saturating bound).
  int64_t value_or(int64_t otherwise) const { return v_.value_or(otherwise); }
  // Whether the value exists and is at most `limit`.
  bool at_most(int64_t limit) const { return v_ && *v_ <= limit; }

 private:
  std::optional<int64_t> v_;
};

}  // namespace convbwd::detail
