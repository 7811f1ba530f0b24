#pragma once
// What the commands that take MODEL do with it: resolve the reference (downloading a missing
// hf:/ollama:/URL model with a progress display; Ctrl-C stops the download and leaves it
// resumable), load it with its tokenizer and chat template (runtime/loaded_model.h) showing a
// progress bar while the weights are read in on a terminal, and print one status line to stderr.

#include <atomic>
#include <filesystem>
#include <optional>
#include <string>

#include "runtime/loaded_model.h"

namespace minfer::cli {

// Help texts of the MODEL argument.
inline constexpr const char* kModelHelp =
    "GGUF file (a split model's first part, or a directory holding one), or a reference: "
    "hf:OWNER/REPO[:QUANT], hf:OWNER/REPO/FILE.gguf, ollama:NAME[:TAG], https://.../FILE.gguf "
    "(downloaded once into the cache; see minfer pull --help)";
inline constexpr const char* kModelHelpWithDefault =
    "GGUF file (a split model's first part, or a directory holding one), or a reference: "
    "hf:OWNER/REPO[:QUANT], hf:OWNER/REPO/FILE.gguf, ollama:NAME[:TAG], https://.../FILE.gguf "
    "(downloaded once into the cache; see minfer pull --help). Default: MINFER_DEFAULT_MODEL, "
    "else hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M";

// The model `run` and `chat` use when none is given: MINFER_DEFAULT_MODEL, else kDefaultModel.
inline constexpr const char* kDefaultModel = "hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M";
std::string default_model();

// cancel: a flag that stops a download (serve's shutdown); when null, Ctrl-C does, through an
// InterruptGuard held while resolving.
LoadedModel load_model_for_cli(const std::string& reference, bool quiet = false,
                               const std::optional<std::string>& template_source = std::nullopt,
                               const std::atomic<bool>* cancel = nullptr);

// The GGUF file MODEL names (a split model's first part), downloading it if needed: for the
// commands that read the file themselves (info, tokenize, template, quantize).
std::filesystem::path resolve_model_for_cli(const std::string& reference);

}  // namespace minfer::cli
