#include "tokenizer/vocabulary.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <initializer_list>

#include "core/error.h"
#include "core/hex_escape.h"
#include "core/log.h"
#include "gguf/gguf_metadata.h"

namespace minfer {
namespace {

constexpr std::string_view kPrefix = "tokenizer.ggml.";
constexpr int kMaxWarningsPerKind = 5;

std::string key(std::string_view name) {
    return concat(kPrefix, name);
}

[[noreturn]] void fail(const GgufMetadata& meta, std::string_view name, std::string_view what) {
    throw FormatError(concat(meta.source(), ": metadata key '", key(name), "' ", what));
}

uint16_t attr_of_type(int64_t type) {
    switch (static_cast<TokenType>(type)) {
        case TokenType::Normal:
            return attr::kNormal;
        case TokenType::Unknown:
            return attr::kUnknown;
        case TokenType::Control:
            return attr::kControl;
        case TokenType::UserDefined:
            return attr::kUserDefined;
        case TokenType::Unused:
            return attr::kUnused;
        case TokenType::Byte:
            return attr::kByte;
        default:
            return attr::kUndefined;
    }
}

void set_defaults(Vocabulary& v) {
    SpecialIds& s = v.special;
    switch (v.kind) {
        case VocabKind::Spm:
            s.bos = 1, s.eos = 2, s.unk = 0;
            v.add_space_prefix = true;
            v.add_bos = true;
            break;
        case VocabKind::Wpm:
            s.bos = 101, s.unk = 100, s.sep = 102, s.pad = 0, s.mask = 103;
            v.clean_spaces = true;
            v.add_bos = true;
            break;
        case VocabKind::Bpe:
            s.bos = 11, s.eos = 11;
            v.clean_spaces = true;
            break;
    }
}

void resolve_pre_tokenizer(Vocabulary& v, const GgufMetadata& meta) {
    const std::optional<std::string_view> pre = meta.get_string_optional(key("pre"));
    v.pre = pre ? find_pre_tokenizer(*pre) : nullptr;
    if (v.pre == nullptr) {
        // llama.cpp warns for a missing key and refuses an unknown one; minfer warns for both
        log_warning(pre ? concat(meta.source(), ": unknown pre-tokenizer '", *pre,
                                 "', using 'default'; tokens may differ from the model's")
                        : concat(meta.source(),
                                 ": no tokenizer.ggml.pre, using 'default'; "
                                 "tokens may differ from the model's"));
        v.pre = &default_pre_tokenizer();
        v.pre_name = "default";
    } else {
        v.pre_name = *pre;
    }
    v.clean_spaces = v.pre->clean_spaces;
    v.ignore_merges = v.pre->ignore_merges;
    if (v.pre->add_bos) v.add_bos = true;
    if (v.pre->no_bos) v.special.bos = kNoToken;
}

void read_tokens(Vocabulary& v, const GgufMetadata& meta) {
    const GgufArray* tokens = meta.get_array_optional(key("tokens"));
    if (tokens == nullptr) fail(meta, "tokens", "is missing");
    if (tokens->element_type() != GgufType::String) {
        fail(meta, "tokens",
             concat("has elements of type ", gguf_type_name(tokens->element_type()),
                    ", expected string"));
    }
    const uint64_t n = tokens->size();
    if (n == 0) fail(meta, "tokens", "is empty");
    if (n > static_cast<uint64_t>(INT32_MAX)) fail(meta, "tokens", concat("has ", n, " entries"));

    const std::vector<std::string_view>& words = tokens->strings();
    std::size_t total = 0;
    for (std::string_view w : words) total += w.empty() ? 24 : w.size();
    v.arena.reserve(total);
    v.texts.reserve(n);
    std::vector<std::size_t> offsets;
    offsets.reserve(n + 1);
    int empty_warnings = 0;
    for (std::size_t i = 0; i < n; ++i) {
        offsets.push_back(v.arena.size());
        std::string_view w = words[i];
        std::string placeholder;
        if (w.empty()) {  // llama.cpp renames empty tokens so that they can never match
            placeholder = concat("[EMPTY_", i, "]");
            w = placeholder;
            if (empty_warnings++ < kMaxWarningsPerKind) {
                log_warning(concat(meta.source(), ": empty token at index ", i));
            }
        }
        v.arena.insert(v.arena.end(), w.begin(), w.end());
        v.max_token_length = std::max(v.max_token_length, w.size());
    }
    offsets.push_back(v.arena.size());
    for (std::size_t i = 0; i < n; ++i) {
        v.texts.emplace_back(v.arena.data() + offsets[i], offsets[i + 1] - offsets[i]);
    }
    v.index = TextIdTable(n);
    const auto text_of = [&v](int32_t id) { return v.texts[id]; };
    for (std::size_t i = 0; i < n; ++i)
        v.index.assign(v.texts[i], static_cast<int32_t>(i), text_of);

    v.scores.assign(n, 0.0f);
    if (const GgufArray* scores = meta.get_array_optional(key("scores"))) {
        if (scores->element_type() != GgufType::Float32) {
            fail(meta, "scores",
                 concat("has elements of type ", gguf_type_name(scores->element_type()),
                        ", expected f32"));
        }
        if (scores->size() != n) {
            fail(meta, "scores", concat("has ", scores->size(), " entries, expected ", n));
        }
        v.scores = scores->to_vector<float>();
    }
    v.attrs.assign(n, attr::kNormal);
    if (const GgufArray* types = meta.get_array_optional(key("token_type"))) {
        if (types->element_type() != GgufType::Int32 && types->element_type() != GgufType::Uint32) {
            fail(meta, "token_type",
                 concat("has elements of type ", gguf_type_name(types->element_type()),
                        ", expected i32"));
        }
        if (types->size() != n) {
            fail(meta, "token_type", concat("has ", types->size(), " entries, expected ", n));
        }
        const std::vector<int32_t> values = types->element_type() == GgufType::Int32
                                                ? types->to_vector<int32_t>()
                                                : std::vector<int32_t>();
        for (std::size_t i = 0; i < n; ++i) {
            v.attrs[i] = attr_of_type(values.empty() ? static_cast<int64_t>(types->number_at(i))
                                                     : values[i]);
        }
    }
}

void read_special_ids(Vocabulary& v, const GgufMetadata& meta) {
    SpecialIds& s = v.special;
    const std::initializer_list<std::pair<std::string_view, int32_t*>> keys = {
        {"bos_token_id", &s.bos},         {"eos_token_id", &s.eos},
        {"eot_token_id", &s.eot},         {"eom_token_id", &s.eom},
        {"unknown_token_id", &s.unk},     {"seperator_token_id", &s.sep},
        {"padding_token_id", &s.pad},     {"mask_token_id", &s.mask},
        {"fim_pre_token_id", &s.fim_pre}, {"fim_suf_token_id", &s.fim_suf},
        {"fim_mid_token_id", &s.fim_mid}, {"fim_pad_token_id", &s.fim_pad},
        {"fim_rep_token_id", &s.fim_rep}, {"fim_sep_token_id", &s.fim_sep},
        {"prefix_token_id", &s.fim_pre},  {"suffix_token_id", &s.fim_suf},
        {"middle_token_id", &s.fim_mid},
    };
    for (const auto& [name, id] : keys) {
        const GgufValue* value = meta.find(key(name));
        if (value == nullptr) continue;
        if (!value->is_integer()) {
            fail(meta, name, concat("has type ", gguf_type_name(value->type()), ", expected u32"));
        }
        const bool in_range = value->type() == GgufType::Uint64 || value->type() == GgufType::Int64
                                  ? value->to_double() >= 0 && value->to_double() < v.size()
                                  : value->to_int64() >= 0 && value->to_int64() < v.size();
        // 0xFFFFFFFF (-1) is how converters write "no such token": keep the default quietly.
        const bool unset = value->to_double() == -1.0 || value->to_double() == 4294967295.0;
        if (!in_range && unset) continue;
        if (!in_range) {  // as llama.cpp: keep the default
            log_warning(concat(meta.source(), ": bad special token: '", key(name),
                               "' = ", value->to_display_string(), " (vocabulary has ", v.size(),
                               " tokens), using default id ", *id));
            continue;
        }
        *id = static_cast<int32_t>(value->to_int64());
    }
    if (auto b = meta.get_optional<bool>(key("add_bos_token"))) v.add_bos = *b;
    if (auto b = meta.get_optional<bool>(key("add_eos_token"))) v.add_eos = *b;
    if (auto b = meta.get_optional<bool>(key("add_space_prefix"))) v.add_space_prefix = *b;
    if (auto b = meta.get_optional<bool>(key("remove_extra_whitespaces"))) {
        v.remove_extra_whitespaces = *b;
    }
    // Defaults of the model family can lie outside a small vocabulary: then there is no such token.
    for (int32_t* id : {&s.bos, &s.eos, &s.eot, &s.eom, &s.unk, &s.sep, &s.pad, &s.mask, &s.fim_pre,
                        &s.fim_suf, &s.fim_mid, &s.fim_pad, &s.fim_rep, &s.fim_sep}) {
        if (!v.contains(*id)) *id = kNoToken;
    }
}

// llama.cpp finds end-of-turn and fill-in-the-middle tokens by their text, forces them to be
// control tokens, and stops generation at any of a list of texts.
void detect_special_by_text(Vocabulary& v, const GgufMetadata& meta) {
    int warnings = 0;
    const auto make_control = [&](int32_t id) {
        if (v.attrs[id] & attr::kControl) return;
        if (warnings++ < kMaxWarningsPerKind) {
            log_warning(concat(meta.source(), ": control-looking token ", id, " '", v.texts[id],
                               "' was not control-type; treating it as control"));
        }
        v.attrs[id] = attr::kControl;
    };
    // The first listed text present wins (llama.cpp takes whichever its hash map yields first).
    const auto detect = [&](int32_t& slot, std::initializer_list<std::string_view> texts) {
        if (slot != kNoToken) return;
        for (std::string_view t : texts) {
            const int32_t id = v.find(t);
            if (id == kNoToken) continue;
            slot = id;
            make_control(id);
            return;
        }
    };
    SpecialIds& s = v.special;
    detect(s.eot, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>",
                   "<\xEF\xBD\x9C"
                   "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"});
    detect(s.eom, {"<|eom_id|>"});
    detect(s.fim_pre, {"<|fim_prefix|>", "<fim-prefix>",
                       "<\xEF\xBD\x9C"
                       "fim\xE2\x96\x81"
                       "begin\xEF\xBD\x9C>",
                       "<PRE>"});
    detect(s.fim_suf, {"<|fim_suffix|>", "<fim-suffix>",
                       "<\xEF\xBD\x9C"
                       "fim\xE2\x96\x81hole\xEF\xBD\x9C>",
                       "<SUF>"});
    detect(s.fim_mid, {"<|fim_middle|>", "<fim-middle>",
                       "<\xEF\xBD\x9C"
                       "fim\xE2\x96\x81"
                       "end\xEF\xBD\x9C>",
                       "<MID>"});
    detect(s.fim_pad, {"<|fim_pad|>", "<fim-pad>", "<PAD>"});
    detect(s.fim_rep, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>"});
    detect(s.fim_sep, {"<|file_sep|>"});

    v.eog.assign(v.texts.size(), 0);
    for (int32_t id : {s.fim_pad, s.fim_rep, s.fim_sep}) {
        if (id != kNoToken) v.eog[id] = 1;
    }
    for (std::string_view t : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
                               "<|endoftext|>", "<|eom_id|>", "<EOT>"}) {
        const int32_t id = v.find(t);
        if (id == kNoToken) continue;
        v.eog[id] = 1;
        make_control(id);
    }
    for (int32_t id : {s.eos, s.eot, s.eom}) {
        if (id != kNoToken) v.eog[id] = 1;
    }
}

void build_special_cache(Vocabulary& v, const GgufMetadata& meta) {
    for (int32_t id = 0; id < v.size(); ++id) {
        if (v.attrs[id] & (attr::kControl | attr::kUserDefined | attr::kUnknown)) {
            v.special_tokens.push_back(id);
        }
    }
    std::stable_sort(v.special_tokens.begin(), v.special_tokens.end(),
                     [&v](int32_t a, int32_t b) { return v.texts[a].size() > v.texts[b].size(); });

    // Per-model attributes llama.cpp sets by name.
    std::string model_name(meta.get_string_optional("general.name").value_or(""));
    std::transform(model_name.begin(), model_name.end(), model_name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    const auto set_attr = [&v](std::string_view text, uint16_t bit, bool on) {
        const int32_t id = v.find(text);
        if (id == kNoToken) return;
        v.attrs[id] = on ? (v.attrs[id] | bit) : (v.attrs[id] & ~bit);
    };
    const std::string_view pre = meta.get_string_optional(key("pre")).value_or("");
    if (pre.find("jina-v2-de") != pre.npos || pre.find("jina-v2-es") != pre.npos ||
        pre.find("jina-v2-code") != pre.npos) {
        set_attr("<mask>", attr::kLstrip, true);
    } else if (model_name.find("phi-3") != std::string::npos ||
               model_name.find("phi3") != std::string::npos) {
        for (int32_t id : v.special_tokens) v.attrs[id] |= attr::kRstrip;
        set_attr("</s>", attr::kRstrip, true);
        for (std::string_view t : {"<unk>", "<s>", "<|endoftext|>"})
            set_attr(t, attr::kRstrip, false);
    }
}

void check_byte_tokens(const Vocabulary& v, const GgufMetadata& meta) {
    if (v.kind == VocabKind::Bpe) return;  // BPE never decodes byte tokens as <0xNN>
    for (int32_t id = 0; id < v.size(); ++id) {
        if (!(v.attrs[id] & attr::kByte)) continue;
        const std::string_view t = v.texts[id];
        const bool ok =
            t.size() == 6 && t.substr(0, 3) == "<0x" && t[5] == '>' && read_hex(t, 3, 2);
        if (!ok) {
            throw FormatError(concat(meta.source(), ": token ", id, " has type byte but its text ",
                                     quote_string(t), " is not of the form <0xNN>"));
        }
    }
}

}  // namespace

uint8_t byte_token_value(std::string_view text) {
    return static_cast<uint8_t>(read_hex(text, 3, 2).value());
}

Vocabulary Vocabulary::load(const GgufMetadata& meta) {
    Vocabulary v;
    const std::optional<std::string_view> model = meta.get_string_optional(key("model"));
    if (!model) fail(meta, "model", "is missing");
    v.model_name = *model;
    if (*model == "llama") {
        v.kind = VocabKind::Spm;
    } else if (*model == "gpt2") {
        v.kind = VocabKind::Bpe;
    } else if (*model == "bert") {
        v.kind = VocabKind::Wpm;
    } else {
        throw UnsupportedError(concat(meta.source(), ": tokenizer model '", *model,
                                      "' is not supported (llama, gpt2 and bert are)"));
    }
    set_defaults(v);
    if (v.kind == VocabKind::Bpe) resolve_pre_tokenizer(v, meta);
    read_tokens(v, meta);
    read_special_ids(v, meta);
    detect_special_by_text(v, meta);
    build_special_cache(v, meta);
    check_byte_tokens(v, meta);
    return v;
}

}  // namespace minfer
