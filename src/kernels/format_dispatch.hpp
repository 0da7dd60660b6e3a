// The run-time dtype and operand rounding made compile-time parameters:
// dispatch(dt, r, f) calls f.template operator()<T, R>(), so the conversion
// loops of the kernels (the channels-last converters) and of the planners'
// operand copies (impl/operand_access.hpp) carry no switches. The 8-bit
// dtypes call nothing: every path that uses this declines them at plan time.
// In an unnamed namespace: kernel sources compile it with their tier's flags.
#pragma once

#include "problem/spec.hpp"

namespace convbwd::detail {
namespace {

template <class F>
void dispatch(DataType t, OperandRounding r, F&& f) {
  const auto with_r = [&]<DataType T>() {
    switch (r) {
      case OperandRounding::none: f.template operator()<T, OperandRounding::none>(); return;
      case OperandRounding::hf32: f.template operator()<T, OperandRounding::hf32>(); return;
      case OperandRounding::fp16: f.template operator()<T, OperandRounding::fp16>(); return;
    }
  };
  switch (t) {
    case DataType::f32: with_r.template operator()<DataType::f32>(); return;
    case DataType::bf16: with_r.template operator()<DataType::bf16>(); return;
    case DataType::f16: with_r.template operator()<DataType::f16>(); return;
    default: return;
  }
}

}  // namespace
}  // namespace convbwd::detail
