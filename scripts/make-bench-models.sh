#!/usr/bin/env bash
# Writes the benchmark models of issue 7: random-weight F16 models of real shapes (tools/make_model)
# with real tokenizers from ../shared/fixtures/vocab, quantized with `minfer quantize`:
#   qwen2-0.5b-{q4_0,q8_0,q4_k_m}.gguf   embedding 896, 24 layers, 14/2 heads, ffn 4864, vocab 151936
#   llama-1.1b-{q4_0,q4_k_m}.gguf        embedding 2048, 22 layers, 32/4 heads, ffn 5632, vocab 32000
#   qwen3moe-16x768-q4_k_m.gguf          Qwen3-MoE's structure: embedding 1024, 16 layers, 16/4 heads
#                                        of 128, 16 experts of 768 (4 used), vocab 151936
#   gemma2-2b-q4_k_m.gguf                Gemma 2 2B: embedding 2304, 26 layers, 8/4 heads of 256,
#                                        ffn 9216, window 4096 on even layers, vocab 256000, tied
# Usage: scripts/make-bench-models.sh [OUT_DIR]   (default build/bench-models; needs scripts/setup.sh first)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/bench-models}
shared=${MINFER_SHARED:-../shared}
mkdir -p "$out"
cmake --build --preset release --target minfer make_model >/dev/null
make_model=build/release/tools/make_model
minfer=build/release/minfer

make_f16() {  # shape vocab-file output [template]
    [[ -f $3 ]] && return
    local template=()
    [[ -n ${4:-} ]] && template=(--chat-template "$4")
    "$make_model" --shape "$1" --vocab "$2" "${template[@]}" "$3.tmp" && mv "$3.tmp" "$3"
}
quantize() {  # input output type
    [[ -f $2 ]] && return
    "$minfer" quantize "$1" "$2" "$3" --threads "$(nproc)"
}

make_f16 qwen2-0.5b "$shared/fixtures/vocab/ggml-vocab-gpt2-qwen2-pre.gguf" "$out/qwen2-0.5b-f16.gguf" \
    "$shared/fixtures/templates/Qwen-Qwen2.5-7B-Instruct.jinja"
for t in q4_0 q8_0 q4_k_m; do quantize "$out/qwen2-0.5b-f16.gguf" "$out/qwen2-0.5b-$t.gguf" "$t"; done

make_f16 llama-1.1b "$shared/fixtures/vocab/ggml-vocab-llama-spm.gguf" "$out/llama-1.1b-f16.gguf"
for t in q4_0 q4_k_m; do quantize "$out/llama-1.1b-f16.gguf" "$out/llama-1.1b-$t.gguf" "$t"; done

make_f16 qwen3moe-16x768 "$shared/fixtures/vocab/ggml-vocab-gpt2-qwen2-pre.gguf" \
    "$out/qwen3moe-16x768-f16.gguf" "$shared/fixtures/templates/Qwen-Qwen3-0.6B.jinja"
quantize "$out/qwen3moe-16x768-f16.gguf" "$out/qwen3moe-16x768-q4_k_m.gguf" q4_k_m

make_f16 gemma2-2b "$shared/fixtures/vocab/ggml-vocab-llama-spm.gguf" "$out/gemma2-2b-f16.gguf" \
    "$shared/fixtures/templates/google-gemma-2-2b-it.jinja"
quantize "$out/gemma2-2b-f16.gguf" "$out/gemma2-2b-q4_k_m.gguf" q4_k_m
ls -l "$out"
