#include "hub/hub_harness.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <chrono>
#include <thread>

#include "core/file_io.h"

extern char** environ;

namespace minfer::test {
namespace {

// Runs `argv` with `env` laid over this process's environment ("" removes a variable),
// stdout and stderr into files. Returns the child's pid.
pid_t spawn(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
            const std::filesystem::path& out, const std::filesystem::path& err) {
    std::vector<std::string> env_storage;
    for (char** e = environ; *e != nullptr; ++e) {
        const std::string entry = *e;
        const std::string name = entry.substr(0, entry.find('='));
        if (!env.contains(name)) env_storage.push_back(entry);
    }
    for (const auto& [name, value] : env)
        if (!value.empty()) env_storage.push_back(name + "=" + value);
    std::vector<std::string> args = argv;
    std::vector<char*> c_args, c_env;
    for (auto& a : args) c_args.push_back(a.data());
    c_args.push_back(nullptr);
    for (auto& e : env_storage) c_env.push_back(e.data());
    c_env.push_back(nullptr);
    const std::string out_path = out.string(), err_path = err.string();
    const pid_t pid = ::fork();
    if (pid == 0) {
        const int in = ::open("/dev/null", O_RDONLY);
        const int o = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        const int e = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (in < 0 || o < 0 || e < 0) ::_exit(126);
        ::dup2(in, 0);
        ::dup2(o, 1);
        ::dup2(e, 2);
        ::execve(c_args[0], c_args.data(), c_env.data());
        ::_exit(127);
    }
    return pid;
}

int wait_for(pid_t pid, std::chrono::steady_clock::time_point deadline, bool& timed_out) {
    int status = 0;
    for (;;) {
        const pid_t done = ::waitpid(pid, &status, WNOHANG);
        if (done == pid) break;
        if (std::chrono::steady_clock::now() > deadline) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
            timed_out = true;
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

FakeHub::FakeHub(const nlohmann::json& config) : config_(config) {
    config_["log"] = (dir_ / "requests.jsonl").string();
    { std::ofstream(dir_ / "config.json") << config_.dump(); }
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe");
    const std::string script = std::string(MINFER_SOURCE_DIR) + "/tests/hub/fake_hub.py";
    const std::string config_path = (dir_ / "config.json").string();
    pid_ = ::fork();
    if (pid_ == 0) {
        ::dup2(fds[1], 1);
        ::close(fds[0]);
        ::close(fds[1]);
        const int null_fd = ::open("/dev/null", O_RDONLY);
        ::dup2(null_fd, 0);
        ::execlp("python3", "python3", script.c_str(), config_path.c_str(), nullptr);
        ::_exit(127);
    }
    ::close(fds[1]);
    std::string line;
    char c;
    while (::read(fds[0], &c, 1) == 1 && c != '\n') line += c;
    ::close(fds[0]);
    if (std::sscanf(line.c_str(), "READY %d %d", &api_port_, &data_port_) != 2)
        throw std::runtime_error("the fake hub did not start: '" + line + "'");
}

FakeHub::~FakeHub() {
    if (pid_ > 0) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
    }
}

void FakeHub::set_config(nlohmann::json config) {
    config["log"] = config_["log"];
    config_ = std::move(config);
    const auto temp = dir_ / "config.json.new";
    { std::ofstream(temp) << config_.dump(); }
    std::filesystem::rename(temp, dir_ / "config.json");
    // The server compares modification times in nanoseconds; make sure the next one differs.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

std::vector<nlohmann::json> FakeHub::requests() const {
    std::vector<nlohmann::json> out;
    std::ifstream in(dir_ / "requests.jsonl");
    std::string line;
    while (std::getline(in, line))
        if (!line.empty()) out.push_back(nlohmann::json::parse(line));
    return out;
}

void FakeHub::clear_requests() const {
    // The hub records a data request after its last byte went out, which a client that read it
    // and exited may not have waited for: let such a record land before the log is cleared.
    // (API replies are recorded before they are sent.)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::ofstream(dir_ / "requests.jsonl", std::ios::trunc);
}

HubSandbox::HubSandbox(const FakeHub& hub) {
    std::filesystem::create_directories(home());
    env = {
        {"HF_ENDPOINT", hub.url()},
        {"MINFER_OLLAMA_REGISTRY", hub.url()},
        {"HF_HUB_CACHE", hf_cache().string()},
        {"MINFER_CACHE", minfer_cache().string()},
        {"HF_HOME", (dir_ / "hf-home").string()},
        {"HOME", home().string()},
        {"XDG_CACHE_HOME", (dir_ / "xdg-cache").string()},
        {"OLLAMA_MODELS", (dir_ / "ollama-models").string()},
        {"HF_TOKEN", ""},
        {"HF_TOKEN_PATH", ""},
        {"HF_HUB_OFFLINE", ""},
        {"MINFER_DEFAULT_MODEL", ""},
        {"MINFER_HUB_STALL_TIMEOUT", "1"},
        {"MINFER_HUB_CONNECT_TIMEOUT", "5"},
        {"MINFER_HUB_RETRIES", "3"},
        {"MINFER_HUB_RETRY_DELAY", "0.05"},
        {"http_proxy", ""},
        {"https_proxy", ""},
        {"HTTP_PROXY", ""},
        {"HTTPS_PROXY", ""},
        {"ALL_PROXY", ""},
    };
}

MinferRun HubSandbox::run(const std::vector<std::string>& args,
                          std::chrono::seconds timeout) const {
    auto child = start(args);
    return child->wait(timeout);
}

MinferRun HubSandbox::run_program(const std::vector<std::string>& argv,
                                  std::chrono::seconds timeout) const {
    return start_argv(argv)->wait(timeout);
}

std::unique_ptr<HubSandbox::Child> HubSandbox::start(const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {MINFER_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    return start_argv(argv);
}

std::unique_ptr<HubSandbox::Child> HubSandbox::start_argv(
    const std::vector<std::string>& argv) const {
    auto child = std::make_unique<Child>();
    const int n = runs_++;
    child->out_ = dir_ / ("out-" + std::to_string(n));
    child->err_ = dir_ / ("err-" + std::to_string(n));
    child->start_ = std::chrono::steady_clock::now();
    child->pid_ = spawn(argv, env, child->out_, child->err_);
    return child;
}

HubSandbox::Child::~Child() {
    if (!waited_ && pid_ > 0) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
    }
}

void HubSandbox::Child::signal(int sig) const {
    ::kill(pid_, sig);
}

MinferRun HubSandbox::Child::wait(std::chrono::seconds timeout) {
    bool timed_out = false;
    MinferRun r;
    r.exit_code = wait_for(pid_, start_ + timeout, timed_out);
    waited_ = true;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    r.out = read_file(out_);
    r.err = read_file(err_);
    if (timed_out) r.err += "\n(killed after the test's timeout)";
    return r;
}

std::string HubSandbox::Child::err_so_far() const {
    std::error_code ec;
    // The child creates the file after the fork: it may not be there yet.
    return std::filesystem::exists(err_, ec) ? read_file(err_) : std::string();
}

std::string sha256sum(const std::filesystem::path& file) {
    const std::string cmd = "sha256sum '" + file.string() + "'";
    FILE* p = ::popen(cmd.c_str(), "r");
    if (p == nullptr) return "";
    char buf[65] = {0};
    const std::size_t n = std::fread(buf, 1, 64, p);
    ::pclose(p);
    return std::string(buf, n);
}

std::vector<std::filesystem::path> files_containing(const std::filesystem::path& dir,
                                                    const std::string& needle) {
    std::vector<std::filesystem::path> hits;
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
        std::error_code e2;
        if (it->is_symlink(e2)) {
            // A link's target is text too (it must not hold the token either).
            if (std::filesystem::read_symlink(it->path(), e2).string().find(needle) !=
                std::string::npos)
                hits.push_back(it->path());
            continue;
        }
        if (!it->is_regular_file(e2)) continue;
        if (it->path().string().find(needle) != std::string::npos) hits.push_back(it->path());
        std::ifstream in(it->path(), std::ios::binary);
        std::stringstream ss;
        ss << in.rdbuf();
        if (ss.str().find(needle) != std::string::npos) hits.push_back(it->path());
    }
    return hits;
}

std::string commit_id(int seed) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string id;
    uint32_t x = 2654435761u * static_cast<uint32_t>(seed + 1);
    for (int i = 0; i < 40; ++i) {
        x = x * 1103515245u + 12345u;
        id += kHex[(x >> 16) & 15];
    }
    return id;
}

bool wait_until(const std::function<bool()>& predicate, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
        if (predicate()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return predicate();
}

}  // namespace minfer::test
