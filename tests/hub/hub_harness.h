#pragma once
// The hub tests' setting: a fake hub and registry (tests/hub/fake_hub.py) on local ports, a
// private cache and home per test, and the minfer binary run against them with an environment
// that points nowhere else (HF_ENDPOINT, MINFER_OLLAMA_REGISTRY, HF_HUB_CACHE, MINFER_CACHE,
// HOME, OLLAMA_MODELS; no token unless a test sets one; short stall and retry times).

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/fixtures.h"

namespace minfer::test {

class FakeHub {
  public:
    explicit FakeHub(const nlohmann::json& config);
    ~FakeHub();
    FakeHub(const FakeHub&) = delete;
    FakeHub& operator=(const FakeHub&) = delete;

    std::string url() const { return "http://127.0.0.1:" + std::to_string(api_port_); }
    int data_port() const { return data_port_; }
    // Rewrites the configuration (the server rereads it; fault counters start over).
    void set_config(nlohmann::json config);
    const nlohmann::json& config() const { return config_; }
    // Every request logged so far, in order.
    std::vector<nlohmann::json> requests() const;
    void clear_requests() const;

  private:
    TempDir dir_;
    nlohmann::json config_;
    pid_t pid_ = -1;
    int api_port_ = 0, data_port_ = 0;
};

struct MinferRun {
    int exit_code = -1;
    std::string out, err;
    double seconds = 0;
};

// A cache, a home and the environment that points minfer at a FakeHub.
class HubSandbox {
  public:
    explicit HubSandbox(const FakeHub& hub);
    std::filesystem::path hf_cache() const { return dir_ / "hf-cache"; }
    std::filesystem::path minfer_cache() const { return dir_ / "minfer-cache"; }
    std::filesystem::path home() const { return dir_ / "home"; }
    std::filesystem::path path(const std::string& name) const { return dir_ / name; }
    // Variables for the next runs ("" unsets one).
    std::map<std::string, std::string> env;

    MinferRun run(const std::vector<std::string>& args,
                  std::chrono::seconds timeout = std::chrono::seconds(60)) const;

    // Runs another program (argv[0] a path) in the same environment.
    MinferRun run_program(const std::vector<std::string>& argv,
                          std::chrono::seconds timeout = std::chrono::seconds(60)) const;

    // A minfer started in the background.
    class Child {
      public:
        ~Child();
        void signal(int sig) const;
        MinferRun wait(std::chrono::seconds timeout = std::chrono::seconds(60));
        // What it has written to stderr so far (a server's "serving ..." line).
        std::string err_so_far() const;
        pid_t pid() const { return pid_; }

      private:
        friend class HubSandbox;
        pid_t pid_ = -1;
        std::filesystem::path out_, err_;
        std::chrono::steady_clock::time_point start_;
        bool waited_ = false;
    };
    std::unique_ptr<Child> start(const std::vector<std::string>& args) const;

  private:
    std::unique_ptr<Child> start_argv(const std::vector<std::string>& argv) const;

    TempDir dir_;
    mutable int runs_ = 0;
};

// sha256 of a file, lowercase hex, from coreutils' sha256sum (an independent reference: never
// the hub layer's own hasher).
std::string sha256sum(const std::filesystem::path& file);

// All files under `dir` (recursively) whose bytes contain `needle`.
std::vector<std::filesystem::path> files_containing(const std::filesystem::path& dir,
                                                    const std::string& needle);

// A 40-digit commit id made from a seed.
std::string commit_id(int seed);

// Waits until `predicate` holds, polling every 10 ms; false after `timeout`.
bool wait_until(const std::function<bool()>& predicate, std::chrono::milliseconds timeout);

}  // namespace minfer::test
