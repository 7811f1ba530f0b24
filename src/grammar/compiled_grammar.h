#pragma once
// A grammar made ready for one vocabulary, and the token masks it gives, fast.
//
// The mask of a state is the union, over its stacks, of what each stack's top position allows.
// For a position, the vocabulary's tokens fall into three kinds, found once by walking a trie of
// the vocabulary from that position alone (xgrammar's adaptive token mask cache):
//   accepted   the token's bytes are matched without leaving the position's rule: allowed
//              whatever stack lies below;
//   rejected   no way to match them;
//   uncertain  they can only be matched by leaving the rule, so it depends on the stack below.
// That classification depends only on the structure the position can reach, so grammars of one
// vocabulary share it (the JSON string loop of every schema is classified once per model). Each
// grammar then drops the uncertain tokens whose rest no caller of the rule could take (after JSON
// whitespace, a space followed by "the"), and at run time only the remaining ones are walked,
// from the real stack. Masks of whole states are cached too, since generation inside a string or
// a number repeats the same state.
//
// Bounded: preparing a grammar's masks may take at most kMaxWorkUnits steps, and its automaton
// at most kMaxAutomatonBytes (a UsageError or LimitError names the limit), so no request can
// stall the engine.
//
// Thread-safe: matchers of one compiled grammar may run on different threads (a lock guards the
// automaton and the caches; each call takes it once).

#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/byte_grammar.h"
#include "grammar/grammar.h"
#include "grammar/grammar_vocabulary.h"
#include "grammar/stack_automaton.h"
#include "grammar/token_mask.h"

namespace minfer::grammar {

// Trie nodes visited, uncertain entries written or walked: the work of preparing one grammar.
inline constexpr uint64_t kMaxWorkUnits = uint64_t{1} << 27;

class CompiledGrammar {
  public:
    // Throws UsageError for a grammar the matcher cannot run (byte_grammar.h) or whose masks
    // need more than kMaxWorkUnits to prepare. With `eager`, every position's masks are computed
    // now; without, each when generation first reaches it (tests).
    static std::shared_ptr<CompiledGrammar> compile(
        const Grammar& grammar, std::shared_ptr<const GrammarVocabulary> vocabulary,
        bool eager = true);

    const GrammarVocabulary& vocabulary() const { return *vocabulary_; }
    const ByteGrammar& byte_grammar() const { return byte_grammar_; }

    // Computes the masks of every position a stack can stop at (what a matcher would otherwise
    // compute on first use); returns how many positions there are.
    std::size_t precompute();

    struct Stats {
        std::size_t positions_computed = 0;  // masks computed by walking the vocabulary
        std::size_t positions_shared = 0;    // masks found in the vocabulary's cache
        std::size_t states = 0;
        std::size_t nodes = 0;
    };
    Stats stats() const;

  private:
    friend class GrammarMatcher;
    using StateId = StackAutomaton::StateId;

    CompiledGrammar(ByteGrammar byte_grammar, std::shared_ptr<const GrammarVocabulary> vocabulary);

    // A position's shared classification, and the uncertain entries this grammar keeps of it
    // (indices into masks->uncertain, in the same order).
    struct Position {
        std::shared_ptr<const PositionMasks> masks;
        std::vector<uint32_t> uncertain;
    };

    // All of these expect mutex_ held.
    StateId start_locked();
    void mask_locked(StateId state, TokenMask& mask);
    const Position& position_locked(int32_t position);
    std::shared_ptr<const PositionMasks> walk_vocabulary_locked(int32_t position);
    std::vector<uint32_t> keep_followable_locked(int32_t position, const PositionMasks& masks);
    void check_uncertain_locked(int32_t node, const Position& p, TokenMask& mask);
    void spend(uint64_t units);
    std::string structural_key(int32_t position) const;

    ByteGrammar byte_grammar_;
    std::shared_ptr<const GrammarVocabulary> vocabulary_;
    mutable std::mutex mutex_;
    StackAutomaton automaton_;
    StateId start_ = -1;
    std::vector<Position> positions_;  // by position; masks null until computed
    uint64_t work_ = 0;                // units spent preparing masks
    std::unordered_map<StateId, TokenMask> state_masks_;
    Stats stats_;
    std::vector<StateId> walk_states_;  // scratch of the walks
};

// Where one generation is in the grammar.
class GrammarMatcher {
  public:
    explicit GrammarMatcher(std::shared_ptr<CompiledGrammar> grammar);

    // The tokens that may come next: those whose bytes keep the text inside the grammar, the
    // special tokens the grammar names here, and the end-of-generation tokens once the text is
    // complete. `mask` has at least the vocabulary's size (tokens beyond it are never allowed).
    // Throws LimitError when the grammar's automaton outgrows its limits.
    void fill_mask(TokenMask& mask);
    // Moves past a generated token; false (and no change) when the grammar does not allow it.
    // An end-of-generation token is allowed when the text is complete.
    bool accept(int32_t token);
    // Moves past bytes, as if a token had them (tests, forced text); false if not allowed.
    bool accept_bytes(std::string_view bytes);

    // The text so far is a whole sentence of the grammar (it may also go on).
    bool is_complete() const;
    // Some byte or token may still follow.
    bool can_continue() const;
    void reset();

    const CompiledGrammar& grammar() const { return *grammar_; }

  private:
    std::shared_ptr<CompiledGrammar> grammar_;
    StackAutomaton::StateId state_;
};

}  // namespace minfer::grammar
