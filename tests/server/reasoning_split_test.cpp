// Reasoning returned apart: the tags split across streamed pieces, a prompt that opens the block,
// templates without reasoning.

#include "server/reasoning_split.h"

#include <gtest/gtest.h>

namespace minfer::server {
namespace {

// Feeds `text` one piece of `size` bytes at a time.
SplitText split(std::string_view text, std::size_t size, bool enabled, bool in_reasoning) {
    ReasoningSplitter s(enabled, in_reasoning);
    SplitText all;
    for (std::size_t i = 0; i < text.size(); i += size) {
        const SplitText part = s.push(text.substr(i, size));
        all.reasoning += part.reasoning;
        all.content += part.content;
    }
    const SplitText rest = s.finish();
    all.reasoning += rest.reasoning;
    all.content += rest.content;
    return all;
}

TEST(ReasoningSplit, TagsSplitAcrossPiecesOfAnySize) {
    for (std::size_t size = 1; size <= 12; ++size) {
        const SplitText t =
            split("\n<think>\nweighing it</think>\n\nThe answer.", size, true, false);
        EXPECT_EQ(t.reasoning, "\nweighing it") << size;
        EXPECT_EQ(t.content, "The answer.") << size;
        const SplitText opened = split("still thinking</think>Done", size, true, true);
        EXPECT_EQ(opened.reasoning, "still thinking") << size;
        EXPECT_EQ(opened.content, "Done") << size;
    }
}

TEST(ReasoningSplit, TextWithoutTagsIsContent) {
    EXPECT_EQ(split("Hello <thinking> world", 3, true, false).content, "Hello <thinking> world");
    EXPECT_EQ(split("<think>a</think>b", 4, false, false).content, "<think>a</think>b");
    // An unclosed block is all reasoning; a partial tag at the end is given back.
    const SplitText open = split("<think>unfinished </thi", 5, true, false);
    EXPECT_EQ(open.reasoning, "unfinished </thi");
    EXPECT_EQ(open.content, "");
    EXPECT_EQ(split("   ", 1, true, false).content, "   ");
}

TEST(ReasoningSplit, DetectsTemplatesAndOpenedPrompts) {
    EXPECT_TRUE(template_writes_reasoning("{{ '<think>' }}...</think>"));
    EXPECT_FALSE(template_writes_reasoning("{{ messages }}"));
    EXPECT_TRUE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n"));
    EXPECT_FALSE(prompt_opens_reasoning("<think>\n\n</think>\n\n"));
}

}  // namespace
}  // namespace minfer::server
