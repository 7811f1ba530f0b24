#include "kernels/kernel_path.h"

#include <hwy/targets.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "core/error.h"
#include "core/hex_escape.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#include <sys/prctl.h>

#include <fstream>
#endif

namespace minfer {
namespace {

std::atomic<KernelPath> g_path{KernelPath::kBest};
std::atomic<bool> g_extensions{true};
std::atomic<int> g_x86_prefetch{-1};  // -1: the CPU's default (software_prefetch_pays)
std::atomic<ArmExtensions> g_arm_limit{ArmExtensions::kI8mm};
std::atomic<bool> g_arm_sve{true};

#if defined(__aarch64__) && defined(__linux__)
// The aarch64 Linux HWCAP bits (asm/hwcap.h).
struct ArmHwcaps {
    unsigned long hwcap = 0, hwcap2 = 0;
};
ArmHwcaps arm_hwcaps() {
    return {getauxval(AT_HWCAP), getauxval(AT_HWCAP2)};
}
#endif

ArmExtensions cpu_arm_extensions() {
#if defined(__aarch64__) && defined(__linux__)
    static const ArmExtensions has = [] {
        const ArmHwcaps caps = arm_hwcaps();
        if ((caps.hwcap & HWCAP_ASIMDDP) == 0) return ArmExtensions::kNone;
        if ((caps.hwcap2 & HWCAP2_I8MM) == 0) return ArmExtensions::kDotProd;
        return ArmExtensions::kI8mm;
    }();
    return has;
#else
    return ArmExtensions::kNone;
#endif
}

// The SVE vector length of this thread in bits (the kernel's, inherited by the threads a process
// starts), 0 without SVE.
int cpu_sve_bits() {
#if defined(__aarch64__) && defined(__linux__)
    static const int bits = [] {
        if ((arm_hwcaps().hwcap & HWCAP_SVE) == 0) return 0;
        const int vl = prctl(PR_SVE_GET_VL);
        return vl < 0 ? 0 : (vl & PR_SVE_VL_LEN_MASK) * 8;
    }();
    return bits;
#else
    return 0;
#endif
}

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

ArmExtensions arm_extensions() {
    return std::min(cpu_arm_extensions(), g_arm_limit.load(std::memory_order_relaxed));
}
void set_arm_extensions_limit(ArmExtensions limit) {
    g_arm_limit.store(limit, std::memory_order_relaxed);
}

int arm_sve_kernel_bits() {
    const int bits = g_arm_sve.load(std::memory_order_relaxed) ? cpu_sve_bits() : 0;
    return bits == 256 || bits == 512 ? bits : 0;
}
void set_arm_sve_kernels_enabled(bool enabled) {
    g_arm_sve.store(enabled, std::memory_order_relaxed);
}

std::string arm_features() {
    std::string out;
#if defined(__aarch64__) && defined(__linux__)
    const ArmHwcaps caps = arm_hwcaps();
    const struct {
        bool present;
        const char* name;
    } features[] = {
        {(caps.hwcap & HWCAP_ASIMD) != 0, "asimd"},     {(caps.hwcap & HWCAP_ASIMDHP) != 0, "asimdhp"},
        {(caps.hwcap & HWCAP_ASIMDDP) != 0, "dotprod"}, {(caps.hwcap2 & HWCAP2_I8MM) != 0, "i8mm"},
        {(caps.hwcap2 & HWCAP2_BF16) != 0, "bf16"},     {(caps.hwcap & HWCAP_SVE) != 0, "sve"},
        {(caps.hwcap2 & HWCAP2_SVE2) != 0, "sve2"},
    };
    for (const auto& f : features) {
        if (f.present) out += concat(out.empty() ? "" : " ", f.name);
    }
#endif
    return out;
}

// Measured on Zen 3 (prefetches needed), Zen 4 (not) and Zen 5 (needed again: on 2 vCPUs of an
// EPYC "Turin", family 0x1A model 0x02, 7 December 2026, Qwen2 0.5B shape, 4-5 alternations of
// bench -p 0 -n 64, tokens/s without / with: one sequence Q4_0 92-101 / 103-112, Q8_0 53-79 /
// 70-90, Q4_K_M 82-107 / 88-125; 16 sequences Q4_0 494-516 / 697-747, Q8_0 322-347 / 476-564,
// Q4_K_M 493-517 / 635-697: without them the 8-token tile stalled 31 % of its cycles on the
// weights' loads). Other CPUs keep the prefetches the kernels were first tuned with. Family 0x19's
// Zen 3 models are 0x00-0x0F and 0x20-0x5F (Milan, Vermeer, Rembrandt, Cezanne); its others are
// taken as Zen 4 (those known: 0x10-0x1F, 0x60-0x7F and 0xA0-0xAF: Genoa, Raphael, Phoenix,
// Bergamo).
bool software_prefetch_pays_on(bool amd, unsigned family, unsigned model) {
    if (!amd || family != 0x19) return true;
    return model <= 0x0F || (model >= 0x20 && model <= 0x5F);
}
// Zen 5 (the EPYC "Turin" VM above, 7 December 2026, two threads, 3-4 alternations of bench
// -p 0 -n 64, tokens/s at 2048 / 4096 / 8192 bytes): one sequence Qwen2 0.5B Q4_0 125-149 /
// 136-167 / 151-181, Llama 1.1B Q4_K_M 73-75 / 80-88 / 88-91, Q6_K 8192 and 12288 alike
// (112-120), 16384 no better; 16 sequences (-n 32) Q4_0 721-775 at 2048, 726-820 at 8192. At 2048
// the lines came late: a block of one token takes a few nanoseconds, and 2048 bytes ahead is a
// few blocks, under the memory's latency.
int software_prefetch_distance_on(bool amd, unsigned family, unsigned /*model*/) {
    return amd && family >= 0x1A ? 8192 : 2048;
}

namespace {
struct X86Cpu {
    bool known = false, amd = false;
    unsigned family = 0, model = 0;
};
const X86Cpu& this_x86_cpu() {
    static const X86Cpu cpu = [] {
        X86Cpu c;
        c.known = read_x86_cpu(c.amd, c.family, c.model);
        return c;
    }();
    return cpu;
}

// MINFER_SOFTWARE_PREFETCH: 0 (off), 1 (on at the CPU's distance) or a distance in bytes; -1
// where unset or not one of those.
int prefetch_from_environment() {
    static const int value = [] {
        const char* v = std::getenv("MINFER_SOFTWARE_PREFETCH");
        if (v == nullptr) return -1;
        const std::string_view text(v);
        if (text == "0" || text == "1") return text == "1" ? 1 : 0;
        int bytes = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), bytes);
        const bool valid = ec == std::errc() && end == text.data() + text.size() && bytes >= 64 &&
                           bytes <= 65536 && bytes % 64 == 0;
        return valid ? bytes : -1;
    }();
    return value;
}
}  // namespace

bool software_prefetch_pays() {
    const X86Cpu& c = this_x86_cpu();
    return !c.known || software_prefetch_pays_on(c.amd, c.family, c.model);
}
void set_x86_software_prefetch(bool enabled) {
    g_x86_prefetch.store(enabled ? 1 : 0, std::memory_order_relaxed);
}
bool x86_software_prefetch() {
    return x86_software_prefetch_distance() > 0;
}
int x86_software_prefetch_distance() {
    const X86Cpu& c = this_x86_cpu();
    const int cpu_distance = software_prefetch_distance_on(c.amd, c.family, c.model);
    const int set = g_x86_prefetch.load(std::memory_order_relaxed);
    if (set >= 0) return set == 1 ? cpu_distance : 0;
    const int from_environment = prefetch_from_environment();
    if (from_environment > 1) return from_environment;
    const bool on = from_environment < 0 ? software_prefetch_pays() : from_environment == 1;
    return on ? cpu_distance : 0;
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
    if (targets.front() == HWY_AVX2 || targets.front() == HWY_AVX3) {
        const int distance = x86_software_prefetch_distance();
        name += distance > 0 ? concat(" (software prefetch on, ", distance, " bytes ahead)")
                             : std::string(" (software prefetch off)");
    }
    if (arm_extensions() >= ArmExtensions::kDotProd) name += " DOTPROD";
    if (arm_extensions() >= ArmExtensions::kI8mm) name += " I8MM";
    if (arm_sve_kernel_bits() != 0) name += concat(" SVE", arm_sve_kernel_bits());
    return name;
}

std::string arm_cpu_name(unsigned implementer, unsigned part) {
    struct Known {
        unsigned implementer, part;
        const char* name;
    };
    static constexpr Known known[] = {
        {0x41, 0xd03, "ARM Cortex-A53"},     {0x41, 0xd04, "ARM Cortex-A35"},
        {0x41, 0xd05, "ARM Cortex-A55"},     {0x41, 0xd07, "ARM Cortex-A57"},
        {0x41, 0xd08, "ARM Cortex-A72"},     {0x41, 0xd09, "ARM Cortex-A73"},
        {0x41, 0xd0a, "ARM Cortex-A75"},     {0x41, 0xd0b, "ARM Cortex-A76"},
        {0x41, 0xd0c, "ARM Neoverse-N1"},    {0x41, 0xd0d, "ARM Cortex-A77"},
        {0x41, 0xd40, "ARM Neoverse-V1"},    {0x41, 0xd41, "ARM Cortex-A78"},
        {0x41, 0xd44, "ARM Cortex-X1"},      {0x41, 0xd46, "ARM Cortex-A510"},
        {0x41, 0xd47, "ARM Cortex-A710"},    {0x41, 0xd48, "ARM Cortex-X2"},
        {0x41, 0xd49, "ARM Neoverse-N2"},    {0x41, 0xd4f, "ARM Neoverse-V2"},
        {0x41, 0xd80, "ARM Cortex-A520"},    {0x41, 0xd81, "ARM Cortex-A720"},
        {0x41, 0xd82, "ARM Cortex-X4"},      {0x41, 0xd84, "ARM Neoverse-V3"},
        {0x41, 0xd8e, "ARM Neoverse-N3"},    {0xc0, 0xac3, "Ampere AmpereOne"},
        {0x61, 0x022, "Apple M1 Icestorm"},  {0x61, 0x023, "Apple M1 Firestorm"},
        {0x61, 0x032, "Apple M2 Blizzard"},  {0x61, 0x033, "Apple M2 Avalanche"},
        {0x46, 0x001, "Fujitsu A64FX"},      {0x48, 0xd01, "HiSilicon TaiShan v110"},
        {0x51, 0x001, "Qualcomm Oryon"},     {0x4e, 0x004, "NVIDIA Carmel"},
    };
    for (const Known& k : known) {
        if (k.implementer == implementer && k.part == part) return k.name;
    }
    return "";
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
#elif defined(__aarch64__) && defined(__linux__)
    // MIDR_EL1: the kernel emulates the read for user space where HWCAP_CPUID says so (QEMU's
    // user-mode emulator too, with the emulated CPU's value); else /proc/cpuinfo's first core.
    unsigned implementer = 0, part = 0;
    if ((arm_hwcaps().hwcap & HWCAP_CPUID) != 0) {
        uint64_t midr = 0;
        asm volatile("mrs %0, MIDR_EL1" : "=r"(midr));
        implementer = static_cast<unsigned>(midr >> 24) & 0xFF;
        part = static_cast<unsigned>(midr >> 4) & 0xFFF;
    } else {
        std::ifstream in("/proc/cpuinfo");
        std::string line;
        while (std::getline(in, line) && (implementer == 0 || part == 0)) {
            const auto colon = line.find(':');
            if (colon == std::string::npos) continue;
            const unsigned long value = std::strtoul(line.c_str() + colon + 1, nullptr, 0);
            if (line.rfind("CPU implementer", 0) == 0) implementer = static_cast<unsigned>(value);
            if (line.rfind("CPU part", 0) == 0) part = static_cast<unsigned>(value);
        }
    }
    if (implementer == 0 && part == 0) return "";  // nothing read
    const std::string name = arm_cpu_name(implementer, part);
    if (!name.empty()) return name;
    std::string unknown = "aarch64 implementer 0x";
    append_hex(unknown, implementer, 2);
    unknown += " part 0x";
    append_hex(unknown, part, 3);
    return unknown;
#else
    return "";
#endif
}

}  // namespace minfer
