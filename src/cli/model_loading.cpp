#include "cli/model_loading.h"

#include "cli/format.h"
#include "cli/progress_bar.h"
#include "core/error.h"
#include "core/log.h"

namespace minfer::cli {

LoadedModel load_model_for_cli(const std::string& reference, bool quiet,
                               const std::optional<std::string>& template_source) {
    ProgressBar bar;
    LoadOptions options;
    options.template_source = template_source;
    if (bar.enabled()) {
        options.on_read_progress = [&bar](double fraction) {
            bar.update(fraction, "reading weights");
        };
    }
    LoadedModel loaded = load_model(reference, options);
    bar.finish();
    if (!quiet) {
        const Model& m = *loaded.model;
        // Through the log sink, which escapes the file name for the terminal.
        log_info(concat("minfer: loaded ", m.file().path().filename().string(), " (",
                        m.hparams().architecture, ", ", format_count(m.n_params()), " parameters, ",
                        format_mib(m.file().file_size()), ") in ", format_fixed(loaded.load_ms, 1),
                        " ms"));
    }
    return loaded;
}

}  // namespace minfer::cli
