// What attention.comp and attention_combine.comp share: the push constants, the positions a
// token attends to and how they are split, and the merge of two online-softmax states.
//
// A token at position pos attends to first .. pos (first = pos - window + 1 with a window), in
// splits of p.span positions (a multiple of 64, the same for every token of every pass: a token's
// bits never depend on what else is in the batch): split j covers first + j * span .. up to pos.
// A split's state is the online softmax over its positions: its maximum score m, the sum s of
// exp(score - m), and the sum of exp(score - m) * V over them; an invocation holds the values
// d = lid + 64 * i (i < 4: head_dim_v <= 256). The states of splits 0, 1, ... are merged in that
// order, by the single pass (attention.comp) as by the combine after the split pass
// (attention_combine.comp), with the same arithmetic: the same bits either way.

layout(push_constant) uniform Shape {
    uint n_tokens;  // (the grid may have more workgroups than the tokens' pairs or splits)
    uint n_head;
    uint n_head_kv;
    uint head_dim_k;
    uint head_dim_v;
    float scale;
    float softcap;  // 0: none
    uint window;    // 0: every earlier position
    uint block_size;
    uint positions;  // offsets in inputs
    uint sequence;
    uint table_begin;
    uint table_blocks;
    uint span;      // positions per split
    uint n_splits;  // the split pass's splits per (token, head): those of the longest token
} p;

uint first_position(uint pos) {
    return p.window > 0u && pos + 1u > p.window ? pos + 1u - p.window : 0u;
}

uint splits_of(uint pos) {
    return (pos - first_position(pos)) / p.span + 1u;
}

// Split j's state (m2, s2, acc2) merged into the state of splits 0 .. j - 1 (m, s, acc): split 0's
// taken as it is, each later one's scaled to the larger maximum. `precise`: no fused multiply-add
// that a driver might choose in one shader and not in the other.
void merge_state(uint j, inout float m, inout float s, inout float acc[4], float m2, float s2,
                 float acc2[4]) {
    if (j == 0u) {
        m = m2;
        s = s2;
        acc = acc2;
        return;
    }
    const float new_m = max(m, m2);
    precise float a = exp(m - new_m), b = exp(m2 - new_m);
    precise float merged = s * a + s2 * b;
    s = merged;
    for (uint i = 0u; i < 4u; ++i) {
        precise float v = acc[i] * a + acc2[i] * b;
        acc[i] = v;
    }
    m = new_m;
}
