#include "grammar/compiled_grammar.h"

#include <algorithm>

#include "core/error.h"

namespace minfer::grammar {
namespace {

// A position whose reachable structure serializes to more than this is not shared between
// grammars (its key would cost more than it saves).
constexpr std::size_t kMaxKeyBytes = 256 << 10;
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
    const Grammar& grammar, std::shared_ptr<const GrammarVocabulary> vocabulary) {
    ByteGrammar lowered = lower(grammar, vocabulary->special_tokens());
    std::shared_ptr<CompiledGrammar> g(
        new CompiledGrammar(std::move(lowered), std::move(vocabulary)));
    const std::lock_guard lock(g->mutex_);
    g->start_locked();
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
    const auto sequence = [&](int32_t p) {
        for (;; ++p) {
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
        for (const int32_t a : g.alternatives[static_cast<std::size_t>(queue[q])]) sequence(a);
        if (key.size() > kMaxKeyBytes) return {};
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
// `position` alone. Neighbours in byte order share the states of their common prefix; a prefix
// that no stack can continue decides every token that starts with it at once.
std::shared_ptr<const PositionMasks> CompiledGrammar::walk_vocabulary_locked(int32_t position) {
    const GrammarVocabulary& v = *vocabulary_;
    auto masks = std::make_shared<PositionMasks>();
    std::vector<int32_t> accepted;
    auto& states = walk_states_;
    auto& escaped = walk_escaped_;  // escaped[d]: a stack left the frame after at most d bytes
    states.assign(1, automaton_.state_at(position));
    escaped.assign(1, automaton_.state(states[0]).escaped);
    std::size_t valid = 0;  // states[0..valid] hold the previous token's prefixes
    const std::size_t n = v.n_ranked();
    for (std::size_t r = 0; r < n; ++r) {
        const std::string_view t = v.bytes_at(r);
        std::size_t d = std::min<std::size_t>(v.shared_prefix(r), valid);
        while (d < t.size() && !automaton_.state(states[d]).nodes.empty()) {
            const StateId next = automaton_.advance(states[d], static_cast<uint8_t>(t[d]));
            ++d;
            states.resize(d + 1);
            escaped.resize(d + 1);
            states[d] = next;
            escaped[d] = escaped[d - 1] || automaton_.state(next).escaped;
        }
        valid = d;
        if (d == t.size() && automaton_.state(states[d]).alive()) {
            accepted.push_back(v.id_at(r));
            continue;
        }
        // Stuck after d bytes: so is every following token that starts with the same d bytes.
        const bool uncertain = escaped[std::min(d, t.size() - 1)];
        for (;;) {
            if (uncertain) masks->uncertain.push_back(static_cast<uint32_t>(r));
            if (r + 1 >= n || v.shared_prefix(r + 1) < d || d == t.size()) break;
            ++r;
        }
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

void CompiledGrammar::mask_locked(StateId state, TokenMask& mask) {
    if (const auto it = state_masks_.find(state); it != state_masks_.end()) {
        mask = it->second;
        return;
    }
    const GrammarVocabulary& v = *vocabulary_;
    mask.clear();
    candidates_.clear();
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
        candidates_.insert(candidates_.end(), masks->uncertain.begin(), masks->uncertain.end());
    }
    if (accepting) {
        for (const int32_t id : v.eog_tokens()) mask.set(id);
    }
    // The uncertain tokens, with the real stacks; in byte order, so neighbours share prefixes.
    std::sort(candidates_.begin(), candidates_.end());
    candidates_.erase(std::unique(candidates_.begin(), candidates_.end()), candidates_.end());
    auto& states = walk_states_;
    states.assign(1, state);
    std::string_view previous;
    std::size_t valid = 0;
    for (const uint32_t rank : candidates_) {
        const int32_t id = v.id_at(rank);
        if (mask.test(id)) continue;
        const std::string_view t = v.bytes_at(rank);
        std::size_t d = 0;
        const std::size_t limit = std::min({valid, t.size(), previous.size()});
        while (d < limit && t[d] == previous[d]) ++d;
        while (d < t.size() && !automaton_.state(states[d]).nodes.empty()) {
            const StateId next = automaton_.advance(states[d], static_cast<uint8_t>(t[d]));
            ++d;
            states.resize(d + 1);
            states[d] = next;
        }
        valid = d;
        previous = t;
        if (d == t.size() && automaton_.state(states[d]).alive()) mask.set(id);
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
