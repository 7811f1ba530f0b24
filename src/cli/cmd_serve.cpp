// `minfer serve [MODEL...]`: the HTTP server for OpenAI's, Anthropic's and ollama's APIs
// (src/server/api_server.h). The socket is bound first (a taken port fails at once). One MODEL
// loads at start while /health answers 503; several, or none (every model in the caches), load
// when a request names them, within --max-models and --memory, and unload after --keep-alive.
// Requests are served until SIGTERM or Ctrl-C, which stop accepting, let running requests finish
// for --shutdown-timeout seconds, end the rest, and exit 0.

#include <pthread.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "cli/commands.h"
#include "cli/context_flags.h"
#include "cli/model_loading.h"
#include "cli/sampling_flags.h"
#include "core/error.h"
#include "core/file_io.h"
#include "core/log.h"
#include "core/memory_limits.h"
#include "hub/hub_settings.h"
#include "hub/reference.h"
#include "hub/resolver.h"
#include "model/kv_spec.h"
#include "sampling/sampler.h"
#include "server/api_server.h"
#include "server/keep_alive.h"
#include "server/model_catalog.h"

namespace minfer::cli {
namespace {

struct ServeOptions {
    std::vector<std::string> models;
    std::string host = "127.0.0.1";
    int port = 8080;
    int n_parallel = 4;
    int64_t kv_cache_tokens = 0;
    int64_t prefill_chunk = 32;
    std::string api_key, api_key_file;
    std::string alias;
    int max_queue = 64;
    int64_t max_body = 8 * 1024 * 1024;
    int max_connections = 512;
    std::string cors_origin;
    std::string log_format = "text";
    bool no_access_log = false;
    double shutdown_timeout = 10;
    double request_timeout = 10;
    int64_t n_predict = -1;
    std::string template_file;
    int max_models = 3;
    double memory_gib = 0;  // 0: what is free at start
    std::string keep_alive;  // "": 5m with several models, forever with one
    bool allow_pull = false;
    std::vector<std::string> model_options;  // NAME,KEY=VALUE,...
    ContextFlags context;
    SamplingFlags sampling;
};

std::string trimmed(std::string s) {
    const auto not_space = [](unsigned char c) { return !std::isspace(c); };
    s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
    s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
    return s;
}

// The key from --api-key, --api-key-file or MINFER_API_KEY (in that order); empty: none.
std::string api_key_of(const ServeOptions& o) {
    if (!o.api_key.empty()) return o.api_key;
    if (!o.api_key_file.empty()) {
        std::string key = trimmed(read_file(o.api_key_file, "the API key file"));
        if (key.empty()) throw UsageError(concat("the API key file ", o.api_key_file, " is empty"));
        return key;
    }
    const char* env = std::getenv("MINFER_API_KEY");
    return env != nullptr ? trimmed(env) : std::string();
}

// The models served: those named (the first under --alias), else every model in the caches.
server::ModelCatalog catalog_of(const ServeOptions& o) {
    server::ModelCatalog catalog;
    const auto add = [&catalog](server::CatalogEntry e) {
        std::string note;
        catalog.add(std::move(e), &note);
        if (!note.empty()) log_info(concat("minfer: ", note));
    };
    if (o.models.empty()) {
        for (auto& e : server::cached_catalog_entries(hub::HubSettings::from_environment()))
            add(std::move(e));
        return catalog;
    }
    for (const std::string& model : o.models) {
        server::CatalogEntry e;
        e.reference = model;
        e.id = (&model == &o.models.front()) ? o.alias : "";
        const hub::ModelReference parsed = hub::parse_reference(model);  // UsageError when bad
        if (!hub::is_remote(parsed)) {
            if (o.models.size() > 1 && !std::filesystem::exists(model))
                throw IoError(concat("cannot serve ", model, ": no such file or directory"));
            if (std::filesystem::is_regular_file(model)) e.file = model;
        } else if (auto cached = hub::find_in_cache(parsed, hub::HubSettings::from_environment())) {
            e.file = cached->path;
        }
        add(std::move(e));
    }
    return catalog;
}

// --model-options NAME,KEY=VALUE,...: one model's own --ctx, -np, --kv-cache-tokens and
// --cache-type. NAME is any name a request may use for the model.
void apply_model_options(server::ModelCatalog& catalog, const ServeOptions& o) {
    for (const std::string& spec : o.model_options) {
        const auto fail = [&](const std::string& why) -> UsageError {
            return UsageError(concat("--model-options ", spec, ": ", why));
        };
        std::vector<std::string> parts;
        for (std::size_t start = 0;;) {
            const std::size_t comma = spec.find(',', start);
            parts.push_back(spec.substr(start, comma - start));
            if (comma == std::string::npos) break;
            start = comma + 1;
        }
        const server::CatalogEntry* entry = catalog.find(parts.front());
        if (entry == nullptr) {
            std::string ids;
            for (const auto& e : catalog.entries()) ids += concat(ids.empty() ? "" : ", ", e.id);
            throw fail(concat("no model served is called '", parts.front(), "' (served: ",
                              ids.empty() ? std::string("none") : ids, ")"));
        }
        if (parts.size() < 2) throw fail("give KEY=VALUE after the name: ctx, np, kv-cache-tokens, cache-type");
        server::ModelSettings settings = entry->settings;
        for (std::size_t i = 1; i < parts.size(); ++i) {
            const std::size_t eq = parts[i].find('=');
            const std::string key = parts[i].substr(0, eq);
            const std::string value = eq == std::string::npos ? "" : parts[i].substr(eq + 1);
            const auto number = [&](int64_t lo, int64_t hi) {
                char* end = nullptr;
                errno = 0;
                const long long v = std::strtoll(value.c_str(), &end, 10);
                if (value.empty() || *end != '\0' || errno != 0 || v < lo || v > hi)
                    throw fail(concat(key, " must be a whole number from ", lo, " to ", hi));
                return static_cast<int64_t>(v);
            };
            if (key == "ctx") {
                settings.ctx = number(1, kMaxKvTokens);
            } else if (key == "np") {
                settings.n_parallel = static_cast<int>(number(1, 256));
                if (*settings.n_parallel > o.context.batch)
                    throw fail(concat("np ", *settings.n_parallel, " is more than -b ", o.context.batch));
            } else if (key == "kv-cache-tokens") {
                settings.kv_tokens = number(1, kMaxKvTokens);
            } else if (key == "cache-type") {
                parse_kv_cache_type(value);  // UsageError naming the types
                settings.cache_type = value;
            } else {
                throw fail(concat("unknown setting '", key,
                                  "': ctx, np, kv-cache-tokens and cache-type may be set per model"));
            }
        }
        catalog.set_settings(entry->id, settings);
    }
}

// The sizes on the command line that contradict each other, checked before the port is bound and
// the model loaded.
void check_sizes(const ServeOptions& o, const CLI::Option& prefill_chunk_option) {
    const int64_t batch = o.context.batch;
    if (batch < o.n_parallel) {
        // Each step decodes one token of every running sequence: with fewer rows, the first
        // sequences would decode to their end while the others wait.
        throw UsageError(concat("-b ", batch, " is less than -np ", o.n_parallel,
                                ": a step holds one token of each sequence; raise -b"));
    }
    if (prefill_chunk_option.count() > 0 && o.prefill_chunk > batch) {
        log_warning(concat("--prefill-chunk ", o.prefill_chunk, " has no effect beyond -b ", batch,
                           ": a step holds at most ", batch, " tokens"));
    }
    if (o.kv_cache_tokens == 0 && o.context.ctx > 0 &&
        o.context.ctx * o.n_parallel > kMaxKvTokens) {
        throw UsageError(concat("-np ", o.n_parallel, " x --ctx ", o.context.ctx, " = ",
                                o.context.ctx * o.n_parallel,
                                " cache positions, beyond any machine; lower them or set "
                                "--kv-cache-tokens"));
    }
}

}  // namespace

void add_serve_command(CLI::App& app) {
    auto o = std::make_shared<ServeOptions>();
    CLI::App* cmd = app.add_subcommand("serve",
                                       "Serve models over OpenAI's HTTP API (and Anthropic's "
                                       "/v1/messages, ollama's /api/chat), "
                                       "with a chat page at /");
    cmd->add_option("model", o->models,
                    concat("The models to serve (default: every model in the caches, as minfer "
                           "list shows them). Each: ", kModelHelp));
    cmd->add_option("--host", o->host, "Address to listen on")->capture_default_str();
    cmd->add_option("--port", o->port, "Port to listen on (0: any free port)")
        ->check(CLI::Range(0, 65535))
        ->capture_default_str();
    cmd->add_option("--n-parallel", o->n_parallel,
                    "(or -np) Sequences decoded at once; more requests wait in the queue")
        ->check(CLI::Range(1, 256))
        ->capture_default_str();
    add_context_flags(cmd, o->context);
    cmd->get_option("--ctx")->description(
        "Context length of EACH sequence in tokens (default: min(4096, the model's)); "
        "llama-server's -c is the total it splits over its slots");
    cmd->add_option("--kv-cache-tokens", o->kv_cache_tokens,
                    "Positions the KV cache holds for all sequences (default: n-parallel x ctx)")
        ->check(CLI::Range(int64_t{1}, kMaxKvTokens));
    auto* prefill_chunk_option =
        cmd->add_option("--prefill-chunk", o->prefill_chunk,
                        "The most prompt tokens one step adds while others decode: lower keeps the "
                        "others' tokens flowing, higher gives a shorter time to first token")
            ->check(CLI::Range(int64_t{1}, int64_t{1} << 16))
            ->capture_default_str();
    auto* key = cmd->add_option("--api-key", o->api_key,
                                "Require 'Authorization: Bearer KEY' (or MINFER_API_KEY)");
    cmd->add_option("--api-key-file", o->api_key_file, "Read the API key from a file")
        ->excludes(key);
    cmd->add_option("--alias", o->alias,
                    "The id clients see for the (first) model (default: OWNER/REPO:QUANT, "
                    "NAME:TAG, or the file's stem)");
    cmd->add_option("--max-models", o->max_models,
                    "Models loaded at once at most; the least recently used idle one is unloaded "
                    "to make room")
        ->check(CLI::Range(1, 64))
        ->capture_default_str();
    cmd->add_option("--memory", o->memory_gib,
                    "GiB that loaded models may take in all, weights and KV caches (default: the "
                    "memory free at start)")
        ->check(CLI::Range(0.001, 1048576.0));
    cmd->add_option("--keep-alive", o->keep_alive,
                    "How long a model stays loaded after its last request: 5m, 1h, 30s, 0 "
                    "(unload at once), -1 (keep) (default: 5m; with one MODEL, -1); requests may "
                    "set their own (ollama's keep_alive)");
    cmd->add_option("--model-options", o->model_options,
                    "One model's own settings instead of the flags': NAME,KEY=VALUE,... with keys "
                    "ctx, np, kv-cache-tokens, cache-type (e.g. 'qwen2.5:0.5b,ctx=8192,np=2'); "
                    "repeat for several models")
        ->allow_extra_args(false);  // one value each time: MODELs may follow
    cmd->add_flag("--allow-pull", o->allow_pull,
                  "Let clients pull models into the caches (/api/pull, or a request naming one "
                  "not there yet) and delete them (/api/delete)");
    cmd->add_option("--max-queue", o->max_queue,
                    "Requests that may wait for a free sequence; beyond, 503 with Retry-After")
        ->check(CLI::Range(0, 1 << 20))
        ->capture_default_str();
    cmd->add_option("--max-body", o->max_body, "Largest request body in bytes (beyond: 413)")
        ->check(CLI::Range(int64_t{1024}, int64_t{1} << 32))
        ->capture_default_str();
    cmd->add_option("--max-connections", o->max_connections,
                    "Open connections at most (beyond: 503)")
        ->check(CLI::Range(1, 1 << 16))
        ->capture_default_str();
    cmd->add_option("--cors-origin", o->cors_origin,
                    "Allow browsers on this origin (or *) to call the API (default: none)");
    auto* log_format_option = cmd->add_option("--log-format", o->log_format,
                                              "Access log: one line per request, text or json")
                                  ->check(CLI::IsMember({"text", "json"}))
                                  ->capture_default_str();
    cmd->add_flag("--no-access-log", o->no_access_log, "Do not log each request");
    cmd->add_option(
           "--request-timeout", o->request_timeout,
           "Seconds a client may take to send a request header (three times that for its body): "
           "a slow client is dropped")
        ->check(CLI::Range(0.1, 3600.0))
        ->capture_default_str();
    cmd->add_option("--shutdown-timeout", o->shutdown_timeout,
                    "Seconds running requests may take to finish after SIGTERM")
        ->check(CLI::Range(0.0, 3600.0))
        ->capture_default_str();
    cmd->add_option("--template", o->template_file,
                    "Use this Jinja chat template instead of the model's");
    cmd->add_option("-n,--n-predict", o->n_predict,
                    "Tokens per answer at most for requests without max_tokens (-1: until the "
                    "answer ends or the context is full)")
        ->check(CLI::Range(int64_t{-1}, int64_t{1} << 30))
        ->capture_default_str();
    add_sampling_flags(cmd, o->sampling);
    cmd->callback([o, prefill_chunk_option, log_format_option] {
        // Signals go to the thread below, which shuts the server down gracefully; every other
        // thread (created from here on) inherits the mask.
        sigset_t signals;
        sigemptyset(&signals);
        sigaddset(&signals, SIGINT);
        sigaddset(&signals, SIGTERM);
        pthread_sigmask(SIG_BLOCK, &signals, nullptr);
        std::signal(SIGPIPE, SIG_IGN);

        server::ServerOptions s;
        s.host = o->host;
        s.port = o->port;
        s.n_parallel = o->n_parallel;
        s.max_queue = o->max_queue;
        s.api_key = api_key_of(*o);
        s.cors_origin = o->cors_origin;
        s.log_format = o->log_format == "json" ? server::LogFormat::Json : server::LogFormat::Text;
        s.access_log = !o->no_access_log;
        s.limits.max_body_bytes = static_cast<std::size_t>(o->max_body);
        s.limits.max_connections = o->max_connections;
        s.limits.header_timeout =
            std::chrono::milliseconds(static_cast<int64_t>(o->request_timeout * 1000));
        s.limits.body_timeout = 3 * s.limits.header_timeout;  // (a body may be megabytes)
        s.shutdown_timeout =
            std::chrono::milliseconds(static_cast<int64_t>(o->shutdown_timeout * 1000));
        s.defaults = to_sampling_params(o->sampling, SamplingFlagsUse::RequestDefaults);
        s.seed_fixed = o->sampling.seed != "-1";
        if (o->n_predict == 0) throw UsageError("-n 0 would generate nothing; -1 is no limit");
        s.default_max_tokens = o->n_predict;
        std::optional<std::string> template_source;
        if (!o->template_file.empty()) {
            if (o->models.size() != 1)
                throw UsageError("--template replaces the chat template of one model: serve that "
                                 "one model with it");
            template_source = read_file(o->template_file, "the template file");
        }
        if (!o->alias.empty() && o->models.size() != 1)
            throw UsageError("--alias names one model: with several, each is named after its "
                             "file or reference");
        s.pool.max_models = o->max_models;
        if (o->memory_gib > 0) {
            s.pool.memory_bytes = static_cast<uint64_t>(o->memory_gib * 1024 * 1024 * 1024);
        } else if (const auto headroom = memory_headroom()) {
            s.pool.memory_bytes = headroom->bytes;
        }
        if (!o->keep_alive.empty()) {
            const auto keep = server::parse_keep_alive(o->keep_alive);
            if (!keep) {
                throw UsageError(concat("--keep-alive ", o->keep_alive,
                                        " is not a duration: write 5m, 1h, 30s, 0 or -1"));
            }
            s.pool.keep_alive = *keep;
        } else if (o->models.size() == 1) {
            s.pool.keep_alive = std::chrono::milliseconds(-1);
        }
        s.allow_pull = o->allow_pull;
        s.serve_cache = o->models.empty();
        server::ModelCatalog catalog = catalog_of(*o);
        apply_model_options(catalog, *o);
        check_sizes(*o, *prefill_chunk_option);
        if (o->no_access_log && log_format_option->count() > 0)
            log_warning("--log-format has no effect with --no-access-log");
        EngineOptions engine_options = to_engine_options(o->context);
        engine_options.prefill_chunk = o->prefill_chunk;
        engine_options.memory_advice =
            "; lower -np, --ctx or --kv-cache-tokens, or use --cache-type q8_0";

        auto load = [o, engine_options, template_source, n_parallel = s.n_parallel,
                     defaults = s.defaults](const server::CatalogEntry& entry,
                                            const std::atomic<bool>& cancel) {
            server::ServedModel served;
            // A model found in the caches is opened where it is (no request to its hub); one
            // named on the command line is resolved as every command does (downloaded when
            // missing; a shutdown stops the download, which resumes next time).
            const std::string reference =
                entry.in_cache && entry.file ? entry.file->string() : entry.reference;
            served.loaded = load_model_for_cli(reference, false, template_source, &cancel);
            // The default --logit-bias ids against the vocabulary, now that it is known: else
            // every request would be refused for the server's own flag.
            Sampler(defaults, static_cast<int32_t>(served.loaded.tokenizer->n_vocab()));
            EngineOptions e = engine_options;
            const server::ModelSettings& own = entry.settings;
            const int64_t n_train = served.loaded.model->hparams().n_ctx_train;
            if (own.ctx) e.n_ctx = *own.ctx;
            if (e.n_ctx == 0) e.n_ctx = std::min<int64_t>(4096, n_train);
            if (own.cache_type) e.kv_type = parse_kv_cache_type(*own.cache_type);
            served.n_parallel = own.n_parallel.value_or(n_parallel);
            const int64_t kv_tokens = own.kv_tokens.value_or(o->kv_cache_tokens);
            e.kv_tokens = kv_tokens > 0 ? kv_tokens : e.n_ctx * served.n_parallel;
            if (e.kv_tokens < e.n_ctx) {
                throw UsageError(concat("--kv-cache-tokens ", e.kv_tokens,
                                        " is less than one sequence's context of ", e.n_ctx,
                                        " tokens"));
            }
            served.engine = e;
            return served;
        };
        server::ApiServer api(s, std::move(catalog), load);
        // SIGTERM or Ctrl-C: a graceful shutdown; a second one exits at once. When run() ends
        // (or throws), the waiter is woken with `done` set and leaves without touching `api`.
        std::atomic<bool> done{false};
        std::thread signal_waiter([&api, &done, signals] {
            int sig = 0;
            sigwait(&signals, &sig);
            if (done) return;
            log_info(concat("minfer: ", sig == SIGTERM ? "SIGTERM" : "SIGINT",
                            ": finishing running requests, then exiting"));
            api.shutdown();
            sigwait(&signals, &sig);
            if (done) return;
            std::_Exit(sig == SIGINT ? 130 : 143);
        });
        struct StopWaiter {
            std::atomic<bool>& done;
            std::thread& waiter;
            ~StopWaiter() {
                done = true;
                pthread_kill(waiter.native_handle(), SIGTERM);
                waiter.join();
            }
        } stop_waiter{done, signal_waiter};
        api.run();
        log_info("minfer: server stopped");
    });
}

}  // namespace minfer::cli
