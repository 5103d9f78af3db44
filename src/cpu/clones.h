// Loops compiled for AVX-512, AVX2 and the baseline, the version chosen when the library loads
// (GCC's target_clones, resolved as IFUNCs at load time). GCC only: clang 14 (Debian 12's) names
// the resolver `f.ifunc` and leaves callers in other files bound to one clone, which dies with
// SIGILL on a CPU without AVX-512; clang builds get the baseline loop. Left out under
// AddressSanitizer, whose runtime is not yet up when the loader runs the resolvers.
// scripts/check-clones checks every object for a resolver under each cloned function's own name.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define WICK_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define WICK_CPU_CLONES
#endif
