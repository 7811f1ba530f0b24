#pragma once
// Internal to src/quant: the searches ggml's K-quant quantizers run on each sub-block to choose a
// scale (and a min) that minimise a weighted error, rather than just scaling by the maximum.
// Each reproduces ggml's float arithmetic step by step so the chosen levels are the same.

#include <cstdint>

namespace minfer::quant_detail {

// Values with a magnitude below this are treated as an all-zero group.
inline constexpr float kGroupMaxEps = 1e-15f;

// Symmetric levels -nmax..nmax-1 with weights x^2 (ggml's make_qx_quants, rmse_type 1): tries
// 19 scales around -nmax / max and keeps the best weighted least-squares fit. Writes level + nmax
// (0..2 nmax - 1) to levels and returns the scale (value = scale * (level - nmax)).
float search_symmetric_scale(int n, int nmax, const float* x, int8_t* levels);

// Symmetric levels for Q3_K (ggml's make_q3_quants with do_rmse): starts from -nmax / max, then
// moves single levels while the weighted (x^2) fit improves. Writes level + nmax to levels.
float search_symmetric_scale_q3(int n, int nmax, const float* x, int8_t* levels);

// Asymmetric levels 0..nmax with a min <= 0 (ggml's make_qkx2_quants): value = scale * level -
// min_out. Tries nstep + 1 scales (nmax + rmin + rdelta * k) / (max - min) and solves the weighted
// least-squares scale and min for each; use_abs_error weighs |error| instead of error^2.
// scratch holds n bytes.
float search_scale_and_min(int n, int nmax, const float* x, const float* weights, uint8_t* levels,
                           float* min_out, uint8_t* scratch, float rmin, float rdelta, int nstep,
                           bool use_abs_error);

}  // namespace minfer::quant_detail
