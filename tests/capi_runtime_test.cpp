// The host runtime of the C API: init, device, memory, system parameters,
// recent error messages, tensor and array objects, and the ABI values.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "acl/acl.h"
#include "aclnn/aclnn_base.h"
#include "aclnnop/aclnn_convolution_backward.h"

namespace {

// ---- ABI facts ---------------------------------------------------------------
// Values are part of CANN's binary interface: programs compiled against CANN's
// headers pass these numbers. A change here breaks them silently.
static_assert(aclDataType::ACL_DT_UNDEFINED == -1 && aclDataType::ACL_FLOAT == 0 && ACL_FLOAT16 == 1 &&
              ACL_INT8 == 2 && ACL_INT32 == 3 && ACL_UINT8 == 4 && ACL_INT16 == 6 && ACL_UINT16 == 7 &&
              ACL_UINT32 == 8 && ACL_INT64 == 9 && ACL_UINT64 == 10 && ACL_DOUBLE == 11 && ACL_BOOL == 12 &&
              ACL_STRING == 13 && ACL_COMPLEX64 == 16 && ACL_COMPLEX128 == 17 && ACL_BF16 == 27 &&
              ACL_INT4 == 29 && ACL_UINT1 == 30 && ACL_COMPLEX32 == 33 && ACL_HIFLOAT8 == 34 &&
              ACL_FLOAT8_E5M2 == 35 && ACL_FLOAT8_E4M3FN == 36 && ACL_FLOAT8_E8M0 == 37);
static_assert(aclFormat::ACL_FORMAT_UNDEFINED == -1 && ACL_FORMAT_NCHW == 0 && ACL_FORMAT_NHWC == 1 &&
              ACL_FORMAT_ND == 2 && ACL_FORMAT_NC1HWC0 == 3 && ACL_FORMAT_FRACTAL_Z == 4 &&
              ACL_FORMAT_NC1HWC0_C04 == 12 && ACL_FORMAT_HWCN == 16 && ACL_FORMAT_NDHWC == 27 &&
              ACL_FORMAT_FRACTAL_NZ == 29 && ACL_FORMAT_NCDHW == 30 && ACL_FORMAT_NDC1HWC0 == 32 &&
              ACL_FRACTAL_Z_3D == 33 && ACL_FORMAT_NC == 35 && ACL_FORMAT_NCL == 47);
static_assert(ACL_MEMCPY_HOST_TO_HOST == 0 && ACL_MEMCPY_HOST_TO_DEVICE == 1 && ACL_MEMCPY_DEVICE_TO_HOST == 2 &&
              ACL_MEMCPY_DEVICE_TO_DEVICE == 3 && ACL_MEMCPY_DEFAULT == 4);
static_assert(ACL_MEM_MALLOC_HUGE_FIRST == 0 && ACL_MEM_MALLOC_HUGE_ONLY == 1 && ACL_MEM_MALLOC_NORMAL_ONLY == 2);
static_assert(aclSysParamOpt::ACL_OPT_DETERMINISTIC == 0);
static_assert(ACLNN_SUCCESS == 0 && ACLNN_ERR_PARAM_NULLPTR == 161001 && ACLNN_ERR_PARAM_INVALID == 161002 &&
              ACLNN_ERR_RUNTIME_ERROR == 361001 && ACLNN_ERR_INNER == 561000 && ACLNN_ERR_INNER_NULLPTR == 561103);
static_assert(sizeof(aclnnStatus) == 4 && sizeof(aclError) == sizeof(int) && sizeof(aclrtStream) == sizeof(void*));
// The sample programs' deleter types must match the prototypes exactly.
static_assert(std::is_same_v<decltype(&aclDestroyTensor), aclnnStatus (*)(const aclTensor*)>);
static_assert(std::is_same_v<decltype(&aclDestroyIntArray), aclnnStatus (*)(const aclIntArray*)>);
static_assert(std::is_same_v<decltype(&aclDestroyBoolArray), aclnnStatus (*)(const aclBoolArray*)>);
static_assert(std::is_same_v<decltype(&aclrtFree), aclError (*)(void*)>);
static_assert(std::is_same_v<decltype(&aclnnConvolutionBackward),
                             aclnnStatus (*)(void*, uint64_t, aclOpExecutor*, const aclrtStream)>);

TEST(CapiAbi, ErrorCodeValues) {
  EXPECT_EQ(ACL_SUCCESS, 0);
  EXPECT_EQ(ACL_ERROR_INVALID_PARAM, 100000);
  EXPECT_EQ(ACL_ERROR_UNINITIALIZE, 100001);
  EXPECT_EQ(ACL_ERROR_REPEAT_INITIALIZE, 100002);
  EXPECT_EQ(ACL_ERROR_BAD_ALLOC, 200000);
  EXPECT_EQ(ACL_ERROR_API_NOT_SUPPORT, 200001);
  EXPECT_EQ(ACL_ERROR_INVALID_DEVICE, 200002);
  EXPECT_EQ(ACL_ERROR_INTERNAL_ERROR, 500000);
  EXPECT_EQ(ACL_ERROR_FAILURE, 500001);
}

std::string recent() { return aclGetRecentErrMsg(); }

// ---- init, device ----------------------------------------------------------------
TEST(CapiRuntime, InitTwiceIsRepeatInitializeAndFinalizeTwiceIsUninitialize) {
  ASSERT_EQ(aclInit(nullptr), ACL_SUCCESS);
  EXPECT_EQ(aclInit(nullptr), ACL_ERROR_REPEAT_INITIALIZE);
  EXPECT_NE(recent().find("aclInit"), std::string::npos) << recent();
  EXPECT_EQ(aclFinalize(), ACL_SUCCESS);
  EXPECT_EQ(aclFinalize(), ACL_ERROR_UNINITIALIZE);
  // A finalized runtime can start again.
  EXPECT_EQ(aclInit(""), ACL_SUCCESS);
  EXPECT_EQ(aclFinalize(), ACL_SUCCESS);
}

TEST(CapiRuntime, InitChecksTheConfigPath) {
  EXPECT_EQ(aclInit("/nonexistent/convbwd/acl.json"), ACL_ERROR_INVALID_PARAM);
  EXPECT_NE(recent().find("/nonexistent/convbwd/acl.json"), std::string::npos) << recent();
  const std::string path = ::testing::TempDir() + "capi_runtime_acl.json";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fputs("{}", f);
  std::fclose(f);
  EXPECT_EQ(aclInit(path.c_str()), ACL_SUCCESS);
  EXPECT_EQ(aclFinalize(), ACL_SUCCESS);
  std::remove(path.c_str());
}

TEST(CapiRuntime, OnlyDeviceZeroExists) {
  EXPECT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
  int32_t id = -7;
  EXPECT_EQ(aclrtGetDevice(&id), ACL_SUCCESS);
  EXPECT_EQ(id, 0);
  for (int32_t bad : {1, -1, 8, INT32_MAX}) {
    EXPECT_EQ(aclrtSetDevice(bad), ACL_ERROR_INVALID_DEVICE) << bad;
    EXPECT_NE(recent().find(std::to_string(bad)), std::string::npos) << recent();
    EXPECT_EQ(aclrtResetDevice(bad), ACL_ERROR_INVALID_DEVICE) << bad;
  }
  EXPECT_EQ(aclrtGetDevice(nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtResetDevice(0), ACL_SUCCESS);
  EXPECT_EQ(aclrtGetDevice(&id), ACL_ERROR_INVALID_DEVICE);
  uint32_t count = 0;
  EXPECT_EQ(aclrtGetDeviceCount(&count), ACL_SUCCESS);
  EXPECT_EQ(count, 1u);
  EXPECT_EQ(aclrtGetDeviceCount(nullptr), ACL_ERROR_INVALID_PARAM);
}

TEST(CapiRuntime, DeviceIsPerThread) {
  ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
  aclError other = ACL_SUCCESS;
  std::thread([&] {
    int32_t id = 0;
    other = aclrtGetDevice(&id);
  }).join();
  EXPECT_EQ(other, ACL_ERROR_INVALID_DEVICE);
  EXPECT_EQ(aclrtResetDevice(0), ACL_SUCCESS);
}

// ---- memory ----------------------------------------------------------------------
TEST(CapiMemory, MallocIsAlignedAndFreeChecksItsPointer) {
  for (size_t size : {size_t{1}, size_t{63}, size_t{64}, size_t{1000}, size_t{1} << 20}) {
    void* p = nullptr;
    ASSERT_EQ(aclrtMalloc(&p, size, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS) << size;
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << size;
    std::memset(p, 0x5a, size);  // all of it is usable (ASan checks the bound)
    EXPECT_EQ(aclrtFree(p), ACL_SUCCESS);
    EXPECT_EQ(aclrtFree(p), ACL_ERROR_INVALID_PARAM) << "double free must be refused";
  }
  int local = 0;
  EXPECT_EQ(aclrtFree(&local), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtFree(nullptr), ACL_ERROR_INVALID_PARAM);
  void* p = nullptr;
  EXPECT_EQ(aclrtMalloc(nullptr, 16, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMalloc(&p, 0, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(aclrtMalloc(&p, SIZE_MAX, ACL_MEM_MALLOC_NORMAL_ONLY), ACL_ERROR_BAD_ALLOC);
  EXPECT_EQ(aclrtMalloc(&p, SIZE_MAX - 10, ACL_MEM_MALLOC_NORMAL_ONLY), ACL_ERROR_BAD_ALLOC);
  EXPECT_EQ(p, nullptr);
  ASSERT_EQ(aclrtMallocHost(&p, 32), ACL_SUCCESS);
  EXPECT_EQ(aclrtFreeHost(p), ACL_SUCCESS);
}

TEST(CapiMemory, MemcpyCountAboveDestMaxCopiesNothing) {
  std::vector<unsigned char> src(100, 7), dst(100, 1);
  EXPECT_EQ(aclrtMemcpy(dst.data(), 50, src.data(), 51, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM);
  EXPECT_NE(recent().find("destMax"), std::string::npos) << recent();
  EXPECT_EQ(dst, std::vector<unsigned char>(100, 1));
  EXPECT_EQ(aclrtMemcpy(dst.data(), 100, src.data(), 50, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
  EXPECT_EQ(dst[49], 7);
  EXPECT_EQ(dst[50], 1);
}

TEST(CapiMemory, MemcpyKindsAndBadArguments) {
  for (int kind = 0; kind <= 4; ++kind) {
    int a = 11 * (kind + 1), b = 0;
    EXPECT_EQ(aclrtMemcpy(&b, sizeof b, &a, sizeof a, static_cast<aclrtMemcpyKind>(kind)), ACL_SUCCESS);
    EXPECT_EQ(b, a);
  }
  int a = 1, b = 2;
  for (int kind : {-1, 5, 1000}) {
    EXPECT_EQ(aclrtMemcpy(&b, sizeof b, &a, sizeof a, static_cast<aclrtMemcpyKind>(kind)), ACL_ERROR_INVALID_PARAM);
    EXPECT_NE(recent().find(std::to_string(kind)), std::string::npos) << recent();
  }
  EXPECT_EQ(aclrtMemcpy(nullptr, 4, &a, 4, ACL_MEMCPY_DEFAULT), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMemcpy(&b, 4, nullptr, 4, ACL_MEMCPY_DEFAULT), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMemcpy(&b, 4, &a, 0, ACL_MEMCPY_DEFAULT), ACL_SUCCESS);
  EXPECT_EQ(b, 2);
}

TEST(CapiMemory, AsyncCopiesCheckTheirArgumentsAtTheCall) {
  std::vector<unsigned char> a(32, 1), b(32, 0);
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  EXPECT_EQ(aclrtMemcpyAsync(b.data(), 16, a.data(), 17, ACL_MEMCPY_HOST_TO_HOST, s), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMemcpyAsync(b.data(), 32, a.data(), 32, static_cast<aclrtMemcpyKind>(9), s),
            ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMemcpyAsync(nullptr, 32, a.data(), 32, ACL_MEMCPY_DEFAULT, s), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMemsetAsync(b.data(), 8, 3, 9, s), ACL_ERROR_INVALID_PARAM);
  int not_a_stream = 0;
  EXPECT_EQ(aclrtMemsetAsync(b.data(), 8, 3, 8, &not_a_stream), ACL_ERROR_INVALID_PARAM);
  ASSERT_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS);
  EXPECT_EQ(b, std::vector<unsigned char>(32, 0)) << "refused calls change nothing";
  EXPECT_EQ(aclrtMemcpyAsync(b.data(), 32, a.data(), 32, ACL_MEMCPY_HOST_TO_HOST, s), ACL_SUCCESS);
  EXPECT_EQ(aclrtMemsetAsync(b.data(), 32, 7, 4, s), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS);
  EXPECT_EQ(b[3], 7);
  EXPECT_EQ(b[4], 1);
  EXPECT_EQ(aclrtDestroyStream(s), ACL_SUCCESS);
}

TEST(CapiMemory, Memset) {
  std::vector<unsigned char> buf(16, 0);
  EXPECT_EQ(aclrtMemset(buf.data(), 16, 0x1ab, 8), ACL_SUCCESS);  // the low byte, as memset
  EXPECT_EQ(buf[7], 0xab);
  EXPECT_EQ(buf[8], 0);
  EXPECT_EQ(aclrtMemset(buf.data(), 8, 1, 9), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(buf[0], 0xab);
  EXPECT_EQ(aclrtMemset(nullptr, 8, 1, 4), ACL_ERROR_INVALID_PARAM);
}

// ---- system parameters -----------------------------------------------------------
TEST(CapiSysParam, DeterministicIsAcceptedAndReported) {
  int64_t v = -1;
  EXPECT_EQ(aclrtCtxSetSysParamOpt(ACL_OPT_DETERMINISTIC, 1), ACL_SUCCESS);
  EXPECT_EQ(aclrtCtxGetSysParamOpt(aclSysParamOpt::ACL_OPT_DETERMINISTIC, &v), ACL_SUCCESS);
  EXPECT_EQ(v, 1);
  EXPECT_EQ(aclrtGetSysParamOpt(ACL_OPT_DETERMINISTIC, &v), ACL_SUCCESS);
  EXPECT_EQ(v, 0) << "the process value is separate from the context's";
  EXPECT_EQ(aclrtSetSysParamOpt(ACL_OPT_DETERMINISTIC, 1), ACL_SUCCESS);
  EXPECT_EQ(aclrtGetSysParamOpt(ACL_OPT_DETERMINISTIC, &v), ACL_SUCCESS);
  EXPECT_EQ(v, 1);
  EXPECT_EQ(aclrtCtxSetSysParamOpt(ACL_OPT_DETERMINISTIC, 2), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtSetSysParamOpt(ACL_OPT_DETERMINISTIC, -1), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtCtxSetSysParamOpt(static_cast<aclSysParamOpt>(7), 1), ACL_ERROR_INVALID_PARAM);
  EXPECT_NE(recent().find("7"), std::string::npos) << recent();
  EXPECT_EQ(aclrtGetSysParamOpt(static_cast<aclSysParamOpt>(7), &v), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtCtxGetSysParamOpt(ACL_OPT_DETERMINISTIC, nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtCtxGetSysParamOpt(ACL_OPT_DETERMINISTIC, &v), ACL_SUCCESS);
  EXPECT_EQ(v, 1) << "a refused set changes nothing";
  EXPECT_EQ(aclrtCtxSetSysParamOpt(ACL_OPT_DETERMINISTIC, 0), ACL_SUCCESS);
  EXPECT_EQ(aclrtSetSysParamOpt(ACL_OPT_DETERMINISTIC, 0), ACL_SUCCESS);
}

TEST(CapiRuntime, AclnnInitAndFinalize) {
  EXPECT_EQ(aclnnInit(nullptr), ACLNN_SUCCESS);
  EXPECT_EQ(aclnnFinalize(), ACLNN_SUCCESS);
}

TEST(CapiRuntime, RecentErrorMessageIsPerThread) {
  EXPECT_EQ(aclrtSetDevice(5), ACL_ERROR_INVALID_DEVICE);
  const std::string mine = recent();
  EXPECT_NE(mine.find("aclrtSetDevice"), std::string::npos) << mine;
  std::string theirs = "unset";
  std::thread([&] { theirs = aclGetRecentErrMsg(); }).join();
  EXPECT_EQ(theirs, "");
  // A success does not erase the last failure (as errno).
  EXPECT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
  EXPECT_EQ(recent(), mine);
  EXPECT_EQ(aclrtResetDevice(0), ACL_SUCCESS);
}

TEST(CapiRuntime, Float16HelpersAndTypeSizes) {
  EXPECT_EQ(aclFloatToFloat16(1.0f), 0x3c00);
  EXPECT_EQ(aclFloatToFloat16(-2.0f), 0xc000);
  EXPECT_EQ(aclFloat16ToFloat(0x3555), 0.333251953125f);
  EXPECT_EQ(aclFloat16ToFloat(aclFloatToFloat16(65504.0f)), 65504.0f);
  EXPECT_EQ(aclDataTypeSize(ACL_FLOAT), 4u);
  EXPECT_EQ(aclDataTypeSize(ACL_BF16), 2u);
  EXPECT_EQ(aclDataTypeSize(ACL_HIFLOAT8), 1u);
  EXPECT_EQ(aclDataTypeSize(ACL_INT64), 8u);
  EXPECT_EQ(aclDataTypeSize(static_cast<aclDataType>(99)), 0u);
}

// ---- objects -----------------------------------------------------------------------
TEST(CapiObjects, GettersReturnWhatWasGiven) {
  const int64_t dims[4] = {2, 3, 4, 5};
  const int64_t strides[4] = {60, 1, 15, 3};  // channels-last
  const int64_t storage[1] = {130};
  float data[130];
  aclTensor* t = aclCreateTensor(dims, 4, ACL_BF16, strides, 7, ACL_FORMAT_NCHW, storage, 1, data);
  ASSERT_NE(t, nullptr);
  int64_t* out = nullptr;
  uint64_t n = 0;
  ASSERT_EQ(aclGetViewShape(t, &out, &n), ACLNN_SUCCESS);
  EXPECT_EQ(std::vector<int64_t>(out, out + n), std::vector<int64_t>(dims, dims + 4));
  delete[] out;
  ASSERT_EQ(aclGetViewStrides(t, &out, &n), ACLNN_SUCCESS);
  EXPECT_EQ(std::vector<int64_t>(out, out + n), std::vector<int64_t>(strides, strides + 4));
  delete[] out;
  ASSERT_EQ(aclGetStorageShape(t, &out, &n), ACLNN_SUCCESS);
  EXPECT_EQ(std::vector<int64_t>(out, out + n), std::vector<int64_t>{130});
  delete[] out;
  int64_t offset = 0;
  EXPECT_EQ(aclGetViewOffset(t, &offset), ACLNN_SUCCESS);
  EXPECT_EQ(offset, 7);
  aclFormat format = ACL_FORMAT_UNDEFINED;
  EXPECT_EQ(aclGetFormat(t, &format), ACLNN_SUCCESS);
  EXPECT_EQ(format, ACL_FORMAT_NCHW);
  aclDataType dt = ACL_DT_UNDEFINED;
  EXPECT_EQ(aclGetDataType(t, &dt), ACLNN_SUCCESS);
  EXPECT_EQ(dt, ACL_BF16);
  EXPECT_EQ(aclDestroyTensor(t), ACLNN_SUCCESS);
}

TEST(CapiObjects, NullStridesMeanContiguousAndInputsAreCopied) {
  std::vector<int64_t> dims = {2, 3, 4};
  aclTensor* t = aclCreateTensor(dims.data(), 3, ACL_FLOAT, nullptr, 0, ACL_FORMAT_NCL, dims.data(), 3, nullptr);
  ASSERT_NE(t, nullptr);
  dims.assign({9, 9, 9});  // the tensor kept its own copy
  int64_t* out = nullptr;
  uint64_t n = 0;
  ASSERT_EQ(aclGetViewStrides(t, &out, &n), ACLNN_SUCCESS);
  EXPECT_EQ(std::vector<int64_t>(out, out + n), (std::vector<int64_t>{12, 4, 1}));
  delete[] out;
  ASSERT_EQ(aclGetViewShape(t, &out, &n), ACLNN_SUCCESS);
  EXPECT_EQ(std::vector<int64_t>(out, out + n), (std::vector<int64_t>{2, 3, 4}));
  delete[] out;
  aclDestroyTensor(t);
}

TEST(CapiObjects, HostileCreationArgumentsReturnNull) {
  const int64_t dims[2] = {1, 1};
  EXPECT_EQ(aclCreateTensor(nullptr, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims, 2, nullptr), nullptr);
  EXPECT_NE(recent().find("viewDims"), std::string::npos) << recent();
  EXPECT_EQ(aclCreateTensor(dims, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, nullptr, 2, nullptr), nullptr);
  EXPECT_EQ(aclCreateTensor(dims, UINT64_MAX, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims, 2, nullptr), nullptr);
  EXPECT_EQ(aclCreateTensor(dims, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims, uint64_t{1} << 40, nullptr),
            nullptr);
  // A scalar: zero dims with null pointers is a valid tensor.
  aclTensor* scalar = aclCreateTensor(nullptr, 0, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, nullptr, 0, nullptr);
  ASSERT_NE(scalar, nullptr);
  int64_t* out = nullptr;
  uint64_t n = 99;
  ASSERT_EQ(aclGetViewShape(scalar, &out, &n), ACLNN_SUCCESS);
  EXPECT_EQ(n, 0u);
  delete[] out;
  aclDestroyTensor(scalar);
  // Unknown enum values are stored as given; operators reject them later.
  aclTensor* odd = aclCreateTensor(dims, 2, static_cast<aclDataType>(99), nullptr, 0,
                                   static_cast<aclFormat>(1234), dims, 2, nullptr);
  ASSERT_NE(odd, nullptr);
  aclDataType dt = ACL_FLOAT;
  aclFormat fmt = ACL_FORMAT_ND;
  EXPECT_EQ(aclGetDataType(odd, &dt), ACLNN_SUCCESS);
  EXPECT_EQ(static_cast<int>(dt), 99);
  EXPECT_EQ(aclGetFormat(odd, &fmt), ACLNN_SUCCESS);
  EXPECT_EQ(static_cast<int>(fmt), 1234);
  aclDestroyTensor(odd);

  EXPECT_EQ(aclCreateIntArray(nullptr, 3), nullptr);
  EXPECT_EQ(aclCreateIntArray(dims, UINT64_MAX), nullptr);
  EXPECT_EQ(aclCreateBoolArray(nullptr, 3), nullptr);
  const bool flags[1] = {true};
  EXPECT_EQ(aclCreateBoolArray(flags, UINT64_MAX), nullptr);
}

TEST(CapiObjects, GettersRejectNulls) {
  const int64_t dims[1] = {3};
  aclTensor* t = aclCreateTensor(dims, 1, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims, 1, nullptr);
  ASSERT_NE(t, nullptr);
  int64_t* out = nullptr;
  uint64_t n = 0;
  int64_t offset = 0;
  aclFormat format;
  aclDataType dt;
  EXPECT_EQ(aclGetViewShape(nullptr, &out, &n), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(aclGetViewShape(t, nullptr, &n), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(aclGetViewShape(t, &out, nullptr), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(aclGetStorageShape(nullptr, &out, &n), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(aclGetViewStrides(t, nullptr, &n), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(aclGetViewOffset(nullptr, &offset), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(aclGetViewOffset(t, nullptr), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(aclGetFormat(nullptr, &format), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(aclGetFormat(t, nullptr), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(aclGetDataType(nullptr, &dt), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(aclGetDataType(t, nullptr), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(out, nullptr);
  aclDestroyTensor(t);
}

TEST(CapiObjects, ArraysAndDestroyingNull) {
  const int64_t v[3] = {4, 5, 6};
  aclIntArray* a = aclCreateIntArray(v, 3);
  ASSERT_NE(a, nullptr);
  uint64_t n = 0;
  EXPECT_EQ(aclGetIntArraySize(a, &n), ACLNN_SUCCESS);
  EXPECT_EQ(n, 3u);
  EXPECT_EQ(aclGetIntArraySize(nullptr, &n), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(aclDestroyIntArray(a), ACLNN_SUCCESS);
  const bool b[2] = {true, false};
  aclBoolArray* ba = aclCreateBoolArray(b, 2);
  ASSERT_NE(ba, nullptr);
  EXPECT_EQ(aclGetBoolArraySize(ba, &n), ACLNN_SUCCESS);
  EXPECT_EQ(n, 2u);
  EXPECT_EQ(aclDestroyBoolArray(ba), ACLNN_SUCCESS);
  aclIntArray* empty = aclCreateIntArray(nullptr, 0);
  ASSERT_NE(empty, nullptr);
  aclDestroyIntArray(empty);
  EXPECT_EQ(aclDestroyTensor(nullptr), ACLNN_SUCCESS);
  EXPECT_EQ(aclDestroyIntArray(nullptr), ACLNN_SUCCESS);
  EXPECT_EQ(aclDestroyBoolArray(nullptr), ACLNN_SUCCESS);
  EXPECT_EQ(aclDestroyAclOpExecutor(nullptr), ACLNN_SUCCESS);
}

}  // namespace
