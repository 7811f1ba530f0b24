#include "engine/sequence_output.h"

#include "core/error.h"
#include "core/log.h"

namespace minfer {

SequenceOutput::SequenceOutput(OutputParams params, std::span<const int32_t> prompt,
                               const Tokenizer& tokenizer, int32_t n_vocab, uint64_t sequence_id)
    : tokenizer_(tokenizer),
      sequence_id_(sequence_id),
      ignore_eog_(params.ignore_eog),
      sampler_(params.sampling, n_vocab),  // validates
      decoder_(tokenizer),
      filter_(std::move(params.stop)) {
    if (params.grammar) {
        matcher_.emplace(std::move(params.grammar));
        allowed_ = grammar::TokenMask(n_vocab);
    }
    for (const int32_t t : prompt) sampler_.accept(t);
}

// The checks in the order generation has always made them.
SequenceOutput::Choice SequenceOutput::choose(std::span<const float> logits) {
    std::span<const uint64_t> allowed;
    if (matcher_) {
        // The grammar is complete and nothing may follow: the answer is whole.
        if (!matcher_->can_continue()) return {-1, StopReason::EndOfGeneration};
        try {
            matcher_->fill_mask(allowed_);
        } catch (const Error& e) {  // the grammar's limits: this sequence ends, the others go on
            log_warning(concat("sequence ", sequence_id_, ": ", e.what()));
            return {-1, StopReason::NoAllowedToken};
        }
        allowed = allowed_.words();
    }
    const int32_t token = sampler_.sample(logits, allowed);
    if (token < 0) return {-1, StopReason::NoAllowedToken};
    if (!ignore_eog_ && tokenizer_.is_eog(token)) return {token, StopReason::EndOfGeneration};
    bool accepted = true;
    if (matcher_) {
        try {
            accepted = matcher_->accept(token);
        } catch (const Error& e) {
            log_warning(concat("sequence ", sequence_id_, ": ", e.what()));
            accepted = false;
        }
    }
    if (!accepted) return {token, StopReason::NoAllowedToken};
    return {token, std::nullopt};
}

std::string SequenceOutput::emit(int32_t token) {
    sampler_.accept(token);
    return filter_.push(decoder_.feed(token));
}

std::string SequenceOutput::finish() {
    std::string text;
    if (!filter_.matched()) text = filter_.push(decoder_.finish());
    return text + filter_.flush();
}

}  // namespace minfer
