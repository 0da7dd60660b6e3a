#include "numeric/float_formats.hpp"

#include "numeric/fp8.hpp"

namespace convbwd::detail {

float load_as_float(const void* base, int64_t i, DataType t) {
  switch (t) {
    case DataType::f32: return static_cast<const float*>(base)[i];
    case DataType::f16: return f16_to_float(static_cast<const uint16_t*>(base)[i]);
    case DataType::bf16: return bf16_to_float(static_cast<const uint16_t*>(base)[i]);
    case DataType::hif8: return hif8_to_float(static_cast<const uint8_t*>(base)[i]);
    case DataType::f8e4m3: return e4m3fn_to_float(static_cast<const uint8_t*>(base)[i]);
  }
  return 0;
}

void store_from_double(void* base, int64_t i, DataType t, double v) {
  switch (t) {
    case DataType::f32: static_cast<float*>(base)[i] = static_cast<float>(v); return;
    case DataType::f16:
      // Rounded once from fp64 into fp16's grid, then exactly representable.
      static_cast<uint16_t*>(base)[i] = float_to_f16(static_cast<float>(round_double(v, 11, -14, 65504.0)));
      return;
    case DataType::bf16:
      static_cast<uint16_t*>(base)[i] =
          float_to_bf16(static_cast<float>(round_double(v, 8, -126, 0x1.fep127)));
      return;
    case DataType::hif8: static_cast<uint8_t*>(base)[i] = double_to_hif8(v); return;
    case DataType::f8e4m3: static_cast<uint8_t*>(base)[i] = double_to_e4m3fn(v); return;
  }
}

void store_from_float(void* base, int64_t i, DataType t, float v) {
  switch (t) {
    case DataType::f32: static_cast<float*>(base)[i] = v; return;
    case DataType::f16: static_cast<uint16_t*>(base)[i] = float_to_f16(v); return;
    case DataType::bf16: static_cast<uint16_t*>(base)[i] = float_to_bf16(v); return;
    case DataType::hif8: static_cast<uint8_t*>(base)[i] = double_to_hif8(v); return;
    case DataType::f8e4m3: static_cast<uint8_t*>(base)[i] = double_to_e4m3fn(v); return;
  }
}

}  // namespace convbwd::detail
