// Reading GGUF blocks from a storage buffer of 32-bit words, at any byte offset: the block
// layouts of quant/block_types.h (Q8_0: 34 bytes, Q4_0: 18) do not keep words aligned, and this
// portable path needs no 8- or 16-bit storage feature. The buffer is declared by the includer as
// `uint weights[]`.

uint byte_at(uint offset) {
    return (weights[offset >> 2] >> ((offset & 3u) * 8u)) & 0xFFu;
}

// A signed byte, sign-extended.
int i8_at(uint offset) {
    return bitfieldExtract(int(byte_at(offset)), 0, 8);
}

// A little-endian f16.
float f16_at(uint offset) {
    return unpackHalf2x16(byte_at(offset) | (byte_at(offset + 1u) << 8)).x;
}

// The 32-bit little-endian word at any byte offset (two loads where it straddles words; buffers
// are whole words long, so the second load stays inside).
uint u32_at(uint offset) {
    const uint shift = (offset & 3u) * 8u;
    const uint low = weights[offset >> 2];
    return shift == 0u ? low : (low >> shift) | (weights[(offset >> 2) + 1u] << (32u - shift));
}
