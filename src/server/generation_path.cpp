#include "server/generation_path.h"

#include <cmath>
#include <random>

#include "runtime/prompt.h"
#include "server/api_error.h"

namespace minfer::server {
namespace {

// The prompt's tokens, and for a conversation the answers' shape and the grammar its tools ask.
struct PromptAndShape {
    std::vector<int32_t> tokens;
    AnswerShape shape;
    std::optional<grammar::Grammar> tool_grammar;
};

PromptAndShape chat_prompt(const LoadedModel& m, const ChatInput& chat) {
    PromptAndShape out;
    const std::string text = render_chat_input(m, chat);
    out.shape.reasoning = template_writes_reasoning(m.chat_template.source());
    out.shape.starts_in_reasoning = out.shape.reasoning && prompt_opens_reasoning(text);
    if (chat.tool_choice.kind != ToolChoice::Kind::None) {
        const chat::ToolCallFormat format = chat::detect_tool_call_format(m.chat_template.source());
        try {
            out.tool_grammar =
                tool_call_grammar(format, chat.tools, chat.tool_choice, chat.parallel_tool_calls);
        } catch (const UsageError& e) {
            throw ApiError(400, e.what(), "tools");
        }
        out.shape.tool_format = format;
        out.shape.calls_only = chat.tool_choice.kind == ToolChoice::Kind::Required ||
                               chat.tool_choice.kind == ToolChoice::Kind::Named;
        const auto& special = m.grammar_vocabulary()->special_tokens();
        for (const std::string_view marker : chat::tool_call_markers(format)) {
            if (const auto it = special.find(std::string(marker)); it != special.end())
                out.shape.marker_tokens.push_back(it->second);
        }
    }
    out.tokens = tokenize_chat_prompt(m, text);
    return out;
}

std::vector<int32_t> raw_prompt(const LoadedModel& m, const PromptInput& input) {
    if (input.text) return m.tokenizer->tokenize(*input.text, true, true);
    for (const int32_t id : input.tokens) {
        if (id >= m.tokenizer->n_vocab())
            throw ApiError(400,
                           concat("token id ", id, " is out of range: the model has ",
                                  m.tokenizer->n_vocab(), " tokens"),
                           "prompt");
    }
    return input.tokens;
}

void check_logit_bias(const LoadedModel& m, const SamplingParams& sampling) {
    int64_t banned = 0;
    for (const auto& [id, bias] : sampling.logit_bias) {
        if (id >= m.tokenizer->n_vocab())
            throw ApiError(400, concat("logit_bias: token ", id, " is out of range"), "logit_bias");
        if (std::isinf(bias) && bias < 0) ++banned;
    }
    if (banned >= m.tokenizer->n_vocab())
        throw ApiError(400, "logit_bias bans every token: there is nothing to generate",
                       "logit_bias");
}

}  // namespace

std::shared_ptr<grammar::CompiledGrammar> GrammarCache::get(const LoadedModel& m,
                                                            const grammar::Grammar& g) {
    std::string key = g.to_gbnf();
    {
        std::lock_guard lock(mutex_);
        for (auto it = grammars_.begin(); it != grammars_.end(); ++it) {
            if (it->first != key) continue;
            grammars_.splice(grammars_.begin(), grammars_, it);
            return it->second;
        }
    }
    auto compiled = m.compile_grammar(g);
    std::lock_guard lock(mutex_);
    grammars_.emplace_front(std::move(key), compiled);
    if (grammars_.size() > kKept) grammars_.pop_back();
    return compiled;
}

std::string render_chat_input(const LoadedModel& m, const ChatInput& chat) {
    const bool tools_on = chat.tool_choice.kind != ToolChoice::Kind::None;
    try {
        return render_chat_prompt(m, chat.messages,
                                  tools_on ? chat.tools : nlohmann::ordered_json(),
                                  chat.template_kwargs) +
               chat.prefill;
    } catch (const Error& e) {
        throw ApiError(400, concat("the chat template refused the messages: ", e.what()),
                       "messages");
    }
}

PreparedGeneration prepare_generation(const LoadedModel& m, GenerationRequest& request,
                                      int64_t n_ctx, const PathDefaults& defaults,
                                      GrammarCache& grammars) {
    PreparedGeneration out;
    std::optional<grammar::Grammar> constraint = std::move(request.constraint);
    std::string constraint_field = request.constraint_field;
    std::vector<int32_t> prompt;
    if (request.is_chat()) {
        PromptAndShape chat = chat_prompt(m, request.chat());
        prompt = std::move(chat.tokens);
        out.shape = std::move(chat.shape);
        if (chat.tool_grammar) {
            constraint = std::move(chat.tool_grammar);
            constraint_field = "tools";
        }
    } else {
        prompt = raw_prompt(m, std::get<PromptInput>(request.input));
    }
    const char* prompt_field = request.is_chat() ? "messages" : "prompt";
    if (prompt.empty()) throw ApiError(400, "the prompt is empty", prompt_field);
    if (static_cast<int64_t>(prompt.size()) > n_ctx) {
        throw ApiError(400,
                       concat("This model's maximum context length is ", n_ctx,
                              " tokens. However, your prompt has ", prompt.size(), " tokens."),
                       prompt_field, "context_length_exceeded");
    }
    check_logit_bias(m, request.sampling);

    SequenceParams& seq = out.spec.sequence;
    if (constraint) {
        // A prompt that opens a <think> block: the model reasons freely, then answers in form.
        if (out.shape.starts_in_reasoning) constraint = reasoning_then(*constraint, "</think>");
        try {
            seq.grammar = grammars.get(m, *constraint);
        } catch (const Error& e) {
            throw ApiError(400, e.what(), constraint_field);
        }
    }
    if (request.max_tokens < 0) request.max_tokens = defaults.max_tokens;
    if (!request.seed_given && !defaults.seed_fixed)
        request.sampling.seed = std::random_device{}() * 0x9E3779B97F4A7C15ull;
    out.n_prompt = static_cast<int64_t>(prompt.size());
    seq.prompt = std::move(prompt);
    seq.sampling = request.sampling;
    seq.n_predict = request.max_tokens;
    seq.stop = request.stop;
    seq.ignore_eog = request.ignore_eos;
    out.spec.n = request.n;
    out.spec.top_logprobs = request.logprobs;
    return out;
}

}  // namespace minfer::server
