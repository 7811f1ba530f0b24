#pragma once
// Graph algorithms over a grammar's rules, in time linear in its size and without recursion (a
// chain of 150,000 rules must not overflow the stack): strongly connected components, and which
// rules hold a property that an alternative has when each of its elements has it (a rule that
// can match nothing, a rule that can finish).

#include <cstdint>
#include <deque>
#include <vector>

namespace minfer::grammar {

// Tarjan's strongly connected components of a graph given by adjacency lists: the component of
// each vertex, numbered so that a component comes after every component it has edges to.
std::vector<int32_t> strongly_connected(const std::vector<std::vector<int32_t>>& edges);

// The least fixpoint of "a rule holds when one of its alternatives holds; an alternative holds
// when each element does: a call when the called rule holds, another element when base(e)".
// `rules[r].alternatives` is a list of element sequences; an element has `kind` and `value`
// (the rule called when kind == call_kind).
template <class Rules, class Base, class Kind>
std::vector<bool> rules_that_hold(const Rules& rules, Kind call_kind, Base&& base) {
    const std::size_t n = rules.size();
    std::vector<bool> holds(n, false);
    struct Alternative {
        std::size_t rule;
        std::size_t missing;  // calls whose rule is not known to hold (more: never holds)
    };
    std::vector<Alternative> alternatives;
    std::vector<std::vector<std::size_t>> waiting(n);  // rule -> alternatives calling it
    std::deque<std::size_t> work;
    for (std::size_t r = 0; r < n; ++r) {
        for (const auto& sequence : rules[r].alternatives) {
            const std::size_t id = alternatives.size();
            std::size_t missing = 0;
            bool never = false;
            for (const auto& e : sequence) {
                if (e.kind == call_kind) {
                    ++missing;
                    waiting[static_cast<std::size_t>(e.value)].push_back(id);
                } else if (!base(e)) {
                    never = true;
                }
            }
            alternatives.push_back({r, never ? missing + 1 : missing});
            if (!never && missing == 0 && !holds[r]) {
                holds[r] = true;
                work.push_back(r);
            }
        }
    }
    while (!work.empty()) {
        const std::size_t s = work.front();
        work.pop_front();
        for (const std::size_t id : waiting[s]) {
            if (--alternatives[id].missing != 0) continue;
            const std::size_t r = alternatives[id].rule;
            if (holds[r]) continue;
            holds[r] = true;
            work.push_back(r);
        }
    }
    return holds;
}

}  // namespace minfer::grammar
