// The libFuzzer entry point of one target; CONVBWD_FUZZ_ENTRY names the
// target's function (see fuzz_common.hpp), so the same function also runs in
// the replay test without libFuzzer.
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return CONVBWD_FUZZ_ENTRY(data, size); }
