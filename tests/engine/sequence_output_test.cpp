// SequenceOutput (engine/sequence_output.h): the choice of a token from one row of logits, and
// the text handed out for the chosen tokens, apart from the engine's scheduling. On stories260K's
// vocabulary (SentencePiece, 512 tokens, EOS 2).

#include <gtest/gtest.h>

#include <vector>

#include "common/fixtures.h"
#include "core/error.h"
#include "engine/sequence_output.h"
#include "gguf/gguf_file.h"
#include "grammar/compiled_grammar.h"
#include "grammar/grammar.h"
#include "grammar/grammar_vocabulary.h"

namespace minfer {
namespace {

class SequenceOutputTest : public ::testing::Test {
  protected:
    void SetUp() override {
        MINFER_REQUIRE_FIXTURE(path, "models/stories260K.gguf");
        tokenizer_.emplace(Tokenizer::from_gguf(GgufFile::open(path).metadata()));
    }

    OutputParams greedy() const {
        OutputParams p;
        p.sampling.temperature = 0.0f;
        return p;
    }
    int32_t n_vocab() const { return tokenizer_->n_vocab(); }
    // The one token of a word, with the space SentencePiece puts before it ("Once" -> " Once").
    int32_t token_of(std::string_view word) const {
        const std::vector<int32_t> ids = tokenizer_->tokenize(word, false, false);
        EXPECT_EQ(ids.size(), 1u) << word;
        return ids.front();
    }
    // Logits whose largest entry is `token`.
    std::vector<float> peak_at(int32_t token) const {
        std::vector<float> logits(static_cast<std::size_t>(n_vocab()), 0.0f);
        logits[static_cast<std::size_t>(token)] = 10.0f;
        return logits;
    }

    std::optional<Tokenizer> tokenizer_;
};

TEST_F(SequenceOutputTest, ChoosesTheGreedyTokenAndHandsOutItsText) {
    SequenceOutput out(greedy(), {}, *tokenizer_, n_vocab(), 1);
    const int32_t once = token_of("Once");
    const SequenceOutput::Choice c = out.choose(peak_at(once));
    EXPECT_EQ(c.token, once);
    EXPECT_FALSE(c.stop);
    EXPECT_EQ(out.emit(once), " Once");
    EXPECT_FALSE(out.stop_string_seen());
    EXPECT_EQ(out.finish(), "");
}

TEST_F(SequenceOutputTest, EndOfGenerationStopsUnlessIgnored) {
    const int32_t eos = tokenizer_->eos().value();
    SequenceOutput out(greedy(), {}, *tokenizer_, n_vocab(), 1);
    const SequenceOutput::Choice c = out.choose(peak_at(eos));
    EXPECT_EQ(c.token, eos);  // chosen (the engine counts it), then the stop
    EXPECT_EQ(c.stop, StopReason::EndOfGeneration);

    OutputParams ignore = greedy();
    ignore.ignore_eog = true;
    SequenceOutput bench(ignore, {}, *tokenizer_, n_vocab(), 2);
    const SequenceOutput::Choice b = bench.choose(peak_at(eos));
    EXPECT_EQ(b.token, eos);
    EXPECT_FALSE(b.stop);
}

TEST_F(SequenceOutputTest, HoldsBackWhatMayStartAStopStringAndCutsBeforeIt) {
    OutputParams p = greedy();
    p.stop = {" upon a"};
    SequenceOutput out(p, {}, *tokenizer_, n_vocab(), 1);
    std::string shown = out.emit(token_of("Once"));
    shown += out.emit(token_of("upon"));  // may begin " upon a": held back
    EXPECT_EQ(shown, " Once");
    EXPECT_FALSE(out.stop_string_seen());
    shown += out.emit(token_of("a"));
    EXPECT_TRUE(out.stop_string_seen());
    EXPECT_EQ(shown, " Once");
    EXPECT_EQ(out.finish(), "");  // nothing after a stop string

    SequenceOutput other(p, {}, *tokenizer_, n_vocab(), 2);
    EXPECT_EQ(other.emit(token_of("upon")), "");
    EXPECT_EQ(other.finish(), " upon");  // no stop came: the held-back text at the end
}

// Several stop strings: the earliest in the text ends it, and is the one named (Anthropic's
// stop_sequence), whatever its place in the list.
TEST_F(SequenceOutputTest, NamesTheStopStringThatEndedIt) {
    OutputParams p = greedy();
    p.stop = {" a", "upon"};
    SequenceOutput out(p, {}, *tokenizer_, n_vocab(), 1);
    EXPECT_EQ(out.stop_string(), "");
    std::string shown = out.emit(token_of("Once"));
    shown += out.emit(token_of("upon"));
    EXPECT_TRUE(out.stop_string_seen());
    EXPECT_EQ(out.stop_string(), "upon");
    EXPECT_EQ(shown, " Once ");
}

TEST_F(SequenceOutputTest, TheGrammarMasksTheChoiceAndEndsAWholeAnswer) {
    OutputParams p = greedy();
    const auto vocabulary = std::make_shared<const grammar::GrammarVocabulary>(*tokenizer_);
    p.grammar =
        grammar::CompiledGrammar::compile(grammar::parse_gbnf("root ::= \" Once\""), vocabulary);
    SequenceOutput out(p, {}, *tokenizer_, n_vocab(), 1);
    const int32_t once = token_of("Once");
    // The logits favour " upon"; the grammar allows only what spells " Once".
    std::vector<float> logits = peak_at(token_of("upon"));
    logits[static_cast<std::size_t>(once)] = 5.0f;
    const SequenceOutput::Choice c = out.choose(logits);
    ASSERT_FALSE(c.stop);
    EXPECT_EQ(c.token, once);
    out.emit(c.token);
    const SequenceOutput::Choice end = out.choose(peak_at(once));
    EXPECT_EQ(end.token, -1);
    EXPECT_EQ(end.stop, StopReason::EndOfGeneration);  // complete, nothing may follow
}

TEST_F(SequenceOutputTest, RefusesBadSamplingParameters) {
    OutputParams p;
    p.sampling.temperature = -1.0f;
    EXPECT_THROW(SequenceOutput(p, {}, *tokenizer_, n_vocab(), 1), UsageError);
}

}  // namespace
}  // namespace minfer
