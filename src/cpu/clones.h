// Loops compiled for AVX-512, AVX2 and the baseline, the version chosen when the library loads
// (GCC's target_clones, resolved as IFUNCs at load time). GCC only: clang 14 (Debian 12's) names
// the resolver `f.ifunc` and leaves callers in other files bound to one clone, which dies with
// SIGILL on a CPU without AVX-512; clang builds get the baseline loop. Left out under
// AddressSanitizer, whose runtime is not yet up when the loader runs the resolvers.
// scripts/check-clones checks every object for a resolver under each cloned function's own name.
//
// Where one body cannot serve every target (a loop whose vectors must be as wide as the target's
// registers), WICK_CPU_VERSIONS is 1 and each target gets a body of its own: GCC's function
// multiversioning, the same three targets, resolved the same way:
//   WICK_CPU_VERSION("arch=x86-64-v4") void f() { ... }   // AVX-512
//   WICK_CPU_VERSION("arch=x86-64-v3") void f() { ... }   // AVX2, FMA
//   WICK_CPU_VERSION("default") void f() { ... }          // the baseline, and the only one where
//                                                         // WICK_CPU_VERSIONS is 0
// (file-local functions only: GCC 12 names the resolver of a version set `_Z<length><name>`).
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define WICK_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define WICK_CPU_VERSIONS 1
#define WICK_CPU_VERSION(arch) __attribute__((target(arch)))
#else
#define WICK_CPU_CLONES
#define WICK_CPU_VERSIONS 0
#define WICK_CPU_VERSION(arch)
#endif
