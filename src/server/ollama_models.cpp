#include "server/ollama_models.h"

#include <sys/stat.h>

#include <ctime>

#include "chat/tool_calls.h"
#include "core/error.h"
#include "hub/digest.h"
#include "runtime/model_summary.h"
#include "server/reasoning_split.h"

namespace minfer::server {
namespace {

using Json = nlohmann::ordered_json;

std::string rfc3339(std::time_t t) {
    std::tm utc{};
    gmtime_r(&t, &utc);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
    return text;
}

struct FileFacts {
    uint64_t size = 0;
    std::time_t modified = 0;
};

FileFacts facts_of(const GgufFile& file) {
    FileFacts f;
    f.size = file.file_size();
    struct stat st {};
    if (::stat(file.path().c_str(), &st) == 0) f.modified = st.st_mtime;
    return f;
}

Json details_of(const ModelSummary& s) {
    return {{"parent_model", ""},
            {"format", "gguf"},
            {"family", s.architecture},
            {"families", Json::array({s.architecture})},
            {"parameter_size", s.parameter_size},
            {"quantization_level", s.quantization}};
}

}  // namespace

std::string ollama_time(std::chrono::system_clock::time_point t) {
    return rfc3339(std::chrono::system_clock::to_time_t(t));
}

std::string ollama_model_name(const std::string& id) {
    return id.find(':') == std::string::npos ? id + ":latest" : id;
}

Json ollama_model_entry(const GgufFile& file, const std::string& id) {
    const FileFacts f = facts_of(file);
    const std::string name = ollama_model_name(id);
    const std::string identity = concat(file.path().string(), "\n", f.size, "\n",
                                        static_cast<int64_t>(f.modified));
    return {{"name", name},
            {"model", name},
            {"modified_at", rfc3339(f.modified)},
            {"size", f.size},
            {"digest", hub::sha256_hex(std::as_bytes(std::span(identity)))},
            {"details", details_of(summarize_gguf(file))}};
}

Json ollama_model_entry(const CatalogEntry& entry) {
    if (entry.file) {
        try {
            return ollama_model_entry(GgufFile::open(*entry.file), entry.id);
        } catch (const Error&) {
            // Listed as far as it is known: the request that loads it will say what is wrong.
        }
    }
    const std::string name = ollama_model_name(entry.id);
    return {{"name", name}, {"model", name}, {"modified_at", rfc3339(0)}, {"size", 0},
            {"digest", ""}, {"details", {{"parent_model", ""}, {"format", "gguf"}}}};
}

Json ollama_show(const LoadedModel& m, const std::string& id, int64_t n_ctx) {
    const std::string source = m.chat_template.source();
    Json capabilities = Json::array({"completion"});
    if (source.find("tools") != std::string::npos) capabilities.push_back("tools");
    if (template_writes_reasoning(source)) capabilities.push_back("thinking");
    const ModelSummary s = summarize_model(*m.model);
    const auto& hp = m.model->hparams();
    Json info = {{"general.architecture", s.architecture},
                 {"general.parameter_count", m.model->n_params()},
                 {s.architecture + ".context_length", hp.n_ctx_train},
                 {s.architecture + ".embedding_length", hp.n_embd},
                 {s.architecture + ".block_count", hp.n_layer},
                 {s.architecture + ".attention.head_count", hp.n_head},
                 {s.architecture + ".attention.head_count_kv", hp.n_head_kv},
                 {s.architecture + ".vocab_size", hp.n_vocab}};
    return {{"license", ""},
            {"modelfile", concat("# served by minfer from a GGUF file\nFROM ",
                                 std::filesystem::absolute(m.model->file().path()).string(), "\n")},
            {"parameters", concat("num_ctx ", n_ctx)},
            {"template", source},
            {"details", details_of(summarize_model(*m.model))},
            {"model_info", std::move(info)},
            {"capabilities", std::move(capabilities)},
            {"modified_at", rfc3339(facts_of(m.model->file()).modified)},
            {"name", ollama_model_name(id)}};
}

}  // namespace minfer::server
