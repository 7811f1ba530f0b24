#pragma once
// Models whose templates write their reasoning between <think> and </think> (Qwen3, DeepSeek-R1)
// get it returned apart, as `reasoning_content` next to `content`. Text arrives in streamed
// pieces, so a tag may be split across them: what might begin a tag is held back until it is
// clear.

#include <string>
#include <string_view>

namespace minfer::server {

struct SplitText {
    std::string reasoning;
    std::string content;
};

class ReasoningSplitter {
  public:
    // enabled: the template writes <think> blocks. in_reasoning: the prompt already opened one
    // (it ends with "<think>"), so the answer starts inside it.
    ReasoningSplitter(bool enabled, bool in_reasoning);

    SplitText push(std::string_view text);
    SplitText finish();  // what was held back

  private:
    enum class State { Start, Reasoning, AfterReasoning, Content };
    void route(std::string_view text, SplitText& out) const;

    bool enabled_;
    State state_;
    std::string held_;
};

// True when the template (its source) writes reasoning blocks, and when a rendered prompt ends
// inside one.
bool template_writes_reasoning(std::string_view template_source);
bool prompt_opens_reasoning(std::string_view prompt);

}  // namespace minfer::server
