// What every AVX-512 kernel source includes first. Natively it is
// <immintrin.h> and the kernels go into namespace convbwd::detail::avx512.
// The test build compiles the same sources a second time with
// CONVBWD_EMULATE_AVX512 (tests/emulated/): the intrinsics then come from
// SIMDe (Debian's libsimde-dev, native aliases, built for AVX2), and the
// kernels go into convbwd::detail::avx512_emu, so both copies link into one
// test binary and the emulated one runs on a CPU without AVX-512.
#pragma once

#ifdef CONVBWD_EMULATE_AVX512
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#define CONVBWD_AVX512_NS avx512_emu
#else
// GCC 12's AVX-512 intrinsics give their builtins a self-initialized
// _mm512_undefined_*() as the unused merge source, which
// -Wmaybe-uninitialized flags once enough of them are inlined into one
// function (a false positive GCC 13 no longer reports): the value is never
// read, so the warning is off for these headers only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#define CONVBWD_AVX512_NS avx512
#endif
