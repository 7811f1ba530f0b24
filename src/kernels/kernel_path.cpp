#include "kernels/kernel_path.h"

#include <hwy/targets.h>

#include <atomic>
#include <cstring>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif

namespace minfer {
namespace {

std::atomic<KernelPath> g_path{KernelPath::kBest};
std::atomic<bool> g_extensions{true};
std::atomic<int> g_avx2_prefetch{-1};  // -1: the CPU's default (software_prefetch_pays)

bool cpu_has_vnni() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    static const bool has = __builtin_cpu_supports("avx512vnni");
    return has;
#else
    return false;
#endif
}

bool cpu_has_bf16() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    static const bool has = __builtin_cpu_supports("avx512bf16");
    return has;
#else
    return false;
#endif
}

// The CPU's vendor and display family and model (CPUID leaf 1); false without CPUID.
bool read_x86_cpu(bool& amd, unsigned& family, unsigned& model) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return false;
    amd = ebx == 0x68747541 && edx == 0x69746e65 && ecx == 0x444d4163;  // "AuthenticAMD"
    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
    const unsigned base_family = (eax >> 8) & 0xF, base_model = (eax >> 4) & 0xF;
    const bool extended = base_family == 0xF || (!amd && base_family == 0x6);
    family = base_family == 0xF ? base_family + ((eax >> 20) & 0xFF) : base_family;
    model = extended ? base_model | ((eax >> 16) & 0xF) << 4 : base_model;
    return true;
#else
    (void)amd, (void)family, (void)model;
    return false;
#endif
}

}  // namespace

void set_kernel_path(KernelPath path) {
    g_path.store(path, std::memory_order_relaxed);
}
KernelPath kernel_path() {
    return g_path.load(std::memory_order_relaxed);
}

void set_x86_extensions_enabled(bool enabled) {
    g_extensions.store(enabled, std::memory_order_relaxed);
}
bool x86_vnni_available() {
    return g_extensions.load(std::memory_order_relaxed) && cpu_has_vnni();
}
bool x86_bf16_available() {
    return g_extensions.load(std::memory_order_relaxed) && cpu_has_bf16();
}

// Measured on Zen 3 (prefetches needed) and Zen 4 (not; Zen 5 assumed alike); other CPUs keep the
// prefetches the kernels were first tuned with. Family 0x19's Zen 3 models are 0x00-0x0F and
// 0x20-0x5F (Milan, Vermeer, Rembrandt, Cezanne); the others are taken as Zen 4 (those known:
// 0x10-0x1F, 0x60-0x7F and 0xA0-0xAF: Genoa, Raphael, Phoenix, Bergamo).
bool software_prefetch_pays_on(bool amd, unsigned family, unsigned model) {
    if (!amd || family < 0x19) return true;
    if (family > 0x19) return false;
    return model <= 0x0F || (model >= 0x20 && model <= 0x5F);
}
bool software_prefetch_pays() {
    static const bool pays = [] {
        bool amd = false;
        unsigned family = 0, model = 0;
        return !read_x86_cpu(amd, family, model) || software_prefetch_pays_on(amd, family, model);
    }();
    return pays;
}
void set_avx2_software_prefetch(bool enabled) {
    g_avx2_prefetch.store(enabled ? 1 : 0, std::memory_order_relaxed);
}
bool avx2_software_prefetch() {
    const int set = g_avx2_prefetch.load(std::memory_order_relaxed);
    return set < 0 ? software_prefetch_pays() : set == 1;
}

std::string kernels_in_use() {
    if (kernel_path() == KernelPath::kScalar) return "scalar";
    const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();  // the best first
    if (targets.empty()) return "scalar";
    std::string name = hwy::TargetName(targets.front());
    if (targets.front() == HWY_AVX3) {
        if (x86_vnni_available()) name += " VNNI";
        if (x86_bf16_available()) name += " BF16";
    }
    if (targets.front() == HWY_AVX2) {
        name += avx2_software_prefetch() ? " (software prefetch on)" : " (software prefetch off)";
    }
    return name;
}

std::string cpu_brand() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    unsigned regs[12] = {};
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid(0x80000000, &eax, &ebx, &ecx, &edx) == 0 || eax < 0x80000004) return "";
    for (unsigned leaf = 0; leaf < 3; ++leaf) {
        __get_cpuid(0x80000002 + leaf, &regs[4 * leaf], &regs[4 * leaf + 1], &regs[4 * leaf + 2],
                    &regs[4 * leaf + 3]);
    }
    char text[sizeof(regs) + 1] = {};
    std::memcpy(text, regs, sizeof(regs));
    std::string brand(text);
    // Brand strings are padded with spaces at either end.
    const auto first = brand.find_first_not_of(' ');
    if (first == std::string::npos) return "";
    return brand.substr(first, brand.find_last_not_of(' ') - first + 1);
#else
    return "";
#endif
}

}  // namespace minfer
