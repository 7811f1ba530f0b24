#include "runtime/loaded_model.h"

#include <chrono>
#include <mutex>

#include "core/error.h"
#include "grammar/json_schema.h"
#include "hub/resolver.h"

namespace minfer {
namespace {

// Reads one byte per page of every part; the sum keeps the reads from being optimised away.
unsigned touch_pages(const GgufFile& file, const std::function<void(double)>& on_progress) {
    constexpr std::size_t kPage = 4096;
    const double total = static_cast<double>(file.file_size());
    double done = 0;
    unsigned sum = 0;
    for (const auto& part : file.parts()) {
        const auto bytes = part.bytes;
        for (std::size_t i = 0; i < bytes.size(); i += kPage) {
            sum += static_cast<unsigned>(bytes[i]);
            if ((i & ((std::size_t{1} << 24) - 1)) == 0)
                on_progress((done + static_cast<double>(i)) / total);
        }
        done += static_cast<double>(bytes.size());
    }
    on_progress(1.0);
    return sum;
}

}  // namespace

struct GrammarVocabularySlot {
    std::once_flag once;
    std::shared_ptr<const grammar::GrammarVocabulary> vocabulary;
};

std::shared_ptr<GrammarVocabularySlot> LoadedModel::make_grammar_slot() {
    return std::make_shared<GrammarVocabularySlot>();
}

std::shared_ptr<const grammar::GrammarVocabulary> LoadedModel::grammar_vocabulary() const {
    std::call_once(grammar_slot->once, [&] {
        auto vocabulary = std::make_shared<const grammar::GrammarVocabulary>(*tokenizer);
        // Every JSON schema's strings, numbers and whitespace share these masks.
        grammar::CompiledGrammar::compile(grammar::parse_gbnf(grammar::json_object_gbnf()),
                                          vocabulary);
        grammar_slot->vocabulary = std::move(vocabulary);
    });
    return grammar_slot->vocabulary;
}

std::shared_ptr<grammar::CompiledGrammar> LoadedModel::compile_grammar(
    const grammar::Grammar& g) const {
    return grammar::CompiledGrammar::compile(g, grammar_vocabulary());
}

LoadedModel load_model(std::string_view reference, const LoadOptions& options) {
    return load_model(hub::parse_reference(reference), options);
}

LoadedModel load_model(const hub::ModelReference& reference, const LoadOptions& options) {
    const hub::ResolvedModel resolved =
        hub::resolve_model(reference, hub::ResolveMode::CacheFirst, options.download);
    const auto start = std::chrono::steady_clock::now();
    auto model = Model::load(resolved.path);
    if (options.on_read_progress) {
        volatile unsigned sink = touch_pages(model->file(), options.on_read_progress);
        (void)sink;
    }
    const GgufMetadata& meta = model->metadata();
    LoadedModel loaded{
        model,
        std::make_shared<const Tokenizer>(Tokenizer::from_gguf(meta)),
        chat::ChatTemplate::parse(options.template_source
                                      ? *options.template_source
                                      : chat::template_source_for(meta, std::nullopt)),
        options.template_source.has_value() || meta.contains("tokenizer.chat_template"),
        chat::special_token_text(meta, "tokenizer.ggml.bos_token_id"),
        chat::special_token_text(meta, "tokenizer.ggml.eos_token_id"),
        0,
        resolved.reference,
    };
    loaded.load_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return loaded;
}

}  // namespace minfer
