#include "grammar/compiled_grammar.h"

#include <algorithm>

#include "core/error.h"

namespace minfer::grammar {
namespace {

// A position that can reach more elements than this is not shared between grammars: its key
// would cost more than it saves (such positions are in a schema's own large rules, whose masks are
// cheap to compute, while what is worth sharing is small: a string's or a number's loop).
constexpr std::size_t kMaxKeyElements = 1024;
// Whole-state masks kept per grammar (19 KB each for a 152k vocabulary); past this the cache
// starts over.
constexpr std::size_t kMaxStateMasks = 128;
// Accepted tokens are kept as a list below this fraction of the vocabulary.
constexpr std::size_t kSparseDivisor = 32;

}  // namespace

CompiledGrammar::CompiledGrammar(ByteGrammar byte_grammar,
                                 std::shared_ptr<const GrammarVocabulary> vocabulary)
    : byte_grammar_(std::move(byte_grammar)),
      vocabulary_(std::move(vocabulary)),
      automaton_(byte_grammar_),
      positions_(byte_grammar_.elements.size()) {}

std::shared_ptr<CompiledGrammar> CompiledGrammar::compile(
    const Grammar& grammar, std::shared_ptr<const GrammarVocabulary> vocabulary, bool eager) {
    ByteGrammar lowered = lower(grammar, vocabulary->special_tokens());
    std::shared_ptr<CompiledGrammar> g(
        new CompiledGrammar(std::move(lowered), std::move(vocabulary)));
    {
        const std::lock_guard lock(g->mutex_);
        g->start_locked();
    }
    // Up front, so that no step of generation pays for a position it reaches first.
    if (eager) g->precompute();
    return g;
}

CompiledGrammar::StateId CompiledGrammar::start_locked() {
    if (start_ < 0) start_ = automaton_.start();
    return start_;
}

std::size_t CompiledGrammar::precompute() {
    const std::lock_guard lock(mutex_);
    std::size_t n = 0;
    for (std::size_t p = 0; p < byte_grammar_.elements.size(); ++p) {
        if (byte_grammar_.elements[p].kind != ElementKind::Bytes) continue;
        position_locked(static_cast<int32_t>(p));
        ++n;
    }
    return n;
}

void CompiledGrammar::spend(uint64_t units) {
    work_ += units;
    if (work_ > kMaxWorkUnits)
        throw UsageError(concat("grammar: preparing its token masks takes more than ",
                                kMaxWorkUnits,
                                " steps for this vocabulary; long {m,n} "
                                "repetitions of wide character classes cost the most"));
}

CompiledGrammar::Stats CompiledGrammar::stats() const {
    const std::lock_guard lock(mutex_);
    Stats s = stats_;
    s.states = automaton_.n_states();
    s.nodes = automaton_.n_nodes();
    return s;
}

std::string CompiledGrammar::structural_key(int32_t position) const {
    const ByteGrammar& g = byte_grammar_;
    std::string key;
    std::unordered_map<int32_t, int32_t> local;  // rule -> number in order of discovery
    std::unordered_map<int32_t, int32_t> local_sets;
    std::vector<int32_t> queue;
    const auto put32 = [&](int32_t v) { key.append(reinterpret_cast<const char*>(&v), 4); };
    std::size_t elements = 0;
    const auto sequence = [&](int32_t p) {
        for (;; ++p, ++elements) {
            const Element e = g.elements[static_cast<std::size_t>(p)];
            switch (e.kind) {
                case ElementKind::Bytes: {
                    // A set's bytes once, then its number in order of first use.
                    const auto [it, inserted] =
                        local_sets.try_emplace(e.value, static_cast<int32_t>(local_sets.size()));
                    key += inserted ? 'B' : 'b';
                    if (inserted) {
                        key.append(reinterpret_cast<const char*>(
                                       g.byte_sets[static_cast<std::size_t>(e.value)].words.data()),
                                   32);
                    } else {
                        put32(it->second);
                    }
                    break;
                }
                case ElementKind::Token:
                    key += 'T';
                    put32(e.value);
                    break;
                case ElementKind::Rule: {
                    const auto [it, inserted] =
                        local.try_emplace(e.value, static_cast<int32_t>(queue.size()));
                    if (inserted) queue.push_back(e.value);
                    key += 'R';
                    put32(it->second);
                    break;
                }
                case ElementKind::End:
                    key += 'E';
                    return;
            }
        }
    };
    sequence(position);
    for (std::size_t q = 0; q < queue.size(); ++q) {
        key += '|';
        for (const int32_t a : g.alternatives[static_cast<std::size_t>(queue[q])]) {
            sequence(a);
            if (elements > kMaxKeyElements) return {};
        }
    }
    return key;
}

const CompiledGrammar::Position& CompiledGrammar::position_locked(int32_t position) {
    Position& slot = positions_[static_cast<std::size_t>(position)];
    if (slot.masks) return slot;
    const std::string key = structural_key(position);
    std::shared_ptr<const PositionMasks> masks;
    if (!key.empty()) masks = vocabulary_->cached(key);
    if (masks) {
        ++stats_.positions_shared;
    } else {
        masks = walk_vocabulary_locked(position);
        ++stats_.positions_computed;
        if (!key.empty()) vocabulary_->cache(key, masks);
    }
    slot.uncertain = keep_followable_locked(position, *masks);
    slot.masks = std::move(masks);
    return slot;
}

// Sorts every token of the vocabulary into accepted, rejected or uncertain for a stack at
// `position` alone, walking the vocabulary's trie: a prefix is matched once for all the tokens
// that share it, and a prefix nothing can continue decides its whole subtree at once. Where the
// position's frame can end (an escape, after d bytes), every longer token below gets an
// uncertain entry with inside = d: whether the rest fits is the callers' business.
std::shared_ptr<const PositionMasks> CompiledGrammar::walk_vocabulary_locked(int32_t position) {
    const GrammarVocabulary& v = *vocabulary_;
    const auto& trie = v.trie();
    auto masks = std::make_shared<PositionMasks>();
    std::vector<int32_t> accepted;
    // The escapes of the current path: those after at most d bytes are escapes[0, open[d]).
    std::vector<uint32_t> escapes, open{0};
    auto& main = walk_states_;  // main[d]: the frame's state after d bytes
    main.assign(1, automaton_.state_at(position));
    const auto add_uncertain = [&](const GrammarVocabulary::TrieNode& node, std::size_t n_escapes) {
        for (uint32_t r = node.rank_begin; r < node.rank_begin + node.rank_count; ++r) {
            for (std::size_t e = 0; e < n_escapes; ++e) masks->uncertain.push_back({r, escapes[e]});
        }
    };
    uint64_t visited = 0;
    for (std::size_t i = 1; i < trie.size();) {
        const auto& node = trie[i];
        const std::size_t d = node.depth;
        ++visited;
        const StateId parent = main[d - 1];
        const StateId here = automaton_.state(parent).nodes.empty()
                                 ? StackAutomaton::kDead
                                 : automaton_.advance(parent, node.byte);
        escapes.resize(open[d - 1]);
        const auto& s = automaton_.state(here);
        if (s.nodes.empty() && !s.escaped) {
            // Nothing continues: the subtree's tokens are uncertain where an escape came before.
            if (!escapes.empty()) {
                for (std::size_t k = i; k < node.end; ++k) add_uncertain(trie[k], escapes.size());
                visited += node.end - i;
            }
            i = node.end;
            continue;
        }
        for (uint32_t r = node.rank_begin; r < node.rank_begin + node.rank_count; ++r)
            accepted.push_back(v.id_at(r));  // the frame matched all of it (or ended with it)
        if (s.escaped) escapes.push_back(static_cast<uint32_t>(d));
        open.resize(d + 1);
        open[d] = static_cast<uint32_t>(escapes.size());
        main.resize(d + 1);
        main[d] = here;
        ++i;
    }
    spend(visited + masks->uncertain.size());
    // Grouped by the rest's first two bytes (a counting sort: within a group the entries keep
    // their order, runs of one escape sorted by the rest).
    const auto key = [&](const PositionMasks::Uncertain& u) {
        const std::string_view rest = v.bytes_at(u.rank).substr(u.inside);
        return static_cast<uint32_t>(static_cast<uint8_t>(rest[0])) * 257u +
               (rest.size() > 1 ? static_cast<uint8_t>(rest[1]) + 1u : 0u);
    };
    std::vector<std::pair<uint32_t, PositionMasks::Uncertain>> keyed;
    keyed.reserve(masks->uncertain.size());
    for (const auto& u : masks->uncertain) keyed.emplace_back(key(u), u);
    std::stable_sort(keyed.begin(), keyed.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (std::size_t k = 0; k < keyed.size(); ++k) masks->uncertain[k] = keyed[k].second;
    masks->group_of.assign(257, 0);
    uint32_t previous_key = ~0u;
    for (uint32_t k = 0; k < masks->uncertain.size(); ++k) {
        const uint32_t this_key = keyed[k].first;
        if (this_key != previous_key) {
            const uint32_t second = this_key % 257;
            masks->groups.push_back({static_cast<uint16_t>(second == 0 ? 256 : second - 1), k, k});
            previous_key = this_key;
        }
        masks->groups.back().end = k + 1;
    }
    // group_of[b]: the first group whose first byte is b or more.
    std::size_t g = 0;
    for (uint32_t first = 0; first <= 256; ++first) {
        while (g < masks->groups.size() && keyed[masks->groups[g].begin].first / 257 < first) ++g;
        masks->group_of[first] = static_cast<uint32_t>(g);
    }
    if (accepted.size() > static_cast<std::size_t>(v.n_vocab()) / kSparseDivisor) {
        masks->dense = true;
        masks->accepted_bits = TokenMask(v.n_vocab());
        for (const int32_t id : accepted) masks->accepted_bits.set(id);
    } else {
        masks->accepted_ids = std::move(accepted);
    }
    return masks;
}

// The uncertain entries of `masks` whose rest `from` takes, leaving it alive (stacks, or the end
// of the text): all of them (`subset` null) or those listed in `subset` (indices, in order). A
// first byte or a pair `from` refuses skips its group at once; neighbours share the states of
// their common prefix.
template <class Keep>
static void walk_rests(StackAutomaton& a, std::vector<StackAutomaton::StateId>& states,
                       const GrammarVocabulary& v, const PositionMasks& masks,
                       StackAutomaton::StateId from, const std::vector<uint32_t>* subset,
                       uint64_t& steps, Keep&& keep) {
    using StateId = StackAutomaton::StateId;
    if (a.state(from).nodes.empty()) return;
    std::string_view previous;
    std::size_t valid = 0;
    // Walks one entry whose first `known` bytes took `from` to states[0..known].
    const auto walk = [&](uint32_t index, std::size_t known) {
        const auto& u = masks.uncertain[index];
        const std::string_view rest = v.bytes_at(u.rank).substr(u.inside);
        std::size_t d = known;
        const std::size_t limit = std::min({valid, rest.size(), previous.size()});
        while (d < limit && rest[d] == previous[d]) ++d;
        while (d < rest.size() && !a.state(states[d]).nodes.empty()) {
            const StateId next = a.advance(states[d], static_cast<uint8_t>(rest[d]));
            ++d;
            ++steps;
            states.resize(d + 1);
            states[d] = next;
        }
        valid = d;
        previous = rest;
        if (d == rest.size() && a.state(states[d]).alive()) keep(index);
    };
    if (subset == nullptr) {
        for (int b = 0; b < 256; ++b) {
            const uint32_t g0 = masks.group_of[static_cast<std::size_t>(b)];
            const uint32_t g1 = masks.group_of[static_cast<std::size_t>(b) + 1];
            if (g0 == g1) continue;
            const StateId first = a.advance(from, static_cast<uint8_t>(b));
            if (!a.state(first).alive()) continue;
            for (uint32_t g = g0; g < g1; ++g) {
                const PositionMasks::Group& group = masks.groups[g];
                if (group.second == 256) {  // rests of one byte
                    for (uint32_t k = group.begin; k < group.end; ++k) keep(k);
                    continue;
                }
                if (a.state(first).nodes.empty()) continue;
                const StateId second = a.advance(first, static_cast<uint8_t>(group.second));
                if (!a.state(second).alive()) continue;
                states.assign({from, first, second});
                previous = {};
                valid = 2;
                for (uint32_t k = group.begin; k < group.end; ++k) walk(k, 2);
            }
        }
        return;
    }
    int current = -1;
    bool alive = false;
    for (const uint32_t index : *subset) {
        const auto& u = masks.uncertain[index];
        const int b = static_cast<uint8_t>(v.bytes_at(u.rank)[u.inside]);
        if (b != current) {
            current = b;
            const StateId first = a.advance(from, static_cast<uint8_t>(b));
            alive = a.state(first).alive();
            states.assign({from, first});
            previous = {};
            valid = 1;
        }
        if (alive) walk(index, 1);
    }
}

std::vector<uint32_t> CompiledGrammar::keep_followable_locked(int32_t position,
                                                              const PositionMasks& masks) {
    std::vector<uint32_t> kept;
    if (masks.uncertain.empty()) return kept;
    uint64_t steps = 0;
    try {
        walk_rests(automaton_, walk_states_, *vocabulary_, masks,
                   automaton_.follow_state(automaton_.rule_of(position)), nullptr, steps,
                   [&](uint32_t index) { kept.push_back(index); });
    } catch (const LimitError&) {
        // A rule called from thousands of places: its callers together are too many stacks to
        // walk. Keep every entry; the real caller decides at run time.
        kept.resize(masks.uncertain.size());
        for (uint32_t k = 0; k < kept.size(); ++k) kept[k] = k;
    }
    spend(steps);
    return kept;
}

void CompiledGrammar::check_uncertain_locked(int32_t node, const Position& p, TokenMask& mask) {
    uint64_t steps = 0;
    walk_rests(automaton_, walk_states_, *vocabulary_, *p.masks, automaton_.return_state(node),
               &p.uncertain, steps, [&](uint32_t index) {
                   mask.set(vocabulary_->id_at(p.masks->uncertain[index].rank));
               });
}

void CompiledGrammar::mask_locked(StateId state, TokenMask& mask) {
    if (const auto it = state_masks_.find(state); it != state_masks_.end()) {
        mask = it->second;
        return;
    }
    mask.clear();
    // Copied: computing a position's masks may add states and move the automaton's storage.
    const std::vector<int32_t> nodes = automaton_.state(state).nodes;
    const bool accepting = automaton_.state(state).accepting;
    for (const int32_t node : nodes) {
        const int32_t p = automaton_.position_of(node);
        const Element e = byte_grammar_.elements[static_cast<std::size_t>(p)];
        if (e.kind == ElementKind::Token) {
            mask.set(e.value);
            continue;
        }
        const Position& position = position_locked(p);
        position.masks->add_accepted_to(mask);
        if (!position.uncertain.empty()) check_uncertain_locked(node, position, mask);
    }
    if (accepting) {
        for (const int32_t id : vocabulary_->eog_tokens()) mask.set(id);
    }
    if (state_masks_.size() >= kMaxStateMasks) state_masks_.clear();
    state_masks_.emplace(state, mask);
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<CompiledGrammar> grammar)
    : grammar_(std::move(grammar)) {
    reset();
}

void GrammarMatcher::reset() {
    const std::lock_guard lock(grammar_->mutex_);
    state_ = grammar_->start_locked();
}

void GrammarMatcher::fill_mask(TokenMask& mask) {
    const int32_t n = grammar_->vocabulary().n_vocab();
    if (mask.n_vocab() < n)
        throw Error(concat("grammar mask of ", mask.n_vocab(), " tokens for a vocabulary of ", n));
    const std::lock_guard lock(grammar_->mutex_);
    if (mask.n_vocab() == n) return grammar_->mask_locked(state_, mask);
    // A model whose embeddings outnumber its tokenizer's tokens: those rows are never allowed.
    TokenMask own(n);
    grammar_->mask_locked(state_, own);
    mask.copy_from(own);
}

bool GrammarMatcher::accept(int32_t token) {
    const GrammarVocabulary& v = grammar_->vocabulary();
    if (token < 0 || token >= v.n_vocab()) return false;
    const auto& eog = v.eog_tokens();
    if (std::find(eog.begin(), eog.end(), token) != eog.end()) return is_complete();
    const std::string_view bytes = v.bytes_of(token);
    const std::lock_guard lock(grammar_->mutex_);
    StackAutomaton& a = grammar_->automaton_;
    const auto next = bytes.empty() ? a.advance_token(state_, token) : a.advance(state_, bytes);
    if (!a.state(next).alive()) return false;
    state_ = next;
    return true;
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
    const std::lock_guard lock(grammar_->mutex_);
    StackAutomaton& a = grammar_->automaton_;
    const auto next = a.advance(state_, bytes);
    if (!a.state(next).alive()) return false;
    state_ = next;
    return true;
}

bool GrammarMatcher::is_complete() const {
    const std::lock_guard lock(grammar_->mutex_);
    return grammar_->automaton_.state(state_).accepting;
}

bool GrammarMatcher::can_continue() const {
    const std::lock_guard lock(grammar_->mutex_);
    return !grammar_->automaton_.state(state_).nodes.empty();
}

}  // namespace minfer::grammar
