// libFuzzer target for what `minfer serve` does with a request before the engine: the HTTP
// request parser under the server's limits (Boost.Beast's, as src/server/http_server.cpp sets it
// up), then the body as the path's API reads it (OpenAI's chat or completion request, Anthropic's
// messages, ollama's chat or generate: src/server/*_request.h), then a conversation's messages
// through the ChatML template. ApiError, minfer::Error and a refusal by the HTTP
// parser are accepted outcomes; anything else (crash, hang, leak, sanitizer report) is a finding.
//
// LLVMFuzzerInitialize writes seed requests into $MINFER_FUZZ_SEED_DIR when set and empty.

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "chat/chat_template.h"
#include "seed_dir.h"
#include "server/anthropic_request.h"
#include "server/api_error.h"
#include "server/ollama_request.h"
#include "server/openai_request.h"

namespace {

namespace http = boost::beast::http;

const char* const kSeeds[] = {
    "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    "Content-Length: 79\r\n\r\n"
    R"({"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"n":2})",
    "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    "1f\r\n{\"prompt\":[1,2,3],\"logprobs\":2}\r\n0\r\n\r\n",
    "POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 190\r\n\r\n"
    R"({"messages":[{"role":"system","content":[{"type":"text","text":"a"}]},{"role":"user","content":"b"}],)"
    R"("logit_bias":{"5":-100},"stop":["x","y"],"logprobs":true,"top_logprobs":3,"max_tokens":5,"seed":-1})",
    "GET /v1/models HTTP/1.0\r\n\r\n",
    "POST /v1/messages HTTP/1.1\r\nContent-Length: 280\r\n\r\n"
    R"({"model":"m","max_tokens":5,"system":[{"type":"text","text":"s"}],"messages":[{"role":"user",)"
    R"("content":[{"type":"tool_result","tool_use_id":"t","content":"r"}]},{"role":"assistant",)"
    R"("content":[{"type":"tool_use","id":"t","name":"f","input":{"a":1}}]}],"tool_choice":{"type":"any"}})",
    "POST /api/chat HTTP/1.1\r\nContent-Length: 137\r\n\r\n"
    R"({"model":"m","messages":[{"role":"user","content":"hi"}],"format":"json","think":true,)"
    R"("options":{"num_predict":-2,"stop":["x"],"seed":3}})",
    "POST /api/generate HTTP/1.1\r\nContent-Length: 48\r\n\r\n"
    R"({"model":"m","prompt":"hi","system":"s","raw":0})",
};

void write_seed(const std::filesystem::path& dir, int n, std::string_view bytes) {
    std::ofstream(dir / ("seed-" + std::to_string(n)), std::ios::binary) << bytes;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    const auto seed_dir = minfer::fuzz::empty_seed_dir();
    if (!seed_dir) return 0;
    const std::filesystem::path& dir = *seed_dir;
    int n = 0;
    for (const char* seed : kSeeds) write_seed(dir, n++, seed);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(16 * 1024);
    parser.body_limit(1 << 20);
    parser.eager(true);
    boost::system::error_code ec;
    parser.put(boost::asio::buffer(data, size), ec);
    if (!ec && !parser.is_done()) parser.put_eof(ec);
    if (ec || !parser.is_done()) return 0;
    const auto& req = parser.get();
    const std::string_view target(req.target().data(), req.target().size());
    const minfer::SamplingParams defaults;
    try {
        using namespace minfer::server;
        GenerationRequest request;
        if (target == "/v1/messages") {
            request = parse_messages_request(req.body(), defaults);
        } else if (target == "/api/chat") {
            request = parse_ollama_chat(req.body(), defaults);
        } else if (target == "/api/generate") {
            request = parse_ollama_generate(req.body(), defaults);
        } else if (target.find("chat") != std::string_view::npos) {
            request = parse_chat_request(req.body(), defaults);
        } else {
            request = parse_completion_request(req.body(), defaults);
        }
        if (request.is_chat()) {
            static const auto chatml =
                minfer::chat::ChatTemplate::parse(std::string(minfer::chat::kChatMlTemplate));
            minfer::chat::ChatInputs in;
            in.messages = request.chat().messages;
            in.tools = request.chat().tools;
            in.extra_context = request.chat().template_kwargs;
            minfer::jinja::RenderLimits limits;
            limits.max_output_bytes = 1 << 20;
            (void)chatml.render(in, limits);
        }
    } catch (const minfer::Error&) {
    }
    return 0;
}
