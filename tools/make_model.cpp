// make_model: writes a random-weight F16 model of a real architecture's shape, with a real
// tokenizer from ../shared/fixtures/vocab padded to the model's vocabulary size. Used to benchmark
// minfer on realistic shapes without downloading anything (scripts/make-bench-models.sh).
//
//   make_model --shape qwen2-0.5b --vocab ../shared/fixtures/vocab/ggml-vocab-gpt2-qwen2-pre.gguf
//   OUT.gguf
//
// Weights are normal with standard deviation 1/sqrt(fan_in) (activations stay finite), norms are
// near 1, biases small.

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <numbers>
#include <string>
#include <string_view>
#include <vector>

#include "core/atomic_output_file.h"
#include "core/error.h"
#include "core/file_io.h"
#include "core/half.h"
#include "core/terminal_text.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"

namespace {

using namespace minfer;

struct Shape {
    std::string arch;
    int64_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, n_ctx;
    float rope_base, eps;
    bool tied, qkv_bias;
    int64_t head_dim = 0;     // attention.key_length when not n_embd / n_head
    bool qk_norm = false;     // per-head Q/K norms (qwen3, gemma3)
    bool post_norms = false;  // post_attention_norm, post_ffw_norm (gemma)
    int64_t n_expert = 0;     // a mixture of experts; n_ff is then one expert's width
    int64_t n_expert_used = 0;
    int64_t sliding_window = 0;
    float attn_softcap = 0.0f, final_softcap = 0.0f;  // gemma2
};

Shape qwen3moe_bench() {
    // Qwen3-30B-A3B's structure at a size this machine benchmarks: 16 experts of 768, 4 used.
    Shape s{"qwen3moe", 1024, 16, 16, 4, 768, 151936, 32768, 1000000.0f, 1e-6f, false, false};
    s.head_dim = 128;
    s.qk_norm = true;
    s.n_expert = 16;
    s.n_expert_used = 4;
    return s;
}

Shape gemma2_2b() {
    Shape s{"gemma2", 2304, 26, 8, 4, 9216, 256000, 8192, 10000.0f, 1e-6f, true, false};
    s.head_dim = 256;
    s.post_norms = true;
    s.sliding_window = 4096;
    s.attn_softcap = 50.0f;
    s.final_softcap = 30.0f;
    return s;
}

const std::map<std::string, Shape> kShapes = {
    {"qwen2-0.5b", {"qwen2", 896, 24, 14, 2, 4864, 151936, 32768, 1000000.0f, 1e-6f, true, true}},
    {"llama-1.1b", {"llama", 2048, 22, 32, 4, 5632, 32000, 2048, 10000.0f, 1e-5f, false, false}},
    {"qwen3moe-16x768", qwen3moe_bench()},
    {"gemma2-2b", gemma2_2b()},
    // Not a real model: 8 MB, written in a blink, for the tests of this tool.
    {"llama-tiny", {"llama", 64, 2, 4, 2, 128, 32000, 2048, 10000.0f, 1e-5f, false, false}},
};

// A small, fast, seedable normal generator (xorshift64* + Box-Muller).
class Normal {
  public:
    explicit Normal(uint64_t seed) : state_(seed * 2654435761u + 1) {}
    float operator()() {
        if (have_spare_) {
            have_spare_ = false;
            return spare_;
        }
        const double u1 = (next() >> 11) * 0x1.0p-53 + 1e-300, u2 = (next() >> 11) * 0x1.0p-53;
        const double r = std::sqrt(-2.0 * std::log(u1));
        spare_ = static_cast<float>(r * std::sin(2 * std::numbers::pi * u2));
        have_spare_ = true;
        return static_cast<float>(r * std::cos(2 * std::numbers::pi * u2));
    }

  private:
    uint64_t next() {
        state_ ^= state_ >> 12;
        state_ ^= state_ << 25;
        state_ ^= state_ >> 27;
        return state_ * 0x2545F4914F6CDD1DULL;
    }
    uint64_t state_;
    float spare_ = 0;
    bool have_spare_ = false;
};

// Copies the tokenizer keys of the vocabulary file, padding the per-token arrays to n_vocab with
// unused tokens.
void copy_tokenizer(const GgufFile& vocab, int64_t n_vocab, GgufMetadata& out) {
    const auto& meta = vocab.metadata();
    const auto& tokens = meta.get_array("tokenizer.ggml.tokens");
    if (static_cast<int64_t>(tokens.size()) > n_vocab) {
        throw UsageError(concat("the vocabulary has ", tokens.size(),
                                " tokens, more than the shape's ", n_vocab));
    }
    const auto pad = static_cast<std::size_t>(n_vocab) - tokens.size();
    for (const auto& entry : meta.entries()) {
        if (entry.key.rfind("tokenizer.", 0) != 0) continue;
        if (entry.key == "tokenizer.ggml.tokens") {
            std::vector<std::string> padded(tokens.strings().begin(), tokens.strings().end());
            for (std::size_t i = 0; i < pad; ++i) padded.push_back(concat("<|unused_", i, "|>"));
            out.set(entry.key, GgufValue::array(GgufArray::of_strings(std::move(padded))));
        } else if (entry.key == "tokenizer.ggml.token_type") {
            auto types = entry.value.as_array().to_vector<int32_t>();
            types.resize(static_cast<std::size_t>(n_vocab), 5);  // 5: unused
            out.set(entry.key, GgufValue::array(GgufArray::of(types)));
        } else if (entry.key == "tokenizer.ggml.scores") {
            auto scores = entry.value.as_array().to_vector<float>();
            scores.resize(static_cast<std::size_t>(n_vocab), -1e9f);
            out.set(entry.key, GgufValue::array(GgufArray::of(scores)));
        } else {
            out.set(entry.key, entry.value);
        }
    }
}

// Errors as minfer's (src/cli/exit_codes.h): one line, 2 for a bad command line, 1 otherwise.
int fail(std::string_view message, int status) {
    std::fprintf(stderr, "make_model: error: %s\n", escape_for_terminal(message).c_str());
    return status;
}

// The last line printed, flushed and checked: a full disk or a closed pipe is an error, as in
// minfer (the model itself is already written by then).
int print_checked(const std::string& line) {
    errno = 0;
    std::fputs(line.c_str(), stdout);
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
        return fail(concat("write error: ", errno != 0 ? std::strerror(errno) : "stdout"), 1);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"Write a random-weight F16 GGUF model of a real architecture's shape"};
    std::string shape_name, vocab_path, out_path, template_path;
    uint64_t seed = 1;
    app.add_option("--shape", shape_name,
                   "qwen2-0.5b, llama-1.1b, qwen3moe-16x768, gemma2-2b or llama-tiny (for tests)")
        ->required()
        ->check(CLI::IsMember({"qwen2-0.5b", "llama-1.1b", "qwen3moe-16x768", "gemma2-2b",
                               "llama-tiny"}));
    app.add_option("--vocab", vocab_path, "A vocabulary GGUF from ../shared/fixtures/vocab")
        ->required()
        ->check(CLI::ExistingFile);
    app.add_option("--chat-template", template_path, "A .jinja chat template to embed")
        ->check(CLI::ExistingFile);
    app.add_option("--seed", seed, "Random seed")->capture_default_str();
    app.add_option("out", out_path, "Output .gguf")->required();
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        app.exit(e);
        return print_checked("");
    } catch (const CLI::ParseError& e) {
        // CLI11's own codes (105, 106, ...) would mean nothing to a script.
        return fail(e.what(), 2);
    }

    try {
        // A directory, device or FIFO as OUT is refused before the tokenizer is read.
        resolve_output_target(out_path);
        const Shape& s = kShapes.at(shape_name);
        const GgufFile vocab = GgufFile::open(vocab_path);
        GgufWriter w;
        auto& m = w.metadata();
        const std::string& a = s.arch;
        m.set("general.architecture", GgufValue::string(a));
        m.set("general.name", GgufValue::string(concat("random ", shape_name)));
        m.set("general.file_type", GgufValue::of<uint32_t>(1));  // mostly F16
        m.set(a + ".block_count", GgufValue::of<uint32_t>(static_cast<uint32_t>(s.n_layer)));
        m.set(a + ".context_length", GgufValue::of<uint32_t>(static_cast<uint32_t>(s.n_ctx)));
        m.set(a + ".embedding_length", GgufValue::of<uint32_t>(static_cast<uint32_t>(s.n_embd)));
        m.set(a + ".feed_forward_length", GgufValue::of<uint32_t>(static_cast<uint32_t>(s.n_ff)));
        m.set(a + ".attention.head_count",
              GgufValue::of<uint32_t>(static_cast<uint32_t>(s.n_head)));
        m.set(a + ".attention.head_count_kv",
              GgufValue::of<uint32_t>(static_cast<uint32_t>(s.n_head_kv)));
        m.set(a + ".rope.freq_base", GgufValue::of<float>(s.rope_base));
        m.set(a + ".attention.layer_norm_rms_epsilon", GgufValue::of<float>(s.eps));
        const auto u32 = [](int64_t v) {
            return GgufValue::of<uint32_t>(static_cast<uint32_t>(v));
        };
        const int64_t head_dim = s.head_dim > 0 ? s.head_dim : s.n_embd / s.n_head;
        if (s.head_dim > 0) {
            m.set(a + ".attention.key_length", u32(head_dim));
            m.set(a + ".attention.value_length", u32(head_dim));
        }
        if (s.n_expert > 0) {
            m.set(a + ".expert_count", u32(s.n_expert));
            m.set(a + ".expert_used_count", u32(s.n_expert_used));
            m.set(a + ".expert_feed_forward_length", u32(s.n_ff));
        }
        if (s.sliding_window > 0) m.set(a + ".attention.sliding_window", u32(s.sliding_window));
        if (s.attn_softcap > 0)
            m.set(a + ".attn_logit_softcapping", GgufValue::of<float>(s.attn_softcap));
        if (s.final_softcap > 0)
            m.set(a + ".final_logit_softcapping", GgufValue::of<float>(s.final_softcap));
        copy_tokenizer(vocab, s.n_vocab, m);
        if (!template_path.empty()) {
            m.set("tokenizer.chat_template",
                  GgufValue::string(read_file(template_path, "template file")));
        }

        uint64_t tensor_seed = seed;
        // n_matrices matrices [n_in -> n_out] of F16 values with standard deviation
        // 1/sqrt(n_in) (a 3-D tensor of experts when n_matrices > 1).
        const auto matrices = [&](const std::string& name, int64_t n_in, int64_t n_out,
                                  int64_t n_matrices) {
            const uint64_t my_seed = ++tensor_seed;
            std::vector<int64_t> shape = {n_in, n_out};
            if (n_matrices > 1) shape.push_back(n_matrices);
            w.add_tensor(name, GgmlType::F16, shape, [=](std::span<std::byte> bytes) {
                Normal normal(my_seed);
                const float scale = 1.0f / std::sqrt(static_cast<float>(n_in));
                auto* h = reinterpret_cast<uint16_t*>(bytes.data());
                for (int64_t i = 0; i < n_in * n_out * n_matrices; ++i)
                    h[i] = f32_to_f16(normal() * scale);
            });
        };
        const auto matrix = [&](const std::string& name, int64_t n_in, int64_t n_out) {
            matrices(name, n_in, n_out, 1);
        };
        // A router [n_in -> n_out] of F32 (as converters write them).
        const auto router = [&](const std::string& name, int64_t n_in, int64_t n_out) {
            const uint64_t my_seed = ++tensor_seed;
            w.add_tensor(name, GgmlType::F32, {n_in, n_out}, [=](std::span<std::byte> bytes) {
                Normal normal(my_seed);
                const float scale = 1.0f / std::sqrt(static_cast<float>(n_in));
                auto* f = reinterpret_cast<float*>(bytes.data());
                for (int64_t i = 0; i < n_in * n_out; ++i) f[i] = normal() * scale;
            });
        };
        const auto vector = [&](const std::string& name, int64_t n, float mean, float stddev) {
            const uint64_t my_seed = ++tensor_seed;
            w.add_tensor(name, GgmlType::F32, {n}, [=](std::span<std::byte> bytes) {
                Normal normal(my_seed);
                auto* f = reinterpret_cast<float*>(bytes.data());
                for (int64_t i = 0; i < n; ++i) f[i] = mean + stddev * normal();
            });
        };
        matrix("token_embd.weight", s.n_embd, s.n_vocab);
        vector("output_norm.weight", s.n_embd, 1.0f, 0.02f);
        if (!s.tied) matrix("output.weight", s.n_embd, s.n_vocab);
        for (int64_t i = 0; i < s.n_layer; ++i) {
            const std::string p = concat("blk.", i, ".");
            vector(p + "attn_norm.weight", s.n_embd, 1.0f, 0.02f);
            matrix(p + "attn_q.weight", s.n_embd, s.n_head * head_dim);
            matrix(p + "attn_k.weight", s.n_embd, s.n_head_kv * head_dim);
            matrix(p + "attn_v.weight", s.n_embd, s.n_head_kv * head_dim);
            if (s.qkv_bias) {
                vector(p + "attn_q.bias", s.n_head * head_dim, 0.0f, 0.02f);
                vector(p + "attn_k.bias", s.n_head_kv * head_dim, 0.0f, 0.02f);
                vector(p + "attn_v.bias", s.n_head_kv * head_dim, 0.0f, 0.02f);
            }
            if (s.qk_norm) {
                vector(p + "attn_q_norm.weight", head_dim, 1.0f, 0.02f);
                vector(p + "attn_k_norm.weight", head_dim, 1.0f, 0.02f);
            }
            matrix(p + "attn_output.weight", s.n_head * head_dim, s.n_embd);
            vector(p + "ffn_norm.weight", s.n_embd, 1.0f, 0.02f);
            if (s.post_norms) {
                vector(p + "post_attention_norm.weight", s.n_embd, 1.0f, 0.02f);
                vector(p + "post_ffw_norm.weight", s.n_embd, 1.0f, 0.02f);
            }
            if (s.n_expert > 0) {
                router(p + "ffn_gate_inp.weight", s.n_embd, s.n_expert);
                matrices(p + "ffn_gate_exps.weight", s.n_embd, s.n_ff, s.n_expert);
                matrices(p + "ffn_up_exps.weight", s.n_embd, s.n_ff, s.n_expert);
                matrices(p + "ffn_down_exps.weight", s.n_ff, s.n_embd, s.n_expert);
            } else {
                matrix(p + "ffn_gate.weight", s.n_embd, s.n_ff);
                matrix(p + "ffn_up.weight", s.n_embd, s.n_ff);
                matrix(p + "ffn_down.weight", s.n_ff, s.n_embd);
            }
        }
        AtomicOutputFile out(out_path);  // OUT keeps its old contents if writing fails
        w.write(out.stream());
        out.commit();
        return print_checked(concat("wrote ", escape_for_terminal(out_path), ": ", shape_name, ", ",
                                    w.tensor_count(), " tensors\n"));
    } catch (const UsageError& e) {
        return fail(e.what(), 2);  // OUT a directory, device or FIFO; a vocabulary too large
    } catch (const Error& e) {
        return fail(e.what(), 1);
    } catch (const std::exception& e) {
        return fail(concat("internal error: ", e.what()), 1);
    }
}
