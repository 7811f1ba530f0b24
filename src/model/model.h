#pragma once
// A loaded model: the mapped GGUF file, its architecture, hyperparameters and weight views.
// Immutable once loaded and shared by every inference context that uses it.

#include <filesystem>
#include <memory>

#include "gguf/gguf_file.h"
#include "model/architecture.h"
#include "model/hparams.h"
#include "model/weights.h"

namespace minfer {

class Model {
  public:
    // Maps and validates the file (or split model); throws minfer::Error naming what is wrong.
    static std::shared_ptr<const Model> load(const std::filesystem::path& path);

    struct PrivateKey {};  // only load() constructs models
    Model(PrivateKey, GgufFile file);
    Model(const Model&) = delete;
    Model& operator=(const Model&) = delete;

    const GgufFile& file() const { return file_; }
    const GgufMetadata& metadata() const { return file_.metadata(); }
    const Architecture& arch() const { return *arch_; }
    const HParams& hparams() const { return hparams_; }
    const ModelWeights& weights() const { return weights_; }

    uint64_t n_params() const;      // elements of every tensor
    uint64_t weight_bytes() const;  // bytes of every tensor in the file(s)
    // Bytes of weights read to decode one token: every block matrix, the output matrix, the
    // norms, and one embedding row.
    uint64_t bytes_per_token() const;

  private:
    GgufFile file_;
    const Architecture* arch_;
    HParams hparams_;
    ModelWeights weights_;
};

}  // namespace minfer
