#pragma once
// Which implementation the kernels use. Normally the best one for the CPU (Highway's run-time
// dispatch, plus AVX512-VNNI / AVX512-BF16 inside the AVX-512 target when the CPU has them).
// Tests force the portable scalar reference, or switch the VNNI/BF16 extras off, to check every
// path on one machine; Highway targets are forced with hwy::SetSupportedTargetsForTest.

#include <string>

namespace minfer {

enum class KernelPath {
    kBest,    // SIMD through Highway's dispatch
    kScalar,  // the portable scalar reference
};

void set_kernel_path(KernelPath path);
KernelPath kernel_path();

// Enables AVX512-VNNI and AVX512-BF16 instructions inside the AVX-512 target when the CPU has
// them (default); false forces the plain AVX-512 code (for tests).
void set_x86_extensions_enabled(bool enabled);
bool x86_vnni_available();  // CPU has VNNI and it is enabled
bool x86_bf16_available();  // CPU has AVX512-BF16 and it is enabled

// aarch64: the extensions beyond NEON that the integer matrix kernels use, each including the
// ones before it: the ARMv8.2 dot product (sdot) and the ARMv8.6 int8 matrix multiply (i8mm:
// usdot, smmla). Read from the kernel's HWCAP bits (getauxval); kNone on other CPUs.
enum class ArmExtensions { kNone = 0, kDotProd = 1, kI8mm = 2 };
ArmExtensions arm_extensions();  // the CPU's, capped by the limit below
// Tests and benchmarks cap them to run the plainer kernels on the same CPU (default: no cap).
void set_arm_extensions_limit(ArmExtensions limit);
// aarch64: the SVE vector length in bits that the integer matrix kernels use, 256 or 512 (SVE's
// sdot on 8 or 16 rows at once); 0 where the CPU has no SVE, or 128-bit SVE (no wider than NEON),
// or longer vectors than a panel's 16 rows, or tests switched it off.
int arm_sve_kernel_bits();
void set_arm_sve_kernels_enabled(bool enabled);  // default: enabled
// The CPU's aarch64 features for reports ("asimd dotprod i8mm sve2 ..."; "" elsewhere).
std::string arm_features();

// Whether the AVX2 and AVX-512 kernels of the interleaved weights ask for the lines ahead of
// their reads (software prefetches; packed_simd.cpp has the measurements). By default the CPU's
// own answer, software_prefetch_pays(): the hardware prefetchers of Zen 3 and of Intel's Xeons
// alone fell behind those kernels, Zen 4's keep up and the prefetches only slowed them, Zen 5's
// fall behind again.
// MINFER_SOFTWARE_PREFETCH=0 or 1 in the environment overrides it (a CPU the rule does not know),
// or a distance in bytes (a multiple of 64 up to 65536) turns them on that far ahead; tests and
// benchmarks switch it to run both ways.
bool software_prefetch_pays();
// The rule behind it, for an x86 CPU by vendor and CPUID family and model (display values):
// false on AMD Zen 4 (family 0x19 but its Zen 3 models), true elsewhere (Zen 5 measured).
bool software_prefetch_pays_on(bool amd, unsigned family, unsigned model);
// How far ahead of their reads the kernels ask, in bytes, where they do: 8192 on AMD Zen 5 and
// later (family 0x1A and up, measured), 2048 elsewhere (the distance the Xeons were tuned with).
int software_prefetch_distance_on(bool amd, unsigned family, unsigned model);
// The choice in force: the environment's or the default above until set.
void set_x86_software_prefetch(bool enabled);
bool x86_software_prefetch();
// Its distance in bytes: the environment's, else the CPU's (0 where the prefetches are off).
int x86_software_prefetch_distance();

// For benchmark records: the kernels this process runs ("scalar", or Highway's name of the best
// SIMD target and the extensions in use, e.g. "AVX2 (software prefetch off)", "AVX3 VNNI BF16",
// "SVE2 DOTPROD I8MM SVE512": SVE2 the Highway target, SVE512 the integer kernels'), and
// the CPU's name: x86's brand string from CPUID; on aarch64 the implementer and part from
// /proc/cpuinfo (MIDR), e.g. "ARM Neoverse-N1" ("" where unknown).
std::string kernels_in_use();
std::string cpu_brand();
// The aarch64 name for /proc/cpuinfo's "CPU implementer" and "CPU part" (hex, as the kernel
// prints them); "" for one not known. Separate for tests.
std::string arm_cpu_name(unsigned implementer, unsigned part);

}  // namespace minfer
