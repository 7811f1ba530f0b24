#pragma once
// What every command that runs a model starts from, loaded once: the model, its tokenizer and its
// chat template (the model's, a replacement, or ChatML), with the special-token texts templates
// use. Reference resolution happens here too, not in a front end: a path, a directory holding one
// model, the first part of a split model, or hf:/ollama:/URL references resolved (and downloaded
// when missing) through hub/resolver.h.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "chat/chat_template.h"
#include "grammar/compiled_grammar.h"
#include "hub/download.h"
#include "hub/reference.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace minfer {

struct LoadOptions {
    // Replaces the model's chat template (the text of a --template file).
    std::optional<std::string> template_source;
    // When set, every page of the weights is read once at load (so the first answer does not
    // stall on a cold disk), reporting the fraction done.
    std::function<void(double fraction)> on_read_progress;
    // Progress, notices and Ctrl-C for a download a remote reference needs.
    hub::DownloadEvents download;
};

struct GrammarVocabularySlot;

struct LoadedModel {
    std::shared_ptr<const Model> model;
    std::shared_ptr<const Tokenizer> tokenizer;
    chat::ChatTemplate chat_template;
    // The model has a template of its own or one was given (else chat_template is ChatML).
    bool has_template = false;
    std::string bos_text, eos_text;  // the BOS and EOS tokens' texts, for templates
    double load_ms = 0;              // mapping and parsing, not a download
    // The canonical reference when the model came from a hub, registry or URL ("" for a path).
    std::string reference;
    std::shared_ptr<GrammarVocabularySlot> grammar_slot = make_grammar_slot();

    // The vocabulary as grammars use it, built on first use (with the masks every JSON grammar
    // shares) and then shared by every copy of this LoadedModel. Thread-safe.
    std::shared_ptr<const grammar::GrammarVocabulary> grammar_vocabulary() const;
    // A grammar compiled for this model (grammar/compiled_grammar.h).
    std::shared_ptr<grammar::CompiledGrammar> compile_grammar(const grammar::Grammar& g) const;

  private:
    static std::shared_ptr<GrammarVocabularySlot> make_grammar_slot();
};

// Throws IoError/FormatError for files, what hub::resolve_model throws for remote references
// (Cancelled on Ctrl-C during a download).
LoadedModel load_model(const hub::ModelReference& reference, const LoadOptions& options = {});
// The same for a reference as typed (a path, hf:..., ollama:..., a URL): UsageError for a
// malformed one.
LoadedModel load_model(std::string_view reference, const LoadOptions& options = {});

}  // namespace minfer
