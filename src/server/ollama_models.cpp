#include "server/ollama_models.h"

#include <sys/stat.h>

#include <ctime>

#include "chat/tool_calls.h"
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

FileFacts facts_of(const LoadedModel& m) {
    FileFacts f;
    f.size = m.model->file().file_size();
    struct stat st {};
    if (::stat(m.model->file().path().c_str(), &st) == 0) f.modified = st.st_mtime;
    return f;
}

Json details_of(const LoadedModel& m) {
    const ModelSummary s = summarize_model(*m.model);
    return {{"parent_model", ""},
            {"format", "gguf"},
            {"family", s.architecture},
            {"families", Json::array({s.architecture})},
            {"parameter_size", s.parameter_size},
            {"quantization_level", s.quantization}};
}

}  // namespace

std::string ollama_model_name(const std::string& alias) {
    return alias.find(':') == std::string::npos ? alias + ":latest" : alias;
}

Json ollama_model_entry(const LoadedModel& m, const std::string& alias) {
    const FileFacts f = facts_of(m);
    const std::string name = ollama_model_name(alias);
    const std::string identity = concat(m.model->file().path().string(), "\n", f.size, "\n",
                                        static_cast<int64_t>(f.modified));
    return {{"name", name},
            {"model", name},
            {"modified_at", rfc3339(f.modified)},
            {"size", f.size},
            {"digest", hub::sha256_hex(std::as_bytes(std::span(identity)))},
            {"details", details_of(m)}};
}

Json ollama_show(const LoadedModel& m, const std::string& alias, int64_t n_ctx) {
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
            {"details", details_of(m)},
            {"model_info", std::move(info)},
            {"capabilities", std::move(capabilities)},
            {"modified_at", rfc3339(facts_of(m).modified)},
            {"name", ollama_model_name(alias)}};
}

}  // namespace minfer::server
