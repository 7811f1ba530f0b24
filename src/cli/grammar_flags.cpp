#include "cli/grammar_flags.h"

#include "core/file_io.h"
#include "grammar/byte_grammar.h"
#include "grammar/json_schema.h"

namespace minfer::cli {

void add_grammar_flags(CLI::App* cmd, GrammarFlags& flags) {
    const char* group = "Constrained generation";
    auto* text = cmd->add_option("--grammar", flags.grammar,
                                 "Constrain the answer to this GBNF grammar (llama.cpp's format)")
                     ->group(group);
    auto* file = cmd->add_option("--grammar-file", flags.grammar_file,
                                 "Constrain the answer to the GBNF grammar in this file")
                     ->group(group);
    auto* schema = cmd->add_option("-j,--json-schema", flags.json_schema,
                                   "Constrain the answer to JSON valid under this JSON Schema")
                       ->group(group);
    auto* schema_file =
        cmd->add_option("--json-schema-file", flags.json_schema_file,
                        "Constrain the answer to JSON valid under the JSON Schema in this file")
            ->group(group);
    text->excludes(file)->excludes(schema)->excludes(schema_file);
    file->excludes(schema)->excludes(schema_file);
    schema->excludes(schema_file);
    flags.grammar_option = text;
    flags.schema_option = schema;
}

namespace {

std::optional<grammar::Grammar> parse(const GrammarFlags& flags) {
    if (flags.grammar_option != nullptr && flags.grammar_option->count() > 0)
        return grammar::parse_gbnf(flags.grammar);
    if (!flags.grammar_file.empty())
        return grammar::parse_gbnf(read_file(flags.grammar_file, "the grammar file"));
    std::string schema;
    if (!flags.json_schema_file.empty()) {
        schema = read_file(flags.json_schema_file, "the JSON schema file");
    } else if (flags.schema_option != nullptr && flags.schema_option->count() > 0) {
        schema = flags.json_schema;
    } else {
        return std::nullopt;
    }
    return grammar::parse_gbnf(
        grammar::json_schema_to_gbnf(grammar::parse_json_schema_text(schema)));
}

}  // namespace

std::optional<grammar::Grammar> to_grammar(const GrammarFlags& flags) {
    std::optional<grammar::Grammar> g = parse(flags);
    // What the matcher refuses (left recursion, a root that never finishes, the size), now
    // rather than after the model has loaded.
    if (g) grammar::lower(*g);
    return g;
}

}  // namespace minfer::cli
