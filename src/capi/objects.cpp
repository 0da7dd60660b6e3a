// Tensors, arrays and their getters behind aclnn/acl_meta.h, and the small
// helpers of acl/acl_base.h.
#include <new>
#include <string>

#include "aclnn/aclnn_base.h"
#include "capi/capi.hpp"
#include "numeric/float_formats.hpp"

namespace convbwd::capi {
namespace {

// CANN tensors have at most 8 dims; 64 leaves room while refusing a hostile
// count before it becomes a multi-gigabyte copy.
constexpr uint64_t kMaxDims = 64;
// Arrays (stride, padding, biasSizes...) are short in any real call.
constexpr uint64_t kMaxArray = uint64_t{1} << 20;

aclnnStatus copy_out(const std::vector<int64_t>& v, int64_t** values, uint64_t* count) {
  // new[] because the CANN contract is that the caller releases with delete[].
  auto* out = new (std::nothrow) int64_t[v.size() == 0 ? 1 : v.size()];
  if (out == nullptr) {
    return fail(ACLNN_ERR_INNER_NULLPTR, "out of memory");
  }
  for (size_t i = 0; i < v.size(); ++i) {
    out[i] = v[i];
  }
  *values = out;
  *count = v.size();
  return ACLNN_SUCCESS;
}

aclnnStatus get_dims(const aclTensor* tensor, int64_t** values, uint64_t* count, const char* caller,
                     const char* what, const std::vector<int64_t> aclTensor::*member) {
  if (tensor == nullptr || values == nullptr || count == nullptr) {
    return fail(ACLNN_ERR_PARAM_NULLPTR,
                std::string(caller) + ": " +
                    (tensor == nullptr ? "tensor" : values == nullptr ? what : "the count out-parameter") +
                    " is null");
  }
  return copy_out(tensor->*member, values, count);
}

}  // namespace

std::string format_name(int32_t format) {
  const char* name = nullptr;
  switch (format) {
    case ACL_FORMAT_UNDEFINED: name = "ACL_FORMAT_UNDEFINED"; break;
    case ACL_FORMAT_NCHW: name = "ACL_FORMAT_NCHW"; break;
    case ACL_FORMAT_NHWC: name = "ACL_FORMAT_NHWC"; break;
    case ACL_FORMAT_ND: name = "ACL_FORMAT_ND"; break;
    case ACL_FORMAT_NC1HWC0: name = "ACL_FORMAT_NC1HWC0"; break;
    case ACL_FORMAT_FRACTAL_Z: name = "ACL_FORMAT_FRACTAL_Z"; break;
    case ACL_FORMAT_NC1HWC0_C04: name = "ACL_FORMAT_NC1HWC0_C04"; break;
    case ACL_FORMAT_HWCN: name = "ACL_FORMAT_HWCN"; break;
    case ACL_FORMAT_NDHWC: name = "ACL_FORMAT_NDHWC"; break;
    case ACL_FORMAT_FRACTAL_NZ: name = "ACL_FORMAT_FRACTAL_NZ"; break;
    case ACL_FORMAT_NCDHW: name = "ACL_FORMAT_NCDHW"; break;
    case ACL_FORMAT_NDC1HWC0: name = "ACL_FORMAT_NDC1HWC0"; break;
    case ACL_FRACTAL_Z_3D: name = "ACL_FRACTAL_Z_3D"; break;
    case ACL_FORMAT_NC: name = "ACL_FORMAT_NC"; break;
    case ACL_FORMAT_NCL: name = "ACL_FORMAT_NCL"; break;
    default: name = "an unknown format"; break;
  }
  return std::string(name) + " (" + std::to_string(format) + ")";
}

std::string dtype_name(int32_t dtype) {
  const char* name = nullptr;
  switch (dtype) {
    case ACL_DT_UNDEFINED: name = "ACL_DT_UNDEFINED"; break;
    case ACL_FLOAT: name = "ACL_FLOAT"; break;
    case ACL_FLOAT16: name = "ACL_FLOAT16"; break;
    case ACL_INT8: name = "ACL_INT8"; break;
    case ACL_INT32: name = "ACL_INT32"; break;
    case ACL_UINT8: name = "ACL_UINT8"; break;
    case ACL_INT16: name = "ACL_INT16"; break;
    case ACL_UINT16: name = "ACL_UINT16"; break;
    case ACL_UINT32: name = "ACL_UINT32"; break;
    case ACL_INT64: name = "ACL_INT64"; break;
    case ACL_UINT64: name = "ACL_UINT64"; break;
    case ACL_DOUBLE: name = "ACL_DOUBLE"; break;
    case ACL_BOOL: name = "ACL_BOOL"; break;
    case ACL_STRING: name = "ACL_STRING"; break;
    case ACL_COMPLEX64: name = "ACL_COMPLEX64"; break;
    case ACL_COMPLEX128: name = "ACL_COMPLEX128"; break;
    case ACL_BF16: name = "ACL_BF16"; break;
    case ACL_INT4: name = "ACL_INT4"; break;
    case ACL_UINT1: name = "ACL_UINT1"; break;
    case ACL_COMPLEX32: name = "ACL_COMPLEX32"; break;
    case ACL_HIFLOAT8: name = "ACL_HIFLOAT8"; break;
    case ACL_FLOAT8_E5M2: name = "ACL_FLOAT8_E5M2"; break;
    case ACL_FLOAT8_E4M3FN: name = "ACL_FLOAT8_E4M3FN"; break;
    case ACL_FLOAT8_E8M0: name = "ACL_FLOAT8_E8M0"; break;
    default: name = "an unknown data type"; break;
  }
  return std::string(name) + " (" + std::to_string(dtype) + ")";
}

}  // namespace convbwd::capi

using convbwd::capi::fail;

extern "C" {

aclTensor* aclCreateTensor(const int64_t* viewDims, uint64_t viewDimsNum, aclDataType dataType,
                           const int64_t* stride, int64_t offset, aclFormat format,
                           const int64_t* storageDims, uint64_t storageDimsNum, void* tensorData) {
  using convbwd::capi::kMaxDims;
  using convbwd::capi::set_recent_error;
  if ((viewDims == nullptr && viewDimsNum > 0) || (storageDims == nullptr && storageDimsNum > 0)) {
    set_recent_error(std::string("aclCreateTensor: ") + (viewDims == nullptr ? "viewDims" : "storageDims") +
                     " is null with a count above 0");
    return nullptr;
  }
  if (viewDimsNum > kMaxDims || storageDimsNum > kMaxDims) {
    set_recent_error("aclCreateTensor: " +
                     std::string(viewDimsNum > kMaxDims ? "viewDimsNum is " + std::to_string(viewDimsNum)
                                                        : "storageDimsNum is " + std::to_string(storageDimsNum)) +
                     "; expected at most " + std::to_string(kMaxDims));
    return nullptr;
  }
  auto* t = new (std::nothrow) aclTensor;
  if (t == nullptr) {
    set_recent_error("aclCreateTensor: out of memory");
    return nullptr;
  }
  const auto n = static_cast<size_t>(viewDimsNum);
  t->view_dims.assign(viewDims, viewDims + n);
  if (stride != nullptr) {
    t->strides.assign(stride, stride + n);
  } else {
    // Contiguous row-major. Wrapping on absurd dims is harmless here: the
    // core rejects such shapes before any stride is used.
    t->strides.assign(n, 1);
    for (size_t i = n; i-- > 1;) {
      t->strides[i - 1] = static_cast<int64_t>(static_cast<uint64_t>(t->strides[i]) *
                                               static_cast<uint64_t>(t->view_dims[i]));
    }
  }
  t->offset = offset;
  t->dtype = static_cast<int32_t>(dataType);
  t->format = static_cast<int32_t>(format);
  t->storage_dims.assign(storageDims, storageDims + static_cast<size_t>(storageDimsNum));
  t->data = tensorData;
  return t;
}

aclIntArray* aclCreateIntArray(const int64_t* value, uint64_t size) {
  if (value == nullptr && size > 0) {
    convbwd::capi::set_recent_error("aclCreateIntArray: value is null with a size above 0");
    return nullptr;
  }
  if (size > convbwd::capi::kMaxArray) {
    convbwd::capi::set_recent_error("aclCreateIntArray: size is " + std::to_string(size) +
                                    "; expected at most " + std::to_string(convbwd::capi::kMaxArray));
    return nullptr;
  }
  auto* a = new (std::nothrow) aclIntArray;
  if (a != nullptr) {
    a->values.assign(value, value + static_cast<size_t>(size));
  }
  return a;
}

aclBoolArray* aclCreateBoolArray(const bool* value, uint64_t size) {
  if (value == nullptr && size > 0) {
    convbwd::capi::set_recent_error("aclCreateBoolArray: value is null with a size above 0");
    return nullptr;
  }
  if (size > convbwd::capi::kMaxArray) {
    convbwd::capi::set_recent_error("aclCreateBoolArray: size is " + std::to_string(size) +
                                    "; expected at most " + std::to_string(convbwd::capi::kMaxArray));
    return nullptr;
  }
  auto* a = new (std::nothrow) aclBoolArray;
  if (a != nullptr) {
    a->values.assign(value, value + static_cast<size_t>(size));
  }
  return a;
}

aclnnStatus aclDestroyTensor(const aclTensor* tensor) {
  delete tensor;
  return ACLNN_SUCCESS;
}

aclnnStatus aclDestroyIntArray(const aclIntArray* array) {
  delete array;
  return ACLNN_SUCCESS;
}

aclnnStatus aclDestroyBoolArray(const aclBoolArray* array) {
  delete array;
  return ACLNN_SUCCESS;
}

aclnnStatus aclGetViewShape(const aclTensor* tensor, int64_t** viewDims, uint64_t* viewDimsNum) {
  return convbwd::capi::get_dims(tensor, viewDims, viewDimsNum, "aclGetViewShape", "viewDims",
                                 &aclTensor::view_dims);
}

aclnnStatus aclGetStorageShape(const aclTensor* tensor, int64_t** storageDims, uint64_t* storageDimsNum) {
  return convbwd::capi::get_dims(tensor, storageDims, storageDimsNum, "aclGetStorageShape", "storageDims",
                                 &aclTensor::storage_dims);
}

aclnnStatus aclGetViewStrides(const aclTensor* tensor, int64_t** stridesValue, uint64_t* stridesNum) {
  return convbwd::capi::get_dims(tensor, stridesValue, stridesNum, "aclGetViewStrides", "stridesValue",
                                 &aclTensor::strides);
}

aclnnStatus aclGetViewOffset(const aclTensor* tensor, int64_t* offset) {
  if (tensor == nullptr || offset == nullptr) {
    return fail(ACLNN_ERR_PARAM_NULLPTR,
                std::string("aclGetViewOffset: ") + (tensor == nullptr ? "tensor" : "offset") + " is null");
  }
  *offset = tensor->offset;
  return ACLNN_SUCCESS;
}

aclnnStatus aclGetFormat(const aclTensor* tensor, aclFormat* format) {
  if (tensor == nullptr || format == nullptr) {
    return fail(ACLNN_ERR_PARAM_NULLPTR,
                std::string("aclGetFormat: ") + (tensor == nullptr ? "tensor" : "format") + " is null");
  }
  *format = static_cast<aclFormat>(tensor->format);
  return ACLNN_SUCCESS;
}

aclnnStatus aclGetDataType(const aclTensor* tensor, aclDataType* dataType) {
  if (tensor == nullptr || dataType == nullptr) {
    return fail(ACLNN_ERR_PARAM_NULLPTR,
                std::string("aclGetDataType: ") + (tensor == nullptr ? "tensor" : "dataType") + " is null");
  }
  *dataType = static_cast<aclDataType>(tensor->dtype);
  return ACLNN_SUCCESS;
}

aclnnStatus aclGetIntArraySize(const aclIntArray* array, uint64_t* size) {
  if (array == nullptr || size == nullptr) {
    return fail(ACLNN_ERR_PARAM_NULLPTR,
                std::string("aclGetIntArraySize: ") + (array == nullptr ? "array" : "size") + " is null");
  }
  *size = array->values.size();
  return ACLNN_SUCCESS;
}

aclnnStatus aclGetBoolArraySize(const aclBoolArray* array, uint64_t* size) {
  if (array == nullptr || size == nullptr) {
    return fail(ACLNN_ERR_PARAM_NULLPTR,
                std::string("aclGetBoolArraySize: ") + (array == nullptr ? "array" : "size") + " is null");
  }
  *size = array->values.size();
  return ACLNN_SUCCESS;
}

aclnnStatus aclnnInit(const char* /*configPath: nothing to configure on a CPU*/) { return ACLNN_SUCCESS; }

aclnnStatus aclnnFinalize(void) { return ACLNN_SUCCESS; }

aclFloat16 aclFloatToFloat16(float value) { return convbwd::detail::float_to_f16(value); }

float aclFloat16ToFloat(aclFloat16 value) { return convbwd::detail::f16_to_float(value); }

size_t aclDataTypeSize(aclDataType dataType) {
  switch (dataType) {
    case ACL_BOOL: case ACL_INT8: case ACL_UINT8: case ACL_HIFLOAT8:
    case ACL_FLOAT8_E5M2: case ACL_FLOAT8_E4M3FN: case ACL_FLOAT8_E8M0:
      return 1;
    case ACL_FLOAT16: case ACL_BF16: case ACL_INT16: case ACL_UINT16:
      return 2;
    case ACL_FLOAT: case ACL_INT32: case ACL_UINT32: case ACL_COMPLEX32:
      return 4;
    case ACL_INT64: case ACL_UINT64: case ACL_DOUBLE: case ACL_COMPLEX64:
      return 8;
    case ACL_COMPLEX128:
      return 16;
    default:  // sub-byte (INT4, UINT1), STRING, UNDEFINED: no byte size
      return 0;
  }
}

}  // extern "C"
