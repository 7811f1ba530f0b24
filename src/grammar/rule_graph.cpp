#include "grammar/rule_graph.h"

#include <algorithm>

namespace minfer::grammar {

std::vector<int32_t> strongly_connected(const std::vector<std::vector<int32_t>>& edges) {
    const std::size_t n = edges.size();
    std::vector<int32_t> index(n, -1), low(n, 0), component(n, -1), stack;
    std::vector<bool> on_stack(n, false);
    int32_t next = 0, components = 0;
    struct Frame {
        int32_t v;
        std::size_t edge;  // the next edge of v to follow
    };
    std::vector<Frame> calls;
    const auto enter = [&](int32_t v) {
        const auto vi = static_cast<std::size_t>(v);
        index[vi] = low[vi] = next++;
        stack.push_back(v);
        on_stack[vi] = true;
        calls.push_back({v, 0});
    };
    for (std::size_t root = 0; root < n; ++root) {
        if (index[root] >= 0) continue;
        enter(static_cast<int32_t>(root));
        while (!calls.empty()) {
            const int32_t v = calls.back().v;
            const auto vi = static_cast<std::size_t>(v);
            if (calls.back().edge < edges[vi].size()) {
                const int32_t w = edges[vi][calls.back().edge++];
                const auto wi = static_cast<std::size_t>(w);
                if (index[wi] < 0) {
                    enter(w);
                } else if (on_stack[wi]) {
                    low[vi] = std::min(low[vi], index[wi]);
                }
                continue;
            }
            calls.pop_back();
            if (!calls.empty()) {
                const auto parent = static_cast<std::size_t>(calls.back().v);
                low[parent] = std::min(low[parent], low[vi]);
            }
            if (low[vi] != index[vi]) continue;
            int32_t w = -1;
            do {
                w = stack.back();
                stack.pop_back();
                on_stack[static_cast<std::size_t>(w)] = false;
                component[static_cast<std::size_t>(w)] = components;
            } while (w != v);
            ++components;
        }
    }
    return component;
}

}  // namespace minfer::grammar
