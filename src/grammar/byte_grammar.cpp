#include "grammar/byte_grammar.h"

#include <algorithm>
#include <functional>
#include <map>

#include "core/error.h"
#include "grammar/rule_graph.h"
#include "grammar/utf8_ranges.h"

namespace minfer::grammar {
namespace {

using Sequence = std::vector<Element>;

struct DraftRule {
    std::string name;
    std::vector<Sequence> alternatives;
};

// Inlining bounds: a callee of at most this many alternatives and elements (with its own callees
// inlined) is copied into the loops that call it, as long as the loop stays within the caller
// bounds.
constexpr std::size_t kInlineAlternatives = 32;
constexpr std::size_t kInlineElements = 128;
constexpr std::size_t kCallerAlternatives = 64;
constexpr std::size_t kCallerElements = 1024;

std::size_t element_count(const DraftRule& r) {
    std::size_t n = 0;
    for (const Sequence& s : r.alternatives) n += s.size();
    return n;
}

class Lowerer {
  public:
    Lowerer(const Grammar& g, const std::unordered_map<std::string, int32_t>& special)
        : g_(g), special_(special) {
        for (const auto& [name, id] : special_) {
            if (!name.empty()) may_start_special_[static_cast<uint8_t>(name[0])] = true;
        }
    }

    ByteGrammar run() {
        for (const Rule& r : g_.rules) rules_.push_back({r.name, {}});
        for (std::size_t i = 0; i < g_.rules.size(); ++i) {
            const Expr& body = g_.rules[i].body;
            std::vector<Sequence> alternatives;
            if (body.kind == Expr::Kind::Alternation) {
                for (const Expr& c : body.children) {
                    alternatives.emplace_back();
                    lower_into(c, alternatives.back(), static_cast<int32_t>(i));
                }
            } else {
                alternatives.emplace_back();
                lower_into(body, alternatives.back(), static_cast<int32_t>(i));
            }
            rules_[i].alternatives = std::move(alternatives);
        }
        check_left_recursion();
        drop_unproductive();
        inline_small_rules();
        return flatten();
    }

  private:
    void count(std::size_t n) {
        total_ += n;
        if (total_ > kMaxElements)
            throw UsageError(concat("grammar: more than ", kMaxElements,
                                    " elements once repetitions are expanded; use * or + instead "
                                    "of large counts"));
    }

    void add(Sequence& out, Element e) {
        count(1);
        out.push_back(e);
    }

    int32_t new_rule(int32_t owner, std::vector<Sequence> alternatives) {
        const auto& base = rules_[static_cast<std::size_t>(owner)].name;
        rules_.push_back({concat(base, "-", ++helper_count_[owner]), std::move(alternatives)});
        return static_cast<int32_t>(rules_.size() - 1);
    }

    int32_t byte_set(const ByteSet& s) {
        const auto [it, inserted] =
            set_index_.try_emplace(s.words, static_cast<int32_t>(sets_.size()));
        if (inserted) sets_.push_back(s);
        return it->second;
    }

    Element byte_element(uint8_t lo, uint8_t hi) {
        ByteSet s;
        s.set_range(lo, hi);
        return {ElementKind::Bytes, byte_set(s)};
    }

    // A literal's bytes; where a control token's text appears in it ("[TOOL_CALLS][" holds
    // "[TOOL_CALLS]"), that part may also be the token itself.
    void lower_literal(const std::string& text, Sequence& out, int32_t owner) {
        for (std::size_t i = 0; i < text.size();) {
            const std::string* special = nullptr;
            int32_t token = -1;
            if (!special_.empty() && may_start_special_[static_cast<uint8_t>(text[i])]) {
                for (const auto& [name, id] : special_) {
                    const bool longer = special == nullptr || name.size() > special->size();
                    if (longer && text.compare(i, name.size(), name) == 0) {
                        special = &name;
                        token = id;
                    }
                }
            }
            if (special == nullptr) {
                const auto b = static_cast<uint8_t>(text[i++]);
                add(out, byte_element(b, b));
                continue;
            }
            const auto [it, inserted] = token_rules_.try_emplace(*special, -1);
            if (inserted) {
                Sequence as_token{{ElementKind::Token, token}};
                Sequence as_bytes;
                for (const char c : *special) {
                    const auto b = static_cast<uint8_t>(c);
                    as_bytes.push_back(byte_element(b, b));
                }
                count(as_bytes.size() + 1);
                it->second = new_rule(owner, {std::move(as_token), std::move(as_bytes)});
            }
            add(out, {ElementKind::Rule, it->second});
            i += special->size();
        }
    }

    void lower_class(const std::vector<CodepointRange>& ranges, Sequence& out, int32_t owner) {
        if (ranges.empty()) return add(out, {ElementKind::Bytes, byte_set(ByteSet{})});
        if (ranges.back().hi < 0x80) {
            ByteSet s;
            for (const auto& r : ranges)
                s.set_range(static_cast<uint8_t>(r.lo), static_cast<uint8_t>(r.hi));
            return add(out, {ElementKind::Bytes, byte_set(s)});
        }
        const auto [it, inserted] = class_rules_.try_emplace(ranges, -1);
        if (inserted) {
            std::vector<Sequence> alternatives;
            ByteSet single;  // every one-byte sequence in one element
            bool any_single = false;
            for (const auto& seq : utf8_sequences(ranges)) {
                if (seq.size() == 1) {
                    single.set_range(seq[0].first, seq[0].second);
                    any_single = true;
                    continue;
                }
                Sequence bytes;
                for (const auto& [lo, hi] : seq) bytes.push_back(byte_element(lo, hi));
                count(bytes.size());
                alternatives.push_back(std::move(bytes));
            }
            if (any_single) {
                count(1);
                alternatives.insert(alternatives.begin(),
                                    Sequence{{ElementKind::Bytes, byte_set(single)}});
            }
            it->second = new_rule(owner, std::move(alternatives));
        }
        add(out, {ElementKind::Rule, it->second});
    }

    void lower_repeat(const Expr& e, Sequence& out, int32_t owner) {
        Sequence probe;
        lower_into(e.children[0], probe, owner);
        if (probe.empty()) return;  // ("")* matches only the empty string
        const Element u = probe.size() == 1
                              ? probe[0]
                              : Element{ElementKind::Rule, new_rule(owner, {std::move(probe)})};
        for (int32_t i = 0; i < e.min; ++i) add(out, u);
        if (e.max == Expr::kUnbounded) {
            // r ::= u r | ""  (the recursion is a tail call: the matcher runs it as a loop)
            const int32_t r = new_rule(owner, {});
            rules_[static_cast<std::size_t>(r)].alternatives = {Sequence{u, {ElementKind::Rule, r}},
                                                                Sequence{}};
            count(2);
            return add(out, {ElementKind::Rule, r});
        }
        // x{0,k}: o_k ::= u o_(k-1) | "", o_1 ::= u | "".
        int32_t optional = -1;
        for (int32_t k = 1; k <= e.max - e.min; ++k) {
            Sequence first{u};
            if (optional >= 0) first.push_back({ElementKind::Rule, optional});
            count(first.size());
            optional = new_rule(owner, {std::move(first), Sequence{}});
        }
        if (optional >= 0) add(out, {ElementKind::Rule, optional});
    }

    void lower_into(const Expr& e, Sequence& out, int32_t owner) {
        switch (e.kind) {
            case Expr::Kind::Literal:
                return lower_literal(e.text, out, owner);
            case Expr::Kind::CharClass:
                return lower_class(e.ranges, out, owner);
            case Expr::Kind::RuleRef:
                return add(out, {ElementKind::Rule, e.rule});
            case Expr::Kind::Sequence:
                for (const Expr& c : e.children) lower_into(c, out, owner);
                return;
            case Expr::Kind::Alternation: {
                std::vector<Sequence> alternatives;
                for (const Expr& c : e.children) {
                    alternatives.emplace_back();
                    lower_into(c, alternatives.back(), owner);
                }
                return add(out, {ElementKind::Rule, new_rule(owner, std::move(alternatives))});
            }
            case Expr::Kind::Repeat:
                return lower_repeat(e, out, owner);
        }
    }

    // The user's rule a helper belongs to ("value-3" -> "value"), for messages.
    std::string user_name(int32_t rule) const {
        const std::string& name = rules_[static_cast<std::size_t>(rule)].name;
        if (static_cast<std::size_t>(rule) < g_.rules.size()) return name;
        for (const Rule& r : g_.rules) {
            if (name.size() > r.name.size() && name.compare(0, r.name.size(), r.name) == 0 &&
                name[r.name.size()] == '-')
                return r.name;
        }
        return name;
    }

    // A rule that can call itself before matching any byte, with a frame pushed on the way,
    // would grow the stack forever. (Through tail calls only, as in `r ::= x r | ""` with an x
    // that may match nothing, the matcher comes back to a stack it has already seen: harmless.)
    void check_left_recursion() const {
        const std::size_t n = rules_.size();
        const std::vector<bool> nullable =
            rules_that_hold(rules_, ElementKind::Rule, [](const Element&) { return false; });
        // Edges r -> s where s can be called at r's first byte; `pushes`: not as a tail call.
        struct Edge {
            int32_t to;
            bool pushes;
        };
        std::vector<std::vector<Edge>> left(n);
        for (std::size_t r = 0; r < n; ++r) {
            for (const Sequence& s : rules_[r].alternatives) {
                for (std::size_t i = 0; i < s.size(); ++i) {
                    if (s[i].kind != ElementKind::Rule) break;
                    left[r].push_back({s[i].value, i + 1 < s.size()});
                    if (!nullable[static_cast<std::size_t>(s[i].value)]) break;
                }
            }
        }
        // A pushing edge inside a strongly connected component closes such a cycle.
        std::vector<std::vector<int32_t>> plain(n);
        for (std::size_t r = 0; r < n; ++r) {
            for (const Edge& e : left[r]) plain[r].push_back(e.to);
        }
        const std::vector<int32_t> component = strongly_connected(plain);
        for (std::size_t r = 0; r < n; ++r) {
            for (const Edge& e : left[r]) {
                if (!e.pushes || component[r] != component[static_cast<std::size_t>(e.to)])
                    continue;
                // The cycle, for the message: from e.to back to r.
                std::vector<int32_t> from(n, -1);
                std::vector<int32_t> queue{e.to};
                from[static_cast<std::size_t>(e.to)] = e.to;
                for (std::size_t q = 0; q < queue.size() && from[r] < 0; ++q) {
                    for (const int32_t next : plain[static_cast<std::size_t>(queue[q])]) {
                        if (from[static_cast<std::size_t>(next)] >= 0) continue;
                        from[static_cast<std::size_t>(next)] = queue[q];
                        queue.push_back(next);
                    }
                }
                std::vector<int32_t> path{static_cast<int32_t>(r)};
                for (int32_t v = static_cast<int32_t>(r); v != e.to;) {
                    v = from[static_cast<std::size_t>(v)];
                    path.push_back(v);
                }
                // path runs r <- ... <- e.to; the cycle is e.to -> ... -> r -> e.to, named by
                // the users' rules (helpers carry their rule's name).
                path.insert(path.begin(), e.to);
                std::vector<std::string> names;
                for (auto it = path.rbegin(); it != path.rend(); ++it) {
                    std::string name = user_name(*it);
                    if (names.empty() || names.back() != name) names.push_back(std::move(name));
                }
                if (names.size() == 1) names.push_back(names[0]);
                std::string cycle;
                for (const std::string& name : names) cycle += (cycle.empty() ? "" : " -> ") + name;
                throw UsageError(concat("grammar: the rule '", user_name(e.to),
                                        "' is left-recursive (", cycle,
                                        "): it can call itself before matching anything; "
                                        "write the repetition with * or + instead"));
            }
        }
    }

    // Removes the alternatives that can never finish (they call a rule with no finite match, or
    // hold an empty character class); refuses a start rule left with none.
    void drop_unproductive() {
        const std::size_t n = rules_.size();
        const auto base_ok = [&](const Element& e) {
            return e.kind != ElementKind::Bytes ||
                   sets_[static_cast<std::size_t>(e.value)] != ByteSet{};
        };
        const std::vector<bool> productive = rules_that_hold(rules_, ElementKind::Rule, base_ok);
        const auto element_ok = [&](const Element& e) {
            return e.kind == ElementKind::Rule
                       ? static_cast<bool>(productive[static_cast<std::size_t>(e.value)])
                       : base_ok(e);
        };
        if (!productive[static_cast<std::size_t>(g_.root)])
            throw UsageError(concat("grammar: the rule '",
                                    g_.rules[static_cast<std::size_t>(g_.root)].name,
                                    "' can never finish: each of its alternatives needs a rule "
                                    "that never ends or matches nothing"));
        for (std::size_t r = 0; r < n; ++r) {
            if (!productive[r]) continue;
            std::erase_if(rules_[r].alternatives, [&](const Sequence& s) {
                return !std::all_of(s.begin(), s.end(), element_ok);
            });
        }
    }

    // Rules in an order where every rule comes after the rules it calls, except within cycles;
    // marks the rules that are part of a cycle.
    std::vector<int32_t> callee_first_order(std::vector<bool>& recursive) const {
        const std::size_t n = rules_.size();
        std::vector<std::vector<int32_t>> calls(n);
        recursive.assign(n, false);
        for (std::size_t r = 0; r < n; ++r) {
            for (const Sequence& s : rules_[r].alternatives) {
                for (const Element& e : s) {
                    if (e.kind != ElementKind::Rule) continue;
                    calls[r].push_back(e.value);
                    if (static_cast<std::size_t>(e.value) == r) recursive[r] = true;
                }
            }
        }
        const std::vector<int32_t> component = strongly_connected(calls);
        // Tarjan numbers components callees first.
        std::vector<int32_t> order(n);
        std::vector<int32_t> size(n, 0);
        for (std::size_t r = 0; r < n; ++r) {
            order[r] = static_cast<int32_t>(r);
            ++size[static_cast<std::size_t>(component[r])];
        }
        std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
            return component[static_cast<std::size_t>(a)] < component[static_cast<std::size_t>(b)];
        });
        for (std::size_t r = 0; r < n; ++r) {
            if (size[static_cast<std::size_t>(component[r])] > 1) recursive[r] = true;
        }
        return order;
    }

    void inline_small_rules() {
        std::vector<bool> recursive;
        const std::vector<int32_t> order = callee_first_order(recursive);
        // A callee is inlined when it is small once every rule it calls is inlined into it too
        // (a string's character: a byte set, the UTF-8 sequences, the escapes). Sizes saturate.
        struct Size {
            std::size_t alternatives = 0, elements = 0;
        };
        constexpr std::size_t kBig = std::size_t{1} << 30;
        // Callees come first in `order`, so their sizes are known when a caller is sized.
        std::vector<Size> sizes(rules_.size());
        for (const int32_t r : order) {
            const auto ri = static_cast<std::size_t>(r);
            if (recursive[ri]) {
                sizes[ri] = {kBig, kBig};
                continue;
            }
            Size total;
            for (const Sequence& seq : rules_[ri].alternatives) {
                Size alt{1, 0};
                for (const Element& e : seq) {
                    if (e.kind != ElementKind::Rule) {
                        alt.elements = std::min(kBig, alt.elements + alt.alternatives);
                        continue;
                    }
                    const Size callee = sizes[static_cast<std::size_t>(e.value)];
                    alt.elements = std::min(kBig, alt.elements * callee.alternatives +
                                                      callee.elements * alt.alternatives);
                    alt.alternatives = std::min(kBig, alt.alternatives * callee.alternatives);
                }
                total.alternatives = std::min(kBig, total.alternatives + alt.alternatives);
                total.elements = std::min(kBig, total.elements + alt.elements);
            }
            sizes[ri] = total;
        }
        const auto inlinable = [&](int32_t r) {
            const Size size = sizes[static_cast<std::size_t>(r)];
            return r != g_.root && size.alternatives <= kInlineAlternatives &&
                   size.elements <= kInlineElements;
        };
        for (const int32_t r : order) {
            DraftRule& rule = rules_[static_cast<std::size_t>(r)];
            // Only rules that recur (a loop `r ::= x r | ""`, as x* lowers, or rules that call
            // each other in a cycle): their small callees are inlined so that the loop's stacks
            // stay in one frame. Inlining elsewhere gains nothing and would unroll chains such as
            // x{0,20}.
            if (!recursive[static_cast<std::size_t>(r)]) continue;
            std::vector<Sequence> done;
            std::vector<Sequence> work(rule.alternatives.rbegin(), rule.alternatives.rend());
            bool gave_up = false;
            while (!work.empty()) {
                Sequence s = std::move(work.back());
                work.pop_back();
                // Only calls that push a frame: a tail call already runs in its caller's frame.
                const auto it = std::find_if(s.begin(), s.end(), [&](const Element& e) {
                    return !gave_up && &e != &s.back() && e.kind == ElementKind::Rule &&
                           inlinable(e.value);
                });
                if (it == s.end()) {
                    done.push_back(std::move(s));
                    continue;
                }
                const DraftRule& callee = rules_[static_cast<std::size_t>(it->value)];
                const std::size_t alternatives_after =
                    done.size() + work.size() + callee.alternatives.size();
                std::size_t elements_after = 0;
                for (const Sequence& d : done) elements_after += d.size();
                for (const Sequence& w : work) elements_after += w.size();
                elements_after += callee.alternatives.size() * s.size() + element_count(callee);
                if (alternatives_after > kCallerAlternatives || elements_after > kCallerElements) {
                    gave_up = true;  // keep the rest of this rule's calls as calls
                    work.push_back(std::move(s));
                    continue;
                }
                const auto at = static_cast<std::size_t>(it - s.begin());
                for (auto c = callee.alternatives.rbegin(); c != callee.alternatives.rend(); ++c) {
                    Sequence expanded(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(at));
                    expanded.insert(expanded.end(), c->begin(), c->end());
                    expanded.insert(expanded.end(), s.begin() + static_cast<std::ptrdiff_t>(at) + 1,
                                    s.end());
                    count(expanded.size());  // inlined copies count against the limit too
                    work.push_back(std::move(expanded));
                }
            }
            // Identical alternatives (from inlining) would only duplicate the matcher's stacks.
            std::vector<Sequence> unique;
            for (Sequence& s : done) {
                const bool seen = std::any_of(unique.begin(), unique.end(), [&](const Sequence& u) {
                    return u.size() == s.size() &&
                           std::equal(u.begin(), u.end(), s.begin(),
                                      [](const Element& a, const Element& b) {
                                          return a.kind == b.kind && a.value == b.value;
                                      });
                });
                if (!seen) unique.push_back(std::move(s));
            }
            rule.alternatives = std::move(unique);
        }
    }

    // Keeps the rules reachable from the start rule, numbered in order of discovery.
    ByteGrammar flatten() const {
        ByteGrammar out;
        out.byte_sets = sets_;
        std::vector<int32_t> id(rules_.size(), -1);
        std::vector<int32_t> queue{g_.root};
        id[static_cast<std::size_t>(g_.root)] = 0;
        for (std::size_t q = 0; q < queue.size(); ++q) {
            for (const Sequence& s : rules_[static_cast<std::size_t>(queue[q])].alternatives) {
                for (const Element& e : s) {
                    if (e.kind != ElementKind::Rule || id[static_cast<std::size_t>(e.value)] >= 0)
                        continue;
                    id[static_cast<std::size_t>(e.value)] = static_cast<int32_t>(queue.size());
                    queue.push_back(e.value);
                }
            }
        }
        out.alternatives.resize(queue.size());
        for (std::size_t q = 0; q < queue.size(); ++q) {
            const DraftRule& r = rules_[static_cast<std::size_t>(queue[q])];
            out.rule_names.push_back(r.name);
            for (const Sequence& s : r.alternatives) {
                out.alternatives[q].push_back(static_cast<int32_t>(out.elements.size()));
                for (Element e : s) {
                    if (e.kind == ElementKind::Rule)
                        e.value = id[static_cast<std::size_t>(e.value)];
                    out.elements.push_back(e);
                }
                out.elements.push_back({ElementKind::End, static_cast<int32_t>(q)});
            }
        }
        out.root = 0;
        return out;
    }

    const Grammar& g_;
    const std::unordered_map<std::string, int32_t>& special_;
    std::array<bool, 256> may_start_special_{};  // first bytes of the control tokens' texts
    std::vector<DraftRule> rules_;
    std::vector<ByteSet> sets_;
    std::map<std::array<uint64_t, 4>, int32_t> set_index_;
    std::map<std::string, int32_t> token_rules_;
    std::map<int32_t, int> helper_count_;
    std::size_t total_ = 0;

    struct RangesLess {
        bool operator()(const std::vector<CodepointRange>& a,
                        const std::vector<CodepointRange>& b) const {
            return std::lexicographical_compare(
                a.begin(), a.end(), b.begin(), b.end(),
                [](const CodepointRange& x, const CodepointRange& y) {
                    return x.lo != y.lo ? x.lo < y.lo : x.hi < y.hi;
                });
        }
    };
    std::map<std::vector<CodepointRange>, int32_t, RangesLess> class_rules_;
};

std::string describe_set(const ByteSet& s) {
    std::string out = "[";
    for (int b = 0; b < 256;) {
        if (!s.test(static_cast<uint8_t>(b))) {
            ++b;
            continue;
        }
        int e = b;
        while (e + 1 < 256 && s.test(static_cast<uint8_t>(e + 1))) ++e;
        const auto show = [&](int v) {
            if (v > 0x20 && v < 0x7F && v != '\\' && v != ']' && v != '-') {
                out += static_cast<char>(v);
            } else {
                out += concat("\\x", "0123456789ABCDEF"[v >> 4], "0123456789ABCDEF"[v & 15]);
            }
        };
        show(b);
        if (e > b) {
            out += '-';
            show(e);
        }
        b = e + 1;
    }
    return out + "]";
}

}  // namespace

std::string ByteGrammar::dump() const {
    std::string out;
    for (std::size_t r = 0; r < alternatives.size(); ++r) {
        out += rule_names[r] + " ::=";
        for (std::size_t a = 0; a < alternatives[r].size(); ++a) {
            if (a > 0) out += " |";
            for (auto p = static_cast<std::size_t>(alternatives[r][a]);
                 elements[p].kind != ElementKind::End; ++p) {
                const Element& e = elements[p];
                out += ' ';
                if (e.kind == ElementKind::Bytes) {
                    out += describe_set(byte_sets[static_cast<std::size_t>(e.value)]);
                } else if (e.kind == ElementKind::Rule) {
                    out += rule_names[static_cast<std::size_t>(e.value)];
                } else {
                    out += concat("<[", e.value, "]>");
                }
            }
            if (elements[static_cast<std::size_t>(alternatives[r][a])].kind == ElementKind::End)
                out += " \"\"";
        }
        out += '\n';
    }
    return out;
}

ByteGrammar lower(const Grammar& grammar,
                  const std::unordered_map<std::string, int32_t>& special_tokens) {
    if (grammar.root < 0 || static_cast<std::size_t>(grammar.root) >= grammar.rules.size())
        throw UsageError("grammar: there is no start rule");
    return Lowerer(grammar, special_tokens).run();
}

}  // namespace minfer::grammar
