#include "grammar/stack_automaton.h"

#include <algorithm>
#include <map>

#include "core/error.h"

namespace minfer::grammar {

StackAutomaton::StackAutomaton(const ByteGrammar& grammar) : g_(grammar) {
    // Bytes that every byte set either holds together or leaves together behave alike.
    std::vector<std::vector<int32_t>> membership(256);
    for (std::size_t k = 0; k < g_.byte_sets.size(); ++k) {
        for (int b = 0; b < 256; ++b) {
            if (g_.byte_sets[k].test(static_cast<uint8_t>(b)))
                membership[static_cast<std::size_t>(b)].push_back(static_cast<int32_t>(k));
        }
    }
    std::map<std::vector<int32_t>, uint8_t> classes;
    byte_class_.resize(256);
    for (int b = 0; b < 256; ++b) {
        const auto [it, inserted] = classes.try_emplace(membership[static_cast<std::size_t>(b)],
                                                        static_cast<uint8_t>(classes.size()));
        byte_class_[static_cast<std::size_t>(b)] = it->second;
    }
    n_classes_ = static_cast<int>(classes.size());
    rule_of_.assign(g_.elements.size(), -1);
    call_sites_.resize(g_.n_rules());
    follow_states_.assign(g_.n_rules(), -1);
    for (std::size_t r = 0; r < g_.n_rules(); ++r) {
        for (const int32_t a : g_.alternatives[r]) {
            for (auto p = static_cast<std::size_t>(a);; ++p) {
                rule_of_[p] = static_cast<int32_t>(r);
                const Element e = g_.elements[p];
                if (e.kind == ElementKind::Rule)
                    call_sites_[static_cast<std::size_t>(e.value)].push_back(
                        static_cast<int32_t>(p));
                if (e.kind == ElementKind::End) break;
            }
        }
    }
    intern_state(State{});  // kDead
}

int32_t StackAutomaton::intern(int32_t position, int32_t parent) {
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(position)) << 32) |
                         static_cast<uint32_t>(parent);
    if (const auto it = node_index_.find(key); it != node_index_.end()) return it->second;
    if (nodes_.size() >= kMaxNodes)
        throw LimitError(concat("grammar: more than ", kMaxNodes, " stack frames"));
    nodes_.push_back({position, parent});
    node_index_.emplace(key, static_cast<int32_t>(nodes_.size() - 1));
    return static_cast<int32_t>(nodes_.size() - 1);
}

StackAutomaton::StateId StackAutomaton::intern_state(State&& s) {
    std::string key(reinterpret_cast<const char*>(s.nodes.data()),
                    s.nodes.size() * sizeof(int32_t));
    key += static_cast<char>((s.accepting ? 1 : 0) | (s.escaped ? 2 : 0));
    if (const auto it = state_index_.find(key); it != state_index_.end()) return it->second;
    // Each state costs its transitions (a StateId per byte class) and its stacks.
    bytes_ += static_cast<std::size_t>(n_classes_) * sizeof(StateId) + sizeof(State) +
              s.nodes.size() * sizeof(int32_t) + key.size() * 2;
    if (bytes_ > kMaxAutomatonBytes)
        throw LimitError(concat("grammar: its automaton outgrew ", kMaxAutomatonBytes >> 20,
                                " MiB (", states_.size(), " states)"));
    states_.push_back(std::move(s));
    transitions_.resize(states_.size() * static_cast<std::size_t>(n_classes_), -1);
    const auto id = static_cast<StateId>(states_.size() - 1);
    state_index_.emplace(std::move(key), id);
    return id;
}

StackAutomaton::StateId StackAutomaton::close(std::span<const int32_t> seeds) {
    if (++epoch_ == 0) {  // wrapped: forget every mark
        std::fill(seen_.begin(), seen_.end(), 0);
        epoch_ = 1;
    }
    work_.assign(seeds.begin(), seeds.end());
    tops_.clear();
    State out;
    while (!work_.empty()) {
        const int32_t n = work_.back();
        work_.pop_back();
        if (seen_.size() <= static_cast<std::size_t>(n)) seen_.resize(nodes_.size() * 2 + 64, 0);
        if (seen_[static_cast<std::size_t>(n)] == epoch_) continue;
        seen_[static_cast<std::size_t>(n)] = epoch_;
        const Node node = nodes_[static_cast<std::size_t>(n)];
        const Element e = g_.elements[static_cast<std::size_t>(node.position)];
        switch (e.kind) {
            case ElementKind::Bytes:
            case ElementKind::Token:
                tops_.push_back(n);
                break;
            case ElementKind::End:
                if (node.parent == kBottom) {
                    out.accepting = true;
                } else if (node.parent == kBoundary) {
                    out.escaped = true;
                } else if (node.parent == kAnyCaller) {
                    if (e.value == g_.root) out.accepting = true;
                    for (const int32_t site : call_sites_[static_cast<std::size_t>(e.value)])
                        work_.push_back(intern(site + 1, kAnyCaller));
                } else {
                    work_.push_back(node.parent);
                }
                break;
            case ElementKind::Rule: {
                const int32_t next = node.position + 1;
                const bool tail =
                    g_.elements[static_cast<std::size_t>(next)].kind == ElementKind::End;
                const int32_t ret = tail ? node.parent : intern(next, node.parent);
                for (const int32_t a : g_.alternatives[static_cast<std::size_t>(e.value)])
                    work_.push_back(intern(a, ret));
                break;
            }
        }
    }
    if (tops_.size() > kMaxStacks)
        throw LimitError(concat("grammar: the text can be read in more than ", kMaxStacks,
                                " ways at once (an ambiguous grammar)"));
    std::sort(tops_.begin(), tops_.end());
    out.nodes = tops_;
    return intern_state(std::move(out));
}

StackAutomaton::StateId StackAutomaton::start() {
    std::vector<int32_t> seeds;
    for (const int32_t a : g_.alternatives[static_cast<std::size_t>(g_.root)])
        seeds.push_back(intern(a, kBottom));
    return close(seeds);
}

StackAutomaton::StateId StackAutomaton::state_at(int32_t position) {
    const int32_t seed = intern(position, kBoundary);
    return close(std::span(&seed, 1));
}

StackAutomaton::StateId StackAutomaton::advance(StateId state, uint8_t byte) {
    const std::size_t slot =
        static_cast<std::size_t>(state) * static_cast<std::size_t>(n_classes_) + byte_class_[byte];
    if (transitions_[slot] >= 0) return transitions_[slot];
    std::vector<int32_t> seeds;
    for (const int32_t n : states_[static_cast<std::size_t>(state)].nodes) {
        const Node node = nodes_[static_cast<std::size_t>(n)];
        const Element e = g_.elements[static_cast<std::size_t>(node.position)];
        if (e.kind == ElementKind::Bytes &&
            g_.byte_sets[static_cast<std::size_t>(e.value)].test(byte))
            seeds.push_back(intern(node.position + 1, node.parent));
    }
    const StateId next = seeds.empty() ? kDead : close(seeds);
    transitions_[slot] = next;
    return next;
}

StackAutomaton::StateId StackAutomaton::advance(StateId state, std::string_view bytes) {
    for (const char c : bytes) {
        if (state == kDead) break;
        state = advance(state, static_cast<uint8_t>(c));
    }
    return state;
}

StackAutomaton::StateId StackAutomaton::return_state(int32_t node) {
    if (const auto it = return_states_.find(node); it != return_states_.end()) return it->second;
    const int32_t parent = nodes_[static_cast<std::size_t>(node)].parent;
    StateId s = kDead;
    if (parent >= 0) {
        s = close(std::span(&parent, 1));
    } else if (parent == kBottom) {
        State done;
        done.accepting = true;
        s = intern_state(std::move(done));
    }
    return_states_.emplace(node, s);
    return s;
}

StackAutomaton::StateId StackAutomaton::follow_state(int32_t rule) {
    StateId& s = follow_states_[static_cast<std::size_t>(rule)];
    if (s >= 0) return s;
    std::vector<int32_t> seeds;
    for (const int32_t site : call_sites_[static_cast<std::size_t>(rule)])
        seeds.push_back(intern(site + 1, kAnyCaller));
    StateId out = kDead;
    if (!seeds.empty()) out = close(seeds);
    follow_states_[static_cast<std::size_t>(rule)] = out;
    return out;
}

StackAutomaton::StateId StackAutomaton::advance_token(StateId state, int32_t token) {
    std::vector<int32_t> seeds;
    for (const int32_t n : states_[static_cast<std::size_t>(state)].nodes) {
        const Node node = nodes_[static_cast<std::size_t>(n)];
        const Element e = g_.elements[static_cast<std::size_t>(node.position)];
        if (e.kind == ElementKind::Token && e.value == token)
            seeds.push_back(intern(node.position + 1, node.parent));
    }
    return seeds.empty() ? kDead : close(seeds);
}

}  // namespace minfer::grammar
