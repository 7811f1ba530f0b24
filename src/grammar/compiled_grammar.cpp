#include "grammar/compiled_grammar.h"

#include <algorithm>

#include "core/error.h"

namespace minfer::grammar {
namespace {

// A position that can reach more elements than this is not shared between grammars: its key
// would cost more than it saves (such positions are in a schema's own large rules, whose masks are
// cheap to compute, while what is worth sharing is small: a string's or a number's loop).
constexpr std::size_t kMaxKeyElements = 1024;
// Whole-state masks kept per grammar; past this the cache starts over.
constexpr std::size_t kMaxStateMasks = 512;
// Accepted tokens are kept as a list below this fraction of the vocabulary.
constexpr std::size_t kSparseDivisor = 32;

}  // namespace

CompiledGrammar::CompiledGrammar(ByteGrammar byte_grammar,
                                 std::shared_ptr<const GrammarVocabulary> vocabulary)
    : byte_grammar_(std::move(byte_grammar)),
      vocabulary_(std::move(vocabulary)),
      automaton_(byte_grammar_),
      position_masks_(byte_grammar_.elements.size()) {}

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
    if (eager && g->byte_grammar_.elements.size() <= kMaxEagerPositions) g->precompute();
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
        position_masks_locked(static_cast<int32_t>(p));
        ++n;
    }
    return n;
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

std::shared_ptr<const PositionMasks> CompiledGrammar::position_masks_locked(int32_t position) {
    auto& slot = position_masks_[static_cast<std::size_t>(position)];
    if (slot) return slot;
    const std::string key = structural_key(position);
    if (!key.empty()) slot = vocabulary_->cached(key);
    if (slot) {
        ++stats_.positions_shared;
        return slot;
    }
    slot = walk_vocabulary_locked(position);
    ++stats_.positions_computed;
    if (!key.empty()) vocabulary_->cache(key, slot);
    return slot;
}

// Sorts every token of the vocabulary into accepted, rejected or uncertain for a stack at
// `position` alone, walking the vocabulary's trie: a prefix is matched once for all the tokens
// that share it, and a prefix nothing can continue skips its whole subtree.
//
// Where the position's frame can end inside a token (an escape), the rest of the token would be
// matched by the rule's caller. Rather than keep every such token uncertain, a follower walks the
// rest from the state of *any* caller (follow_state): a rest no caller can take makes the token
// rejected here, whatever the stack. The trie walk carries the main state and the followers
// started on the path, and skips a subtree once all of them are dead.
std::shared_ptr<const PositionMasks> CompiledGrammar::walk_vocabulary_locked(int32_t position) {
    const GrammarVocabulary& v = *vocabulary_;
    const auto& trie = v.trie();
    auto masks = std::make_shared<PositionMasks>();
    std::vector<int32_t> accepted;
    const StateId follow = automaton_.follow_state(automaton_.rule_of(position));
    struct Follower {
        uint32_t inside;  // bytes matched inside the frame before it ended
        StateId state;    // after the rest so far, from follow_state
    };
    // The followers of the current path: those after d bytes are followers[begin[d], end[d]).
    std::vector<Follower> followers;
    std::vector<std::size_t> begin{0}, end{0};
    auto& main = walk_states_;  // main[d]: the frame's state after d bytes
    main.assign(1, automaton_.state_at(position));
    for (std::size_t i = 1; i < trie.size();) {
        const auto& node = trie[i];
        const std::size_t d = node.depth;
        const StateId parent_main = main[d - 1];
        const StateId here = automaton_.state(parent_main).nodes.empty()
                                 ? StackAutomaton::kDead
                                 : automaton_.advance(parent_main, node.byte);
        // The parent's followers, advanced by this byte.
        followers.resize(end[d - 1]);
        begin.resize(d + 1);
        end.resize(d + 1);
        begin[d] = followers.size();
        for (std::size_t f = begin[d - 1]; f < end[d - 1]; ++f) {
            const Follower parent = followers[f];
            if (automaton_.state(parent.state).nodes.empty()) continue;
            const StateId next = automaton_.advance(parent.state, node.byte);
            if (automaton_.state(next).alive()) followers.push_back({parent.inside, next});
        }
        const auto& s = automaton_.state(here);
        for (uint32_t r = node.rank_begin; r < node.rank_begin + node.rank_count; ++r) {
            if (s.alive()) {
                accepted.push_back(v.id_at(r));
                continue;
            }
            for (std::size_t f = begin[d]; f < followers.size(); ++f)
                masks->uncertain.push_back({r, followers[f].inside});
        }
        // The frame may end here: the rest of longer tokens goes to a caller.
        if (s.escaped && !automaton_.state(follow).nodes.empty())
            followers.push_back({static_cast<uint32_t>(d), follow});
        end[d] = followers.size();
        bool continues = !s.nodes.empty();
        for (std::size_t f = begin[d]; f < end[d] && !continues; ++f)
            continues = !automaton_.state(followers[f].state).nodes.empty();
        if (!continues) {
            i = node.end;
            continue;
        }
        main.resize(d + 1);
        main[d] = here;
        ++i;
    }
    const auto rest = [&](const PositionMasks::Uncertain& u) {
        return v.bytes_at(u.rank).substr(u.inside);
    };
    std::sort(masks->uncertain.begin(), masks->uncertain.end(),
              [&](const auto& a, const auto& b) { return rest(a) < rest(b); });
    masks->bucket.assign(257, 0);
    std::size_t k = 0;
    for (int b = 0; b < 256; ++b) {
        masks->bucket[static_cast<std::size_t>(b)] = static_cast<uint32_t>(k);
        while (k < masks->uncertain.size() &&
               static_cast<uint8_t>(rest(masks->uncertain[k])[0]) == b)
            ++k;
    }
    masks->bucket[256] = static_cast<uint32_t>(k);
    if (accepted.size() > static_cast<std::size_t>(v.n_vocab()) / kSparseDivisor) {
        masks->dense = true;
        masks->accepted_bits = TokenMask(v.n_vocab());
        for (const int32_t id : accepted) masks->accepted_bits.set(id);
    } else {
        masks->accepted_ids = std::move(accepted);
    }
    return masks;
}

// The uncertain tokens of a stack's top: the rest of each, after the bytes its rule matches,
// walked from the state of the rule's caller. Buckets whose first byte the caller refuses are
// skipped whole; within a bucket, neighbours share the states of their common prefix.
void CompiledGrammar::check_uncertain_locked(int32_t node, const PositionMasks& masks,
                                             TokenMask& mask) {
    const GrammarVocabulary& v = *vocabulary_;
    const StateId caller = automaton_.return_state(node);
    if (automaton_.state(caller).nodes.empty()) return;
    auto& states = walk_states_;
    for (int b = 0; b < 256; ++b) {
        const uint32_t begin = masks.bucket[static_cast<std::size_t>(b)];
        const uint32_t end = masks.bucket[static_cast<std::size_t>(b) + 1];
        if (begin == end) continue;
        const StateId first = automaton_.advance(caller, static_cast<uint8_t>(b));
        if (!automaton_.state(first).alive()) continue;
        states.assign({caller, first});
        std::string_view previous;
        std::size_t valid = 1;
        for (uint32_t k = begin; k < end; ++k) {
            const auto& u = masks.uncertain[k];
            const int32_t id = v.id_at(u.rank);
            if (mask.test(id)) continue;
            const std::string_view rest = v.bytes_at(u.rank).substr(u.inside);
            std::size_t d = 1;
            const std::size_t limit = std::min({valid, rest.size(), previous.size()});
            while (d < limit && rest[d] == previous[d]) ++d;
            while (d < rest.size() && !automaton_.state(states[d]).nodes.empty()) {
                const StateId next = automaton_.advance(states[d], static_cast<uint8_t>(rest[d]));
                ++d;
                states.resize(d + 1);
                states[d] = next;
            }
            valid = d;
            previous = rest;
            if (d == rest.size() && automaton_.state(states[d]).alive()) mask.set(id);
        }
    }
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
        const auto masks = position_masks_locked(p);
        masks->add_accepted_to(mask);
        if (!masks->uncertain.empty()) check_uncertain_locked(node, *masks, mask);
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
    if (mask.n_vocab() != grammar_->vocabulary().n_vocab())
        throw Error(concat("grammar mask of ", mask.n_vocab(), " tokens for a vocabulary of ",
                           grammar_->vocabulary().n_vocab()));
    const std::lock_guard lock(grammar_->mutex_);
    grammar_->mask_locked(state_, mask);
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
