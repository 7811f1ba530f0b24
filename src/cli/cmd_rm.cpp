// `minfer rm REF...`: remove models from the caches; a file another recorded reference still uses
// is kept (and said so). ollama's own store and local files are never touched.

#include <cstdio>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/interrupt.h"
#include "core/error.h"
#include "core/log.h"
#include "core/terminal_text.h"
#include "hub/hub_settings.h"
#include "hub/inventory.h"

namespace minfer::cli {

void add_rm_command(CLI::App& app) {
    auto references = std::make_shared<std::vector<std::string>>();
    CLI::App* cmd = app.add_subcommand(
        "rm", "Remove models from the cache (what no other reference uses); see minfer list");
    cmd->add_option("reference", *references, "hf:..., ollama:... or a URL, as minfer list shows")
        ->required();
    cmd->footer(
        "\nRemoves the reference's files from the cache and forgets the reference. A file that "
        "another reference minfer\nrecorded still uses is kept (and named), and so is a blob "
        "that another snapshot (huggingface-cli's)\nlinks. ollama's own store and local files "
        "are never touched. A model\nanother process is downloading is removed once that download "
        "has finished.\n");
    cmd->callback([references] {
        const auto settings = hub::HubSettings::from_environment();
        InterruptGuard interrupt;
        InterruptGuard::clear();
        for (const auto& ref : *references) {
            const hub::Removal r = hub::remove_cached_model(
                ref, settings,
                [&] {
                    log_info(concat("minfer: ", ref,
                                    ": another process is downloading it; waiting for it to "
                                    "finish (Ctrl-C stops)"));
                },
                &InterruptGuard::flag());
            std::printf("removed %s: %zu file(s), %s freed\n", escape_for_terminal(ref).c_str(),
                        r.removed.size(), format_mib(r.bytes_freed).c_str());
            for (const auto& [file, other] : r.kept) {
                std::printf("  kept %s: %s uses it\n",
                            escape_for_terminal(file.filename().string()).c_str(),
                            escape_for_terminal(other).c_str());
            }
        }
    });
}

}  // namespace minfer::cli
