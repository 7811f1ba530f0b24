#include "kernels/kernel_path.h"

#include <atomic>

namespace minfer {
namespace {

std::atomic<KernelPath> g_path{KernelPath::kBest};
std::atomic<bool> g_extensions{true};

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

}  // namespace minfer
