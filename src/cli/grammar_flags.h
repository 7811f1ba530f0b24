#pragma once
// The constrained-generation flags of `run` and `chat`, with llama.cpp's names: --grammar,
// --grammar-file, -j/--json-schema, --json-schema-file (one of them).

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "grammar/grammar.h"

namespace minfer::cli {

struct GrammarFlags {
    std::string grammar, grammar_file, json_schema, json_schema_file;
    const CLI::Option* grammar_option = nullptr;
    const CLI::Option* schema_option = nullptr;
};

void add_grammar_flags(CLI::App* cmd, GrammarFlags& flags);
// The grammar the flags ask for, read, parsed and converted before the model is loaded (a bad
// grammar or schema is a UsageError naming where it is wrong); none without those flags.
std::optional<grammar::Grammar> to_grammar(const GrammarFlags& flags);

}  // namespace minfer::cli
