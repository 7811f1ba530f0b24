#include "model/architecture.h"

#include <array>
#include <functional>

#include "core/error.h"

namespace minfer {
namespace {

using ArchitectureGetter = const Architecture& (*)();
constexpr std::array<ArchitectureGetter, 7> kArchitectures = {
    llama_architecture,  qwen2_architecture,  qwen3_architecture, qwen3moe_architecture,
    gemma2_architecture, gemma3_architecture, phi3_architecture,
};

}  // namespace

std::vector<std::string_view> supported_architectures() {
    std::vector<std::string_view> names;
    for (auto get : kArchitectures) names.push_back(get().name);
    return names;
}

const Architecture& find_architecture(std::string_view name) {
    for (auto get : kArchitectures) {
        if (get().name == name) return get();
    }
    std::string list;
    for (auto n : supported_architectures()) list += concat(list.empty() ? "" : ", ", n);
    throw UnsupportedError(
        concat("architecture '", name, "' is not supported (supported: ", list, ")"));
}

}  // namespace minfer
