// `minfer info MODEL`: what a GGUF file holds, without reading its tensor data. Every string from
// the file (keys, values, tensor names) is printed through escape_for_terminal in the text output
// (JSON escapes them itself, replacing invalid UTF-8 with U+FFFD): a metadata value can hold an
// escape sequence or a newline.

#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/model_loading.h"
#include "core/terminal_text.h"
#include "gguf/gguf_file.h"

namespace minfer::cli {
namespace {

constexpr std::size_t kShortArrayItems = 8;

struct Summary {
    std::string architecture;
    std::string name;
    uint64_t n_params = 0;
    uint64_t tensor_bytes = 0;
    std::map<std::string, int> tensors_per_type;

    double bits_per_weight() const {
        return n_params == 0
                   ? 0.0
                   : 8.0 * static_cast<double>(tensor_bytes) / static_cast<double>(n_params);
    }
};

Summary summarize(const GgufFile& file) {
    Summary s;
    const auto& meta = file.metadata();
    if (auto* v = meta.find("general.architecture"); v && v->type() == GgufType::String)
        s.architecture = v->as_string();
    if (auto* v = meta.find("general.name"); v && v->type() == GgufType::String)
        s.name = v->as_string();
    for (const TensorInfo* t : file.tensors()) {
        s.n_params += static_cast<uint64_t>(t->n_elements());
        s.tensor_bytes += t->n_bytes;
        ++s.tensors_per_type[std::string(type_name(t->type))];
    }
    return s;
}

std::string value_type_name(const GgufValue& v) {
    if (v.type() != GgufType::Array) return std::string(gguf_type_name(v.type()));
    return "[" + std::string(gguf_type_name(v.as_array().element_type())) + "; " +
           std::to_string(v.as_array().size()) + "]";
}

void print_text(const GgufFile& file, bool full) {
    const auto& first = file.first_part();
    std::printf("File: %llu bytes (%s) in %zu part(s)\n",
                static_cast<unsigned long long>(file.file_size()),
                format_mib(file.file_size()).c_str(), file.parts().size());
    std::printf("GGUF v%u: %zu KV, %zu tensors, alignment %u, data at offset %llu\n", first.version,
                first.metadata.size(), file.tensors().size(), first.alignment,
                static_cast<unsigned long long>(first.data_offset));

    std::printf("\nMetadata:\n");
    std::vector<std::string> keys;
    std::size_t key_width = 0;
    for (const auto& e : first.metadata.entries()) {
        keys.push_back(escape_for_terminal(e.key));
        key_width = std::max(key_width, keys.back().size());
    }
    for (std::size_t i = 0; i < keys.size(); ++i) {
        const GgufValue& value = first.metadata.entries()[i].value;
        // Strings come back quoted with C0 controls escaped; C1 controls and invalid UTF-8 are not.
        const std::string shown =
            escape_for_terminal(value.to_display_string(full ? 0 : kShortArrayItems));
        std::printf("  %-*s  %-16s %s\n", static_cast<int>(key_width), keys[i].c_str(),
                    value_type_name(value).c_str(), shown.c_str());
    }

    std::printf("\nTensors:\n");
    std::vector<std::string> names;
    std::size_t name_width = 4;
    for (const TensorInfo* t : file.tensors()) {
        names.push_back(escape_for_terminal(t->name));
        name_width = std::max(name_width, names.back().size());
    }
    std::printf("  %-*s  %-8s %-22s %14s %14s\n", static_cast<int>(name_width), "name", "type",
                "shape", "bytes", "offset");
    for (std::size_t i = 0; i < names.size(); ++i) {
        const TensorInfo* t = file.tensors()[i];
        std::printf("  %-*s  %-8s %-22s %14llu %14llu\n", static_cast<int>(name_width),
                    names[i].c_str(), std::string(type_name(t->type)).c_str(),
                    t->shape_string().c_str(), static_cast<unsigned long long>(t->n_bytes),
                    static_cast<unsigned long long>(t->offset));
    }

    const Summary s = summarize(file);
    std::printf("\nSummary:\n");
    std::printf("  architecture:   %s\n",
                s.architecture.empty() ? "(none)" : escape_for_terminal(s.architecture).c_str());
    std::printf("  name:           %s\n",
                s.name.empty() ? "(none)" : escape_for_terminal(s.name).c_str());
    std::printf("  parameters:     %s (%llu)\n", format_count(s.n_params).c_str(),
                static_cast<unsigned long long>(s.n_params));
    std::printf("  tensor bytes:   %llu (%s)\n", static_cast<unsigned long long>(s.tensor_bytes),
                format_mib(s.tensor_bytes).c_str());
    std::printf("  bits per weight: %s\n", format_fixed(s.bits_per_weight(), 2).c_str());
    std::string types;
    for (const auto& [type, n] : s.tensors_per_type)
        types += (types.empty() ? "" : ", ") + type + " x" + std::to_string(n);
    std::printf("  tensor types:   %s\n", types.c_str());
}

nlohmann::ordered_json value_to_json(const GgufValue& v, bool full);

nlohmann::ordered_json array_to_json(const GgufArray& a, bool full) {
    const std::size_t n = full ? a.size() : std::min<uint64_t>(a.size(), kShortArrayItems);
    auto items = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < n; ++i) {
        switch (a.element_type()) {
            case GgufType::String:
                items.push_back(std::string(a.strings()[i]));
                break;
            case GgufType::Array:
                items.push_back(value_to_json(a.arrays()[i], full));
                break;
            case GgufType::Bool:
                items.push_back(a.at<uint8_t>(i) != 0);
                break;
            case GgufType::Float32:
            case GgufType::Float64:
                items.push_back(a.number_at(i));
                break;
            case GgufType::Uint64:
                items.push_back(a.at<uint64_t>(i));
                break;
            case GgufType::Int64:
                items.push_back(a.at<int64_t>(i));
                break;
            default:
                items.push_back(static_cast<int64_t>(a.number_at(i)));
        }
    }
    return items;
}

nlohmann::ordered_json value_to_json(const GgufValue& v, bool full) {
    switch (v.type()) {
        case GgufType::String:
            return std::string(v.as_string());
        case GgufType::Bool:
            return v.get<bool>();
        case GgufType::Float32:
        case GgufType::Float64:
            return v.to_double();
        case GgufType::Uint64:
            return v.get<uint64_t>();
        case GgufType::Array:
            return array_to_json(v.as_array(), full);
        default:
            return v.to_int64();
    }
}

void print_json(const GgufFile& file, bool full) {
    using json = nlohmann::ordered_json;
    const auto& first = file.first_part();
    json doc;
    json parts = json::array();
    for (const auto& p : file.parts())
        parts.push_back({{"path", p.path.string()}, {"bytes", p.bytes.size()}});
    doc["file"] = {{"path", file.path().string()}, {"bytes", file.file_size()}, {"parts", parts}};
    doc["gguf"] = {{"version", first.version},           {"n_kv", first.metadata.size()},
                   {"n_tensors", file.tensors().size()}, {"alignment", first.alignment},
                   {"data_offset", first.data_offset},   {"data_size", first.data_size}};
    json metadata = json::array();
    for (const auto& e : first.metadata.entries()) {
        json entry = {{"key", e.key}, {"type", gguf_type_name(e.value.type())}};
        if (e.value.type() == GgufType::Array) {
            entry["element_type"] = gguf_type_name(e.value.as_array().element_type());
            entry["count"] = e.value.as_array().size();
        }
        entry["value"] = value_to_json(e.value, full);
        metadata.push_back(std::move(entry));
    }
    doc["metadata"] = std::move(metadata);
    json tensors = json::array();
    for (const TensorInfo* t : file.tensors()) {
        json shape = json::array();
        for (uint32_t d = 0; d < t->n_dims; ++d) shape.push_back(t->ne[d]);
        tensors.push_back({{"name", t->name},
                           {"type", type_name(t->type)},
                           {"shape", shape},
                           {"bytes", t->n_bytes},
                           {"offset", t->offset}});
    }
    doc["tensors"] = std::move(tensors);
    const Summary s = summarize(file);
    doc["summary"] = {{"architecture", s.architecture},
                      {"name", s.name},
                      {"n_params", s.n_params},
                      {"tensor_bytes", s.tensor_bytes},
                      {"bits_per_weight", s.bits_per_weight()},
                      {"tensors_per_type", s.tensors_per_type}};
    std::cout << doc.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
}

}  // namespace

void add_info_command(CLI::App& app) {
    struct Options {
        std::string model;
        bool json = false;
        bool full = false;
    };
    auto opts = std::make_shared<Options>();
    CLI::App* cmd =
        app.add_subcommand("info", "Show what a GGUF file holds: metadata, tensors, summary");
    cmd->add_option("model", opts->model, kModelHelp)->required();
    cmd->add_flag("--json", opts->json, "Print one JSON document instead of text");
    cmd->add_flag("--full", opts->full, "Print every element of long arrays");
    cmd->callback([opts] {
        const GgufFile file = GgufFile::open(resolve_model_for_cli(opts->model));
        if (opts->json) {
            print_json(file, opts->full);
        } else {
            print_text(file, opts->full);
        }
    });
}

}  // namespace minfer::cli
