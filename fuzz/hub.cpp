// libFuzzer target for what the hub layer reads from users and servers before anything is
// fetched or written: model references (src/hub/reference.h), the hub's tree and revision JSON
// and Link headers (src/hub/hf_api.h), ollama manifests (src/hub/ollama.h), URLs and redirects
// (src/hub/url.h), and the choice of a model among a repository's files
// (src/hub/model_selection.h). The first byte picks the parser. minfer::Error is an accepted
// outcome; anything else (crash, hang, leak, sanitizer report) is a finding. Every path a parser
// accepts is checked again to be safe to join under a cache directory.
//
// LLVMFuzzerInitialize writes seed inputs into $MINFER_FUZZ_SEED_DIR when set and empty.

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "hub/hf_api.h"
#include "hub/model_selection.h"
#include "hub/ollama.h"
#include "hub/reference.h"
#include "hub/url.h"
#include "seed_dir.h"

namespace {

using namespace minfer::hub;

const char* const kSeeds[] = {
    "\x00hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M",
    "\x00hf:o/r@refs/pr/1/dir/m-Q8_0.gguf",
    "\x00hf:o/r@feature%2Fx:q4_k_m",
    "\x00ollama:someone/model:q4",
    "\x00https://host.example/a/b%20c.gguf?x=1",
    "\x01[{\"type\":\"file\",\"oid\":\"0123456789012345678901234567890123456789\",\"size\":5,"
    "\"path\":\"sub/m-Q4_K_M.gguf\",\"lfs\":{\"oid\":"
    "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\",\"size\":5}},"
    "{\"type\":\"directory\",\"path\":\"sub\"}]",
    "\x02{\"sha\":\"0123456789abcdef0123456789abcdef01234567\"}",
    "\x03<https://h/api/models/o/r/tree/main?cursor=x>; rel=\"next\"",
    "\x04{\"schemaVersion\":2,\"layers\":[{\"mediaType\":\"application/vnd.ollama.image.model\","
    "\"digest\":\"sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\","
    "\"size\":7}]}",
    "\x05https://a.example/x/y\n../z?q#f",
    "\x06Q4_K\nm-Q4_K_M.gguf\nm-Q4_K_S.gguf\nmmproj-f16.gguf\nbig/m-F16-00001-of-00002.gguf\n"
    "big/m-F16-00002-of-00002.gguf",
};

void write_seed(const std::filesystem::path& dir, int n, std::string_view bytes) {
    std::ofstream(dir / ("seed-" + std::to_string(n)), std::ios::binary) << bytes;
}

[[noreturn]] void finding(const char* what) {
    std::fprintf(stderr, "hub fuzz: %s\n", what);
    std::abort();
}

void check_reference(std::string_view text) {
    const ModelReference ref = parse_reference(text);
    if (const auto* h = std::get_if<HfReference>(&ref)) {
        if (!h->file.empty() && !is_safe_relative_path(h->file)) finding("unsafe hf file accepted");
        if (!is_safe_relative_path(h->revision)) finding("unsafe revision accepted");
        // The canonical spelling parses back to the same reference.
        const auto again = std::get<HfReference>(parse_reference(to_string(ref)));
        if (again.repo != h->repo || again.revision != h->revision || again.file != h->file ||
            again.quant != h->quant)
            finding("canonical hf reference does not round-trip");
    } else if (const auto* o = std::get_if<OllamaReference>(&ref)) {
        for (const auto& part : {o->namespace_name, o->name, o->tag})
            if (!is_safe_relative_path(part) || part.find('/') != std::string::npos)
                finding("unsafe ollama name accepted");
    } else if (const auto* u = std::get_if<UrlReference>(&ref)) {
        if (!is_safe_relative_path(u->file_name) || u->file_name.find('/') != std::string::npos)
            finding("unsafe URL file name accepted");
    }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    const auto seed_dir = minfer::fuzz::empty_seed_dir();
    if (!seed_dir) return 0;
    const std::filesystem::path& dir = *seed_dir;
    int n = 0;
    for (const char* seed : kSeeds) {
        // The selector byte may be NUL: the length comes from the rest of the literal.
        const std::string_view rest(seed + 1);
        std::string bytes(1, seed[0]);
        bytes += rest;
        write_seed(dir, n++, bytes);
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0 || size > (1 << 16)) return 0;
    const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
    try {
        switch (data[0] % 7) {
            case 0:
                check_reference(text);
                break;
            case 1:
                for (const auto& f : parse_tree_page(text))
                    if (!is_safe_relative_path(f.path)) finding("unsafe tree path accepted");
                break;
            case 2:
                if (!is_commit_id(parse_revision_commit(text))) finding("bad commit accepted");
                break;
            case 3:
                (void)next_page_link(text);
                break;
            case 4:
                if (!is_sha256_hex(parse_ollama_manifest(text).sha256))
                    finding("bad ollama digest accepted");
                break;
            case 5: {
                const std::size_t nl = text.find('\n');
                const std::string_view base = text.substr(0, nl);
                const std::string_view location =
                    nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
                if (parse_http_url(base)) {
                    const std::string target = resolve_redirect(base, location);
                    if (!parse_http_url(target)) finding("redirect to a non-http URL");
                }
                break;
            }
            case 6: {
                std::vector<std::string> lines;
                std::istringstream in{std::string(text)};
                std::string line;
                while (std::getline(in, line) && lines.size() < 1000) lines.push_back(line);
                if (lines.empty()) break;
                const std::string quant = lines.front();
                lines.erase(lines.begin());
                for (const auto& chosen : select_model_files(lines, quant, "", "hf:o/r"))
                    if (std::find(lines.begin(), lines.end(), chosen) == lines.end())
                        finding("chose a file that is not in the repository");
                (void)quant_tag_of(quant);
                break;
            }
        }
    } catch (const minfer::Error&) {
    }
    return 0;
}
