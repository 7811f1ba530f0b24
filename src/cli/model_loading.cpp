#include "cli/model_loading.h"

#include <chrono>
#include <cstdio>

#include "cli/format.h"
#include "cli/progress_bar.h"
#include "core/error.h"
#include "gguf/gguf_file.h"

namespace minfer::cli {
namespace {

// Reads one byte per page of every part, showing progress; returns a checksum nobody needs so the
// reads are not optimised away.
unsigned touch_pages(const GgufFile& file, ProgressBar& bar) {
    constexpr std::size_t kPage = 4096;
    const double total = static_cast<double>(file.file_size());
    double done = 0;
    unsigned sum = 0;
    for (const auto& part : file.parts()) {
        const auto bytes = part.bytes;
        for (std::size_t i = 0; i < bytes.size(); i += kPage) {
            sum += static_cast<unsigned>(bytes[i]);
            if ((i & ((std::size_t{1} << 24) - 1)) == 0)
                bar.update((done + static_cast<double>(i)) / total, "reading weights");
        }
        done += static_cast<double>(bytes.size());
    }
    bar.finish();
    return sum;
}

}  // namespace

LoadedModel load_model_for_cli(const std::string& reference, bool quiet) {
    for (const char* scheme : {"hf:", "ollama:", "hf://", "https://", "http://"}) {
        if (reference.rfind(scheme, 0) == 0) {
            throw UnsupportedError(
                concat("'", reference, "': downloading models (", scheme,
                       ") is not supported yet; download the GGUF file and pass its path"));
        }
    }
    const auto start = std::chrono::steady_clock::now();
    LoadedModel loaded;
    loaded.model = Model::load(resolve_model_path(reference));
    ProgressBar bar;
    if (bar.enabled()) {
        volatile unsigned sink = touch_pages(loaded.model->file(), bar);
        (void)sink;
    }
    loaded.load_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (!quiet) {
        const Model& m = *loaded.model;
        std::fprintf(stderr, "minfer: loaded %s (%s, %s parameters, %s) in %.1f ms\n",
                     m.file().path().filename().c_str(), m.hparams().architecture.c_str(),
                     format_count(m.n_params()).c_str(), format_mib(m.file().file_size()).c_str(),
                     loaded.load_ms);
    }
    return loaded;
}

}  // namespace minfer::cli
