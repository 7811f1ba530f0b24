#pragma once
// Which file of a repository an hf: reference means, from the repository's file list:
//
//   /PATH/FILE.gguf   that file; a split part (NAME-0000k-of-0000N.gguf) brings every part
//   :QUANT            the model whose path carries QUANT as a whole word, case-insensitively:
//                     not preceded by a letter or digit, not followed by a letter, digit or '_'
//                     (":Q4_K" is not Q4_K_M, ":Q4_0" is not IQ4_0)
//   neither           the repository's only model; with several, the Q4_K_M one
//
// A model is one .gguf file or one whole split set. Projectors (mmproj) and importance matrices
// (imatrix) are never chosen automatically. When the choice is not unique the error lists the
// models, so that the user can name one.

#include <string>
#include <string_view>
#include <vector>

namespace minfer::hub {

// The paths of the chosen model's files: one, or every part of a split set in part order.
// `reference` is used in messages. Throws IoError when nothing matches (naming what exists) and
// UsageError when several models match.
std::vector<std::string> select_model_files(const std::vector<std::string>& repo_paths,
                                            std::string_view quant, std::string_view file,
                                            std::string_view reference);

// Whether `path` carries `tag` as a whole word (the rule above).
bool has_quant_tag(std::string_view path, std::string_view tag);

// The quantization tag a model file's name carries, upper-cased ("Q4_K_M", "IQ4_XS", "F16",
// "BF16"), or "" when it carries none; the last one wins (a directory named after one counts).
std::string quant_tag_of(std::string_view path);

}  // namespace minfer::hub
