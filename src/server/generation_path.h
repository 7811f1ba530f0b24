#pragma once
// The one path from a GenerationRequest (any API) to the engine's work: the chat template
// rendered (with the tools), the prompt tokenized and checked against the context, the grammar
// of the answer's form (tool calls, response_format, after a reasoning block the prompt opened)
// compiled once per text and kept, the server's defaults applied, the seed drawn. What comes out
// is the JobSpec for the GenerationService and the AnswerShape for the front end's writer.

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "runtime/loaded_model.h"
#include "server/answer_stream.h"
#include "server/generation_request.h"
#include "server/generation_service.h"

namespace minfer::server {

// Grammars compiled for recent requests, by their text: a schema sent again is not compiled
// again (most recently used first; each may hold up to about 35 MB, see
// grammar/stack_automaton.h). Shared by the request threads.
class GrammarCache {
  public:
    std::shared_ptr<grammar::CompiledGrammar> get(const LoadedModel& m, const grammar::Grammar& g);

  private:
    static constexpr std::size_t kKept = 8;
    std::mutex mutex_;
    std::list<std::pair<std::string, std::shared_ptr<grammar::CompiledGrammar>>> grammars_;
};

// What the server adds to every request.
struct PathDefaults {
    int64_t max_tokens = -1;  // --n-predict
    bool seed_fixed = false;  // --seed given: a request without a seed uses it
};

struct PreparedGeneration {
    JobSpec spec;
    AnswerShape shape;
    int64_t n_prompt = 0;
};

// Throws ApiError (400, naming the field) for what the model refuses: messages its template
// refuses, a prompt longer than `n_ctx`, token ids or logit_bias beyond the vocabulary, a grammar
// that cannot be compiled. Fills the request's defaults (max_tokens, the seed) in place.
PreparedGeneration prepare_generation(const LoadedModel& m, GenerationRequest& request,
                                      int64_t n_ctx, const PathDefaults& defaults,
                                      GrammarCache& grammars);

// The text the chat template makes of a conversation (generation prompt added); ApiError 400 on
// "messages" when the template refuses it.
std::string render_chat_input(const LoadedModel& m, const ChatInput& chat);

}  // namespace minfer::server
