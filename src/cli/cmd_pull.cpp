// `minfer pull REF`: download a model into the cache (or bring it up to date) and verify it.
// Prints the model file's path on stdout (for scripts); what happened goes to stderr.

#include <iostream>

#include "cli/commands.h"
#include "cli/download_progress.h"
#include "cli/format.h"
#include "cli/interrupt.h"
#include "core/error.h"
#include "core/log.h"
#include "hub/reference.h"
#include "hub/resolver.h"

namespace minfer::cli {

namespace {

constexpr const char* kPullHelp = R"(References:
  hf:OWNER/REPO                   the repository's GGUF model (with several, the Q4_K_M one)
  hf:OWNER/REPO:QUANT             the model tagged QUANT (Q4_K_M, Q8_0, ...; a split set whole)
  hf:OWNER/REPO/PATH/FILE.gguf    that file (a split part brings every part)
  hf:OWNER/REPO@REVISION...       a branch, tag, commit or refs/pr/N (other '/' written %2F)
  ollama:NAME[:TAG]               a model of ollama's library (tag latest)
  ollama:USER/NAME[:TAG]
  https://HOST/.../FILE.gguf      a plain URL (revalidated by its ETag)

Hugging Face files go into the Hugging Face cache (HF_HUB_CACHE, else HF_HOME/hub, else
~/.cache/huggingface/hub), shared with huggingface-cli; ollama and URL downloads into
MINFER_CACHE (else ~/.cache/minfer). A download interrupted (Ctrl-C, a lost connection, a killed
process) resumes where it stopped. Other commands use a cached model without asking the hub;
pull asks which commit a branch names now and fetches what changed. When the hub cannot be
reached, pull of a cached model says so and succeeds: the cached copy works, only whether a
newer one exists is unknown.

Environment: HF_ENDPOINT, HF_TOKEN (or huggingface-cli login), HF_HUB_OFFLINE=1 (no request),
MINFER_OLLAMA_REGISTRY, OLLAMA_MODELS (ollama's own store, used in place), MINFER_CACHE,
MINFER_HUB_STALL_TIMEOUT (30 s), MINFER_HUB_RETRIES (5), MINFER_HUB_RETRY_DELAY (1 s).
)";

}  // namespace

void add_pull_command(CLI::App& app) {
    auto reference = std::make_shared<std::string>();
    CLI::App* cmd = app.add_subcommand(
        "pull", "Download a model into the cache and verify it (size, sha256), or update it");
    cmd->footer(kPullHelp);
    cmd->add_option("reference", *reference, "hf:OWNER/REPO[:QUANT], ollama:NAME[:TAG] or a URL")
        ->required();
    cmd->callback([reference] {
        const hub::ModelReference parsed = hub::parse_reference(*reference);
        if (std::holds_alternative<hub::PathReference>(parsed)) {
            throw UsageError(concat("'", *reference,
                                    "' is a local path; pull takes hf:OWNER/REPO[:QUANT], "
                                    "ollama:NAME[:TAG] or an https:// URL"));
        }
        DownloadDisplay display;
        InterruptGuard interrupt;
        InterruptGuard::clear();
        const hub::ResolvedModel r = hub::resolve_model(parsed, hub::ResolveMode::Refresh,
                                                        display.events(&InterruptGuard::flag()));
        display.finish();
        uint64_t size = 0;
        for (const auto& f : r.files) {
            std::error_code ec;
            size += std::filesystem::file_size(f, ec);
        }
        const std::string detail =
            concat(r.revision_note.empty() ? "" : r.revision_note + ", ", format_mib(size),
                   r.files.size() > 1 ? concat(" in ", r.files.size(), " parts") : "");
        if (!r.unchecked.empty()) {
            // Cached and usable: other commands use it without asking. Only its freshness is
            // unknown, which is not a failure of the pull.
            log_warning(concat(r.reference, ": the server could not be reached (", r.unchecked,
                               "); the cached copy (", detail,
                               ") is there and works, whether a newer one exists is unknown"));
        } else {
            log_info(concat("minfer: ", r.reference, r.downloaded ? ": pulled (" : ": up to date (",
                            detail, ")"));
        }
        std::cout << r.path.string() << "\n";
    });
}

}  // namespace minfer::cli
