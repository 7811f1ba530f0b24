// `minfer tokenize MODEL (TEXT | -f FILE) [--ids] [--no-bos] [--no-parse-special]` and
// `minfer detokenize MODEL 1,2,3`: the model's tokenizer on the command line.

#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/model_loading.h"
#include "cli/token_list.h"
#include "core/error.h"
#include "core/file_io.h"
#include "core/hex_escape.h"
#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace minfer::cli {
namespace {

Tokenizer load_tokenizer(const std::string& model) {
    const GgufFile file = GgufFile::open(resolve_model_for_cli(model));
    return Tokenizer::from_gguf(file.metadata());
}

// A piece with whitespace and control bytes escaped so that every byte shows: 'Hello\n' .
std::string escape_piece(std::string_view piece) {
    std::string out = "'";
    for (char c : piece) {
        if (c == '\\' || c == '\'') {
            out += '\\';
            out += c;
        } else if (!append_control_escape(out, static_cast<unsigned char>(c), HexCase::kUpper)) {
            out += c;  // UTF-8 bytes pass through; a split character shows as is
        }
    }
    return out + "'";
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
    struct Options {
        std::string model;
        std::string text;
        std::string file;
        bool ids_only = false;
        bool no_bos = false;
        bool no_parse_special = false;
    };
    auto opts = std::make_shared<Options>();
    CLI::App* cmd = app.add_subcommand("tokenize", "Show how a model's tokenizer splits a text");
    cmd->add_option("model", opts->model, kModelHelp)->required();
    CLI::Option* text = cmd->add_option("text", opts->text, "The text to tokenize");
    CLI::Option* file = cmd->add_option("-f,--file", opts->file, "Read the text from this file");
    text->excludes(file);
    file->excludes(text);
    cmd->add_flag("--ids", opts->ids_only, "Print only a JSON array of the ids, on one line");
    cmd->add_flag("--no-bos", opts->no_bos,
                  "Add no BOS/EOS even where the model asks for them (add_bos_token)");
    cmd->add_flag("--no-parse-special", opts->no_parse_special,
                  "Treat special-token text such as <|im_start|> as plain text");
    cmd->callback([opts, text, file] {
        if (text->count() == 0 && file->count() == 0) {
            throw UsageError("give the text to tokenize, or -f FILE");
        }
        const std::string input =
            file->count() ? read_file(opts->file, "the input file") : opts->text;
        const Tokenizer tok = load_tokenizer(opts->model);
        const std::vector<int32_t> ids =
            tok.tokenize(input, !opts->no_bos, !opts->no_parse_special);
        if (opts->ids_only) {
            std::string line = "[";
            for (std::size_t i = 0; i < ids.size(); ++i) {
                line += (i ? ", " : "") + std::to_string(ids[i]);
            }
            std::cout << line << "]\n";
            return;
        }
        for (int32_t id : ids) {
            std::printf("%6d -> %s\n", id, escape_piece(tok.token_to_piece(id, true)).c_str());
        }
    });
}

void add_detokenize_command(CLI::App& app) {
    struct Options {
        std::string model;
        std::vector<std::string> ids;
        bool hide_special = false;
    };
    auto opts = std::make_shared<Options>();
    CLI::App* cmd = app.add_subcommand(
        "detokenize", "Turn token ids (1,2,3) back into text with a model's tokenizer");
    cmd->add_option("model", opts->model, kModelHelp)->required();
    cmd->add_option("ids", opts->ids, "Token ids, separated by commas or spaces")->required();
    cmd->add_flag("--hide-special", opts->hide_special,
                  "Leave out control tokens such as <s> instead of showing their text");
    cmd->callback([opts] {
        std::string joined;
        for (const std::string& part : opts->ids) joined += part + " ";
        const std::vector<int32_t> ids = parse_token_list(joined, "ids");
        const Tokenizer tok = load_tokenizer(opts->model);
        check_token_ids(ids, tok.n_vocab(), "ids");
        std::cout << tok.detokenize(ids, !opts->hide_special) << "\n";
    });
}

}  // namespace minfer::cli
