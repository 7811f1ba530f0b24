#pragma once
// The pushdown automaton of a byte grammar, determinized lazily. A stack is a chain of nodes
// (position, parent), interned so that equal stacks are one node: `position` is the next element
// to match in the current rule, `parent` the node to continue at when the rule ends. A state is
// the set of stacks the text so far can be in, each stopped at an element that matches a byte or
// a token, plus two flags: `accepting` (a stack ended the start rule: the text may end here) and
// `escaped` (a stack ended the frame a mask computation started in, see state_at).
//
// Calling a rule as the last element of an alternative reuses the caller's parent (a tail call),
// so a repetition `r ::= x r | ""` runs in constant stack depth and its states repeat: after
// every character of a JSON string the state is the same, and so is its cached mask.
//
// advance() is memoized per (state, byte class): after warming up, matching a byte is one table
// read. States and nodes are never freed while the automaton lives (one per compiled grammar);
// past kMaxAutomatonBytes of states and transitions or kMaxNodes nodes, or with a state of more
// than kMaxStacks stacks (an ambiguous grammar fed adversarial text), it throws LimitError rather
// than grow without end.

#include <cstdint>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/byte_grammar.h"

namespace minfer::grammar {

inline constexpr std::size_t kMaxAutomatonBytes = std::size_t{32} << 20;
inline constexpr std::size_t kMaxNodes = std::size_t{1} << 22;
inline constexpr std::size_t kMaxStacks = 4096;

class StackAutomaton {
  public:
    using StateId = int32_t;
    static constexpr StateId kDead = 0;  // no stack, no flag: nothing can follow

    struct State {
        std::vector<int32_t> nodes;  // sorted; each stopped at a Bytes or Token element
        bool accepting = false;
        bool escaped = false;
        bool alive() const { return !nodes.empty() || accepting || escaped; }
    };

    explicit StackAutomaton(const ByteGrammar& grammar);

    // Before any text: the start rule's alternatives over the bottom of the stack.
    StateId start();
    // A mask computation's start: one stack at `position` whose frame ends in `escaped` instead
    // of continuing in a caller.
    StateId state_at(int32_t position);
    StateId advance(StateId state, uint8_t byte);
    StateId advance(StateId state, std::string_view bytes);
    // Through a Token element matching `token` (special tokens, which have no bytes).
    StateId advance_token(StateId state, int32_t token);
    // Where the stack `node` continues once the rule it is in ends: its caller's state.
    StateId return_state(int32_t node);
    // Where any caller of `rule` may continue once it ends, whatever the stack (an over-
    // approximation: a rule that ends returns to every place that calls it). Bytes this state
    // cannot match never follow the rule.
    StateId follow_state(int32_t rule);
    // The rule whose alternative holds `position`.
    int32_t rule_of(int32_t position) const { return rule_of_[static_cast<std::size_t>(position)]; }

    const State& state(StateId id) const { return states_[static_cast<std::size_t>(id)]; }
    int32_t position_of(int32_t node) const {
        return nodes_[static_cast<std::size_t>(node)].position;
    }
    const ByteGrammar& grammar() const { return g_; }
    std::size_t n_states() const { return states_.size(); }
    std::size_t n_nodes() const { return nodes_.size(); }

  private:
    static constexpr int32_t kBottom = -1;     // below the start rule
    static constexpr int32_t kBoundary = -2;   // below a mask computation's frame
    static constexpr int32_t kAnyCaller = -3;  // below follow_state's frames: every call site

    struct Node {
        int32_t position;
        int32_t parent;
    };

    int32_t intern(int32_t position, int32_t parent);
    // The state of the stacks `seeds` after calling every rule they stop at and returning from
    // every rule they end.
    StateId close(std::span<const int32_t> seeds);
    StateId intern_state(State&& s);

    const ByteGrammar& g_;
    std::vector<Node> nodes_;
    std::unordered_map<uint64_t, int32_t> node_index_;
    std::vector<State> states_;
    std::unordered_map<std::string, StateId> state_index_;
    std::vector<uint8_t> byte_class_;  // byte -> class: bytes in exactly the same byte sets
    int n_classes_ = 0;
    std::vector<StateId> transitions_;  // state * n_classes_ + class; -1 = not computed yet
    std::size_t bytes_ = 0;             // what the states and their transitions take
    std::unordered_map<int32_t, StateId> return_states_;
    std::vector<int32_t> rule_of_;                  // position -> rule
    std::vector<std::vector<int32_t>> call_sites_;  // rule -> positions of Rule elements calling it
    std::vector<StateId> follow_states_;            // rule -> follow_state, -1 until computed
    // Scratch of close().
    std::vector<int32_t> work_, tops_;
    std::vector<uint32_t> seen_;
    uint32_t epoch_ = 0;
};

}  // namespace minfer::grammar
