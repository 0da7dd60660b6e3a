#include "problem/spec.hpp"

namespace convbwd {

std::string_view to_string(DataType t) {
  switch (t) {
    case DataType::f32: return "f32";
    case DataType::f16: return "f16";
    case DataType::bf16: return "bf16";
    case DataType::hif8: return "hif8";
    case DataType::f8e4m3: return "f8e4m3";
  }
  return "unknown";
}

size_t size_of(DataType t) {
  switch (t) {
    case DataType::f32: return 4;
    case DataType::f16:
    case DataType::bf16: return 2;
    case DataType::hif8:
    case DataType::f8e4m3: return 1;
  }
  return 1;  // unknown values are rejected by validation; 1 keeps arithmetic finite
}

std::vector<int64_t> Problem::gradient_dims(Gradient g) const {
  switch (g) {
    case Gradient::input: return input.dims;
    case Gradient::weight: return weight.dims;
    case Gradient::bias: {
      if (weight.dims.size() < 2) return {};
      return {transposed ? weight.dims[1] * groups : weight.dims[0]};
    }
  }
  return {};
}

DataType Problem::gradient_dtype(Gradient g) const {
  switch (g) {
    case Gradient::input: return input.dtype;
    case Gradient::weight: return weight.dtype;
    case Gradient::bias:
      // 8-bit problems sum their bias gradient into fp32.
      if (grad_output.dtype == DataType::hif8 || grad_output.dtype == DataType::f8e4m3) return DataType::f32;
      return grad_output.dtype;
  }
  return DataType::f32;
}

}  // namespace convbwd
