#include "cli/model_loading.h"

#include <cstdlib>

#include "cli/download_progress.h"
#include "cli/format.h"
#include "cli/interrupt.h"
#include "cli/progress_bar.h"
#include "core/error.h"
#include "core/log.h"
#include "gguf/gguf_file.h"
#include "hub/reference.h"
#include "hub/resolver.h"

namespace minfer::cli {

std::string default_model() {
    const char* env = std::getenv("MINFER_DEFAULT_MODEL");
    if (env == nullptr || *env == '\0') return kDefaultModel;
    // The user did not type this reference: a malformed one must name where it came from.
    try {
        hub::parse_reference(env);
    } catch (const UsageError& e) {
        throw UsageError(concat("MINFER_DEFAULT_MODEL: ", e.what()));
    }
    return env;
}

LoadedModel load_model_for_cli(const std::string& reference, bool quiet,
                               const std::optional<std::string>& template_source,
                               const std::atomic<bool>* cancel) {
    const hub::ModelReference parsed = hub::parse_reference(reference);
    DownloadDisplay display;
    std::optional<InterruptGuard> interrupt;
    if (cancel == nullptr && hub::is_remote(parsed)) {
        interrupt.emplace();
        InterruptGuard::clear();
        cancel = &InterruptGuard::flag();
    }
    ProgressBar bar;
    LoadOptions options;
    options.template_source = template_source;
    options.download = display.events(cancel);
    if (bar.enabled()) {
        options.on_read_progress = [&bar](double fraction) {
            bar.update(fraction, "reading weights");
        };
    }
    LoadedModel loaded = load_model(parsed, options);
    display.finish();
    bar.finish();
    if (!quiet) {
        const Model& m = *loaded.model;
        // Through the log sink, which escapes the file name for the terminal.
        const std::string name =
            loaded.reference.empty() ? m.file().path().filename().string() : loaded.reference;
        log_info(concat("minfer: loaded ", name, " (", m.hparams().architecture, ", ",
                        format_count(m.n_params()), " parameters, ",
                        format_mib(m.file().file_size()), ") in ", format_fixed(loaded.load_ms, 1),
                        " ms"));
    }
    return loaded;
}

std::filesystem::path resolve_model_for_cli(const std::string& reference) {
    const hub::ModelReference parsed = hub::parse_reference(reference);
    if (!hub::is_remote(parsed))
        return hub::resolve_model(parsed, hub::ResolveMode::CacheFirst, {}).path;
    DownloadDisplay display;
    InterruptGuard interrupt;
    InterruptGuard::clear();
    const auto resolved = hub::resolve_model(parsed, hub::ResolveMode::CacheFirst,
                                             display.events(&InterruptGuard::flag()));
    display.finish();
    return resolved.path;
}

}  // namespace minfer::cli
