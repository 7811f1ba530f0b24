#pragma once
// Which implementation the kernels use. Normally the best one for the CPU (Highway's run-time
// dispatch, plus AVX512-VNNI / AVX512-BF16 inside the AVX-512 target when the CPU has them).
// Tests force the portable scalar reference, or switch the VNNI/BF16 extras off, to check every
// path on one machine; Highway targets are forced with hwy::SetSupportedTargetsForTest.

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

}  // namespace minfer
