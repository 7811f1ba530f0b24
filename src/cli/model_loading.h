#pragma once
// What the commands that run a model do with MODEL: recognise hf:/ollama: references (not
// supported yet), resolve a directory or split part, load, and print one status line to stderr.
// On a terminal, the weights are read in once with a progress bar, so the first answer does not
// stall on a cold disk.

#include <memory>
#include <string>

#include "model/model.h"

namespace minfer::cli {

struct LoadedModel {
    std::shared_ptr<const Model> model;
    double load_ms = 0;
};

LoadedModel load_model_for_cli(const std::string& reference, bool quiet = false);

}  // namespace minfer::cli
