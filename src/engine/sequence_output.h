#pragma once
// What one sequence makes of its logits, apart from when they are computed (the engine's
// scheduling): the sampler chain with the grammar's mask chooses a token, and the detokenizer and
// the stop strings turn the chosen tokens into the text handed out.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/stop_reason.h"
#include "engine/stop_strings.h"
#include "grammar/compiled_grammar.h"
#include "sampling/sampler.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer.h"

namespace minfer {

struct OutputParams {
    SamplingParams sampling;
    std::shared_ptr<grammar::CompiledGrammar> grammar;  // null: any token
    std::vector<std::string> stop;                      // stop strings
    bool ignore_eog = false;  // an end-of-generation token is a token like any other
};

class SequenceOutput {
  public:
    // The sampler has seen the prompt (its penalties count prompt tokens). Throws UsageError for
    // bad sampling parameters. `sequence_id` names the sequence in warnings.
    SequenceOutput(OutputParams params, std::span<const int32_t> prompt, const Tokenizer& tokenizer,
                   int32_t n_vocab, uint64_t sequence_id);

    // The token chosen from one row of logits ([n_vocab]), and why the sequence ends instead of
    // taking it: the grammar is complete (EndOfGeneration) or leaves no token or rejects the
    // chosen one (NoAllowedToken), or it is an end-of-generation token (EndOfGeneration).
    // `token` is -1 when none was chosen.
    struct Choice {
        int32_t token = -1;
        std::optional<StopReason> stop;
    };
    Choice choose(std::span<const float> logits);

    // Takes a chosen token: returns the text it completes that may be shown (held back while it
    // might begin a stop string; cut before one that appeared).
    std::string emit(int32_t token);
    // A stop string appeared in what was emitted.
    bool stop_string_seen() const { return filter_.matched(); }
    const std::string& stop_string() const { return filter_.matched_string(); }
    // At the end: the text still held back (none after a stop string).
    std::string finish();

  private:
    const Tokenizer& tokenizer_;
    uint64_t sequence_id_;
    bool ignore_eog_;
    Sampler sampler_;
    std::optional<grammar::GrammarMatcher> matcher_;
    grammar::TokenMask allowed_;  // the matcher's mask of the step being sampled
    StreamingDecoder decoder_;
    StopStringFilter filter_;
};

}  // namespace minfer
