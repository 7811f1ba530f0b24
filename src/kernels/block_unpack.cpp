#include "kernels/block_unpack.h"

#include <cstring>

#include "core/error.h"
#include "core/half.h"

namespace minfer {
namespace {

template <class Block>
const Block& as_block(const std::byte* p) {
    return *reinterpret_cast<const Block*>(p);
}

void set_uniform_scales(UnpackedBlock& out, int n_sub, int sub_size) {
    out.n_sub = n_sub;
    out.sub_size = sub_size;
    for (int s = 0; s < n_sub; ++s) {
        out.scale[s] = 1;
        out.min[s] = 0;
    }
}

// 4-bit nibbles of 16 bytes: element j is the low nibble of byte j, element j+16 the high one.
void unpack_nibbles_32(const uint8_t* qs, int8_t* q, int offset) {
    for (int j = 0; j < 16; ++j) {
        q[j] = static_cast<int8_t>((qs[j] & 0x0F) - offset);
        q[j + 16] = static_cast<int8_t>((qs[j] >> 4) - offset);
    }
}

// The fifth bit of Q5_0/Q5_1: bit j of qh belongs to element j.
void unpack_q5_32(const uint8_t* qs, const uint8_t* qh_bytes, int8_t* q, int offset) {
    uint32_t qh;
    std::memcpy(&qh, qh_bytes, 4);
    for (int j = 0; j < 16; ++j) {
        const int lo = (qs[j] & 0x0F) | static_cast<int>(((qh >> j) & 1u) << 4);
        const int hi = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
        q[j] = static_cast<int8_t>(lo - offset);
        q[j + 16] = static_cast<int8_t>(hi - offset);
    }
}

// The 6-bit scale and min of sub-block j of Q4_K / Q5_K (12 packed bytes).
void k4_scale_min(int j, const uint8_t* s, int32_t& scale, int32_t& min) {
    if (j < 4) {
        scale = s[j] & 63;
        min = s[j + 4] & 63;
    } else {
        scale = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
        min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

void unpack_q2_k(const block_q2_K& b, UnpackedBlock& out) {
    out.n_sub = 16;
    out.sub_size = 16;
    out.has_min = true;
    out.d = f16_to_f32(b.d);
    out.dmin = f16_to_f32(b.dmin);
    for (int s = 0; s < 16; ++s) {
        out.scale[s] = b.scales[s] & 0x0F;
        out.min[s] = b.scales[s] >> 4;
    }
    // Two halves of 128 values; in each, 32 bytes hold four 2-bit planes of 32 values.
    for (int half = 0; half < 2; ++half) {
        const uint8_t* qs = b.qs + half * 32;
        for (int plane = 0; plane < 4; ++plane) {
            for (int l = 0; l < 32; ++l) {
                out.q[half * 128 + plane * 32 + l] =
                    static_cast<int8_t>((qs[l] >> (2 * plane)) & 3);
            }
        }
    }
}

void unpack_q3_k(const block_q3_K& b, UnpackedBlock& out) {
    out.n_sub = 16;
    out.sub_size = 16;
    out.d = f16_to_f32(b.d);
    // 16 scales of 6 bits: low 4 bits in bytes 0-7 (two per byte), high 2 bits in bytes 8-11.
    for (int s = 0; s < 16; ++s) {
        const int low = s < 8 ? (b.scales[s] & 0x0F) : (b.scales[s - 8] >> 4);
        const int high = (b.scales[8 + (s % 4)] >> (2 * (s / 4))) & 3;
        out.scale[s] = (low | (high << 4)) - 32;
        out.min[s] = 0;
    }
    // value = low 2 bits minus 4 unless the hmask bit is set.
    for (int half = 0; half < 2; ++half) {
        const uint8_t* qs = b.qs + half * 32;
        for (int plane = 0; plane < 4; ++plane) {
            const int bit = half * 4 + plane;
            for (int l = 0; l < 32; ++l) {
                const int low = (qs[l] >> (2 * plane)) & 3;
                const int high = (b.hmask[l] >> bit) & 1;
                out.q[half * 128 + plane * 32 + l] = static_cast<int8_t>(low - (high ? 0 : 4));
            }
        }
    }
}

void unpack_q4_k(const block_q4_K& b, UnpackedBlock& out) {
    out.n_sub = 8;
    out.sub_size = 32;
    out.has_min = true;
    out.d = f16_to_f32(b.d);
    out.dmin = f16_to_f32(b.dmin);
    for (int s = 0; s < 8; ++s) k4_scale_min(s, b.scales, out.scale[s], out.min[s]);
    for (int pair = 0; pair < 4; ++pair) {
        const uint8_t* qs = b.qs + pair * 32;
        for (int l = 0; l < 32; ++l) {
            out.q[pair * 64 + l] = static_cast<int8_t>(qs[l] & 0x0F);
            out.q[pair * 64 + 32 + l] = static_cast<int8_t>(qs[l] >> 4);
        }
    }
}

void unpack_q5_k(const block_q5_K& b, UnpackedBlock& out) {
    out.n_sub = 8;
    out.sub_size = 32;
    out.has_min = true;
    out.d = f16_to_f32(b.d);
    out.dmin = f16_to_f32(b.dmin);
    for (int s = 0; s < 8; ++s) k4_scale_min(s, b.scales, out.scale[s], out.min[s]);
    for (int pair = 0; pair < 4; ++pair) {
        const uint8_t* qs = b.qs + pair * 32;
        for (int l = 0; l < 32; ++l) {
            const int h0 = (b.qh[l] >> (2 * pair)) & 1;
            const int h1 = (b.qh[l] >> (2 * pair + 1)) & 1;
            out.q[pair * 64 + l] = static_cast<int8_t>((qs[l] & 0x0F) | (h0 << 4));
            out.q[pair * 64 + 32 + l] = static_cast<int8_t>((qs[l] >> 4) | (h1 << 4));
        }
    }
}

void unpack_q6_k(const block_q6_K& b, UnpackedBlock& out) {
    out.n_sub = 16;
    out.sub_size = 16;
    out.d = f16_to_f32(b.d);
    for (int s = 0; s < 16; ++s) {
        out.scale[s] = b.scales[s];
        out.min[s] = 0;
    }
    // Two halves of 128: 64 bytes of low nibbles and 32 bytes of 2-bit high parts each.
    for (int half = 0; half < 2; ++half) {
        const uint8_t* ql = b.ql + half * 64;
        const uint8_t* qh = b.qh + half * 32;
        int8_t* q = out.q + half * 128;
        for (int l = 0; l < 32; ++l) {
            q[l] = static_cast<int8_t>(((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32);
            q[l + 32] = static_cast<int8_t>(((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32);
            q[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            q[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
    }
}

void unpack_iq4_xs(const block_iq4_xs& b, UnpackedBlock& out) {
    out.n_sub = 8;
    out.sub_size = 32;
    out.d = f16_to_f32(b.d);
    for (int s = 0; s < 8; ++s) {
        const int low = (b.scales_l[s / 2] >> (4 * (s % 2))) & 0x0F;
        const int high = (b.scales_h >> (2 * s)) & 3;
        out.scale[s] = (low | (high << 4)) - 32;
        out.min[s] = 0;
        const uint8_t* qs = b.qs + s * 16;
        for (int j = 0; j < 16; ++j) {
            out.q[s * 32 + j] = kvalues_iq4nl[qs[j] & 0x0F];
            out.q[s * 32 + j + 16] = kvalues_iq4nl[qs[j] >> 4];
        }
    }
}

// A base-3 digit: byte q holds up to five trits, the n-th one read as ((q * 3^n) mod 256 * 3) >> 8.
inline int8_t trit(uint8_t byte, int n) {
    static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
    const uint8_t shifted = static_cast<uint8_t>(byte * kPow3[n]);
    return static_cast<int8_t>(((static_cast<uint16_t>(shifted) * 3) >> 8) - 1);
}

void unpack_tq1_0(const block_tq1_0& b, UnpackedBlock& out) {
    set_uniform_scales(out, 8, 32);
    out.d = f16_to_f32(b.d);
    int8_t* q = out.q;
    for (int n = 0; n < 5; ++n) {
        for (int m = 0; m < 32; ++m) *q++ = trit(b.qs[m], n);
    }
    for (int n = 0; n < 5; ++n) {
        for (int m = 0; m < 16; ++m) *q++ = trit(b.qs[32 + m], n);
    }
    for (int n = 0; n < 4; ++n) {
        for (int m = 0; m < 4; ++m) *q++ = trit(b.qh[m], n);
    }
}

void unpack_tq2_0(const block_tq2_0& b, UnpackedBlock& out) {
    set_uniform_scales(out, 8, 32);
    out.d = f16_to_f32(b.d);
    int8_t* q = out.q;
    for (int j = 0; j < 64; j += 32) {
        for (int l = 0; l < 4; ++l) {
            for (int m = 0; m < 32; ++m) {
                *q++ = static_cast<int8_t>(((b.qs[j + m] >> (2 * l)) & 3) - 1);
            }
        }
    }
}

}  // namespace

UnpackLayout unpack_layout(GgmlType type) {
    switch (type) {
        case GgmlType::Q4_0:
        case GgmlType::Q5_0:
        case GgmlType::Q8_0:
        case GgmlType::IQ4_NL:
            return {32, 32, false};
        case GgmlType::Q4_1:
        case GgmlType::Q5_1:
            return {32, 32, true};
        case GgmlType::Q2_K:
            return {256, 16, true};
        case GgmlType::Q3_K:
        case GgmlType::Q6_K:
            return {256, 16, false};
        case GgmlType::Q4_K:
        case GgmlType::Q5_K:
            return {256, 32, true};
        case GgmlType::IQ4_XS:
        case GgmlType::TQ1_0:
        case GgmlType::TQ2_0:
            return {256, 32, false};
        default:
            throw UnsupportedError(concat("no integer unpacking for type ", type_name(type)));
    }
}

void unpack_block(GgmlType type, const std::byte* block, UnpackedBlock& out) {
    out.has_min = false;
    out.dmin = 0.0f;
    switch (type) {
        case GgmlType::Q4_0: {
            const auto& b = as_block<block_q4_0>(block);
            set_uniform_scales(out, 1, 32);
            out.d = f16_to_f32(b.d);
            unpack_nibbles_32(b.qs, out.q, 8);
            return;
        }
        case GgmlType::Q4_1: {
            const auto& b = as_block<block_q4_1>(block);
            set_uniform_scales(out, 1, 32);
            out.d = f16_to_f32(b.d);
            out.has_min = true;
            out.min[0] = 1;
            out.dmin = -f16_to_f32(b.m);  // value = d * q + m
            unpack_nibbles_32(b.qs, out.q, 0);
            return;
        }
        case GgmlType::Q5_0: {
            const auto& b = as_block<block_q5_0>(block);
            set_uniform_scales(out, 1, 32);
            out.d = f16_to_f32(b.d);
            unpack_q5_32(b.qs, b.qh, out.q, 16);
            return;
        }
        case GgmlType::Q5_1: {
            const auto& b = as_block<block_q5_1>(block);
            set_uniform_scales(out, 1, 32);
            out.d = f16_to_f32(b.d);
            out.has_min = true;
            out.min[0] = 1;
            out.dmin = -f16_to_f32(b.m);
            unpack_q5_32(b.qs, b.qh, out.q, 0);
            return;
        }
        case GgmlType::Q8_0: {
            const auto& b = as_block<block_q8_0>(block);
            set_uniform_scales(out, 1, 32);
            out.d = f16_to_f32(b.d);
            std::memcpy(out.q, b.qs, 32);
            return;
        }
        case GgmlType::IQ4_NL: {
            const auto& b = as_block<block_iq4_nl>(block);
            set_uniform_scales(out, 1, 32);
            out.d = f16_to_f32(b.d);
            for (int j = 0; j < 16; ++j) {
                out.q[j] = kvalues_iq4nl[b.qs[j] & 0x0F];
                out.q[j + 16] = kvalues_iq4nl[b.qs[j] >> 4];
            }
            return;
        }
        case GgmlType::Q2_K:
            return unpack_q2_k(as_block<block_q2_K>(block), out);
        case GgmlType::Q3_K:
            return unpack_q3_k(as_block<block_q3_K>(block), out);
        case GgmlType::Q4_K:
            return unpack_q4_k(as_block<block_q4_K>(block), out);
        case GgmlType::Q5_K:
            return unpack_q5_k(as_block<block_q5_K>(block), out);
        case GgmlType::Q6_K:
            return unpack_q6_k(as_block<block_q6_K>(block), out);
        case GgmlType::IQ4_XS:
            return unpack_iq4_xs(as_block<block_iq4_xs>(block), out);
        case GgmlType::TQ1_0:
            return unpack_tq1_0(as_block<block_tq1_0>(block), out);
        case GgmlType::TQ2_0:
            return unpack_tq2_0(as_block<block_tq2_0>(block), out);
        default:
            throw UnsupportedError(concat("no integer unpacking for type ", type_name(type)));
    }
}

}  // namespace minfer
