// `minfer tokenize` and `minfer detokenize` end to end.

#include <gtest/gtest.h>

#include <fstream>

#include "common/fixtures.h"

namespace minfer::test {
namespace {

TEST(TokenizeCommand, IdsAsJsonArrayWithBosAndSpecialText) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-qwen2-f16.gguf");
    const CommandResult r = run_minfer(
        {"tokenize", "--ids", model.string(), "<|im_start|>user\nHello, who are you?<|im_end|>\n"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "[8193, 7220, 198, 39, 695, 78, 11, 508, 389, 345, 30, 8194, 198]\n");

    const CommandResult plain =
        run_minfer({"tokenize", "--ids", "--no-parse-special", model.string(), "<|im_end|>"});
    EXPECT_EQ(plain.exit_code, 0) << plain.err;
    EXPECT_EQ(plain.out.find("8194"), std::string::npos);
}

TEST(TokenizeCommand, OneTokenPerLineWithVisibleWhitespace) {
    MINFER_REQUIRE_FIXTURE(model, "models/stories260K.gguf");
    const CommandResult r = run_minfer({"tokenize", model.string(), "Once upon a time"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out,
              "     1 -> '<s>'\n   403 -> ' Once'\n   407 -> ' upon'\n   261 -> ' a'\n"
              "   378 -> ' time'\n");
    const CommandResult no_bos =
        run_minfer({"tokenize", "--ids", "--no-bos", model.string(), "Once"});
    EXPECT_EQ(no_bos.out, "[403]\n");
    const CommandResult nl = run_minfer({"tokenize", "--no-bos", model.string(), "a\tb\n"});
    EXPECT_NE(nl.out.find("\\n"), std::string::npos) << nl.out;
}

TEST(TokenizeCommand, ReadsAFile) {
    MINFER_REQUIRE_FIXTURE(model, "models/stories260K.gguf");
    TempDir dir;
    std::ofstream(dir / "prompt.txt", std::ios::binary) << "Once upon a time";
    const CommandResult r =
        run_minfer({"tokenize", "--ids", model.string(), "-f", (dir / "prompt.txt").string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "[1, 403, 407, 261, 378]\n");
    const CommandResult missing =
        run_minfer({"tokenize", model.string(), "-f", (dir / "nope.txt").string()});
    EXPECT_EQ(missing.exit_code, 1);
    EXPECT_NE(missing.err.find("nope.txt"), std::string::npos);
}

TEST(TokenizeCommand, Errors) {
    MINFER_REQUIRE_FIXTURE(model, "models/stories260K.gguf");
    const CommandResult no_text = run_minfer({"tokenize", model.string()});
    EXPECT_EQ(no_text.exit_code, 2);
    EXPECT_NE(no_text.err.find("minfer: error:"), std::string::npos);
    const CommandResult no_model = run_minfer({"tokenize", "/nonexistent.gguf", "x"});
    EXPECT_NE(no_model.exit_code, 0);
}

TEST(DetokenizeCommand, IdsBackToText) {
    MINFER_REQUIRE_FIXTURE(model, "models/stories260K.gguf");
    const CommandResult r = run_minfer({"detokenize", model.string(), "403,407,261,378"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "Once upon a time\n");
    const CommandResult spaced = run_minfer({"detokenize", model.string(), "1", "403"});
    EXPECT_EQ(spaced.out, "<s> Once\n");
    const CommandResult hidden =
        run_minfer({"detokenize", "--hide-special", model.string(), "1,403"});
    EXPECT_EQ(hidden.out, " Once\n");
}

TEST(DetokenizeCommand, BadIdsAreOneLineErrors) {
    MINFER_REQUIRE_FIXTURE(model, "models/stories260K.gguf");
    const CommandResult range = run_minfer({"detokenize", model.string(), "1,512"});
    EXPECT_EQ(range.exit_code, 2);
    EXPECT_EQ(range.err,
              "minfer: error: ids: token id 512 is out of range: the model has 512 tokens\n");
    const CommandResult junk = run_minfer({"detokenize", model.string(), "1,x2"});
    EXPECT_EQ(junk.exit_code, 2);
    EXPECT_NE(junk.err.find("'x2' is not a token id"), std::string::npos);
    const CommandResult huge = run_minfer({"detokenize", model.string(), "99999999999"});
    EXPECT_EQ(huge.exit_code, 2);
}

}  // namespace
}  // namespace minfer::test
