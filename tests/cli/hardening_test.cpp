// The command line against hostile users and environments: exit codes, failed writes, directories
// where files are expected, memory asked for by the user, token-list forms, options that would
// do nothing, Ctrl-C. Each class is tested over every command it applies to.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/fixtures.h"
#include "common/process.h"

namespace minfer {
namespace {

using test::run_minfer;
using test::run_minfer_process;

int count_lines(const std::string& s) {
    return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

bool contains(const std::string& haystack, const std::string& needle) {
    return haystack.find(needle) != std::string::npos;
}

// One error line on stderr: "minfer: error: ..." and nothing else (no status line after it).
void expect_one_error_line(const test::CommandResult& r, const std::string& fragment) {
    EXPECT_TRUE(contains(r.err, "minfer: error: ")) << r.err;
    EXPECT_TRUE(contains(r.err, fragment)) << r.err;
    const auto line_start = r.err.find("minfer: error: ");
    if (line_start != std::string::npos) {
        EXPECT_EQ(r.err.find('\n', line_start), r.err.size() - 1) << r.err;
    }
}

// ---- exit codes ----

const std::vector<std::string> kCommands = {"info",     "run",      "chat",       "score",
                                            "bench",    "tokenize", "detokenize", "template",
                                            "quantize", "serve",    "bench-serve"};

TEST(ExitCodes, UnknownFlagIsAUsageErrorForEveryCommand) {
    for (const auto& command : kCommands) {
        const auto r = run_minfer({command, "--no-such-flag"});
        EXPECT_EQ(r.exit_code, 2) << command << ": " << r.err;
        EXPECT_TRUE(contains(r.err, "minfer: error:")) << command << ": " << r.err;
        EXPECT_EQ(count_lines(r.err), 1) << command << ": " << r.err;
    }
    EXPECT_EQ(run_minfer({"no-such-command"}).exit_code, 2);
}

TEST(ExitCodes, HelpAndVersionSucceed) {
    EXPECT_EQ(run_minfer({"--help"}).exit_code, 0);
    EXPECT_EQ(run_minfer({"--version"}).exit_code, 0);
    for (const auto& command : kCommands) {
        const auto r = run_minfer({command, "--help"});
        EXPECT_EQ(r.exit_code, 0) << command;
        EXPECT_TRUE(contains(r.out, "Usage")) << command << ": " << r.out;
    }
}

TEST(ExitCodes, BadValuesAreUsageErrors) {
    MINFER_REQUIRE_FIXTURE(model, "models/stories260K.gguf");
    const std::string m = model.string();
    const std::vector<std::vector<std::string>> cases = {
        {"run", m, "-p", "x", "-n", "-5"},
        {"run", m, "-p", "x", "--temp", "-1"},
        {"run", m, "-p", "x", "--temp", "nan"},
        {"run", m, "-p", "x", "--top-p", "2"},
        {"run", m, "-p", "x", "--seed", "18446744073709551616"},
        {"run", m, "-p", "x", "--seed", "-2"},
        {"run", m, "-p", "x", "--logit-bias", "5+nan"},
        {"run", m, "-p", "x", "--logit-bias", "5+"},
        {"run", m, "-p", "x", "--cache-type", "q4_0"},
        {"run", m, "-p", "x", "-c", "0"},
        {"run", m},
        {"chat", m, "--temp", "-0.5"},
        {"score", m},
        {"score", m, "--tokens", "1,2", "--top", "0"},
        {"bench", m, "-p", "x"},
        {"bench", m, "-r", "0"},
        {"quantize", m, "/tmp/minfer-never-written.gguf", "q9_9"},
    };
    for (const auto& args : cases) {
        const auto r = run_minfer(args);
        std::string shown;
        for (const auto& a : args) shown += a + " ";
        EXPECT_EQ(r.exit_code, 2) << shown << "\n" << r.err;
        EXPECT_EQ(count_lines(r.err), 1) << shown << "\n" << r.err;
    }
}

TEST(ExitCodes, RuntimeErrorsExitOne) {
    MINFER_REQUIRE_FIXTURE(model, "models/stories260K.gguf");
    test::TempDir dir;
    const auto r = run_minfer({"run", (dir / "missing.gguf").string(), "-p", "x"});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    expect_one_error_line(r, "missing.gguf");
    // A prompt longer than the context is a runtime error of this input, not a bad flag.
    const auto fit = run_minfer({"run", model.string(), "--raw", "-p",
                                 "Once upon a time there was a little girl", "-c", "4"});
    EXPECT_EQ(fit.exit_code, 1) << fit.err;
    EXPECT_TRUE(contains(fit.err, "does not fit the context")) << fit.err;
}

// ---- contradictory options and options without effect ----

TEST(SilentAcceptance, ContradictoryOptionsAreRefused) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-qwen2-f16.gguf");
    const std::string m = model.string();
    const std::vector<std::vector<std::string>> cases = {
        {"run", m, "-p", "x", "--raw", "--system", "be brief"},
        {"run", m, "--tokens", "1,2", "--system", "be brief"},
        {"run", m, "-p", "x", "--raw", "--template", "/dev/null"},
        {"run", m, "-p", "x", "--json", "--dump-graph"},
        {"score", m, "--tokens", "1,2", "--json", "--dump-graph"},
        {"run", m, "-p", "x", "-f", "/dev/null"},
    };
    for (const auto& args : cases) {
        const auto r = run_minfer(args);
        EXPECT_EQ(r.exit_code, 2) << args[3] << " " << args.back() << "\n" << r.err;
        EXPECT_TRUE(contains(r.err, "excludes")) << r.err;
    }
}

TEST(SilentAcceptance, OptionsWithoutEffectAreSaid) {
    MINFER_REQUIRE_FIXTURE(model, "models/stories260K.gguf");  // no chat template
    const auto system = run_minfer(
        {"run", model.string(), "-p", "Once", "-n", "2", "--temp", "0", "--system", "be brief"});
    EXPECT_EQ(system.exit_code, 0) << system.err;
    EXPECT_TRUE(contains(system.err, "warning: --system is ignored")) << system.err;
    for (const char* flag : {"--top-k", "--top-p", "--min-p", "--seed"}) {
        const auto r = run_minfer(
            {"run", model.string(), "--raw", "-p", "Once", "-n", "2", "--temp", "0", flag, "1"});
        EXPECT_EQ(r.exit_code, 0) << r.err;
        EXPECT_TRUE(contains(r.err, std::string("warning: ") + flag + " has no effect"))
            << flag << ": " << r.err;
    }
    // The whole 64-bit seed range is accepted, and the same seed gives the same tokens.
    const std::vector<std::string> seeded = {
        "run",    model.string(),         "--raw", "-p", "Once", "-n", "8",
        "--seed", "18446744073709551615", "--json"};
    const auto a = run_minfer(seeded), b = run_minfer(seeded);
    ASSERT_EQ(a.exit_code, 0) << a.err;
    EXPECT_EQ(nlohmann::json::parse(a.out)["seed"].get<uint64_t>(), 18446744073709551615ull);
    EXPECT_EQ(nlohmann::json::parse(a.out)["tokens"], nlohmann::json::parse(b.out)["tokens"]);
}

// ---- failed writes ----

TEST(WriteErrors, FullDiskFailsEveryPrintingCommand) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-qwen2-f16.gguf");
    const std::string m = model.string();
    const std::vector<std::vector<std::string>> cases = {
        {"info", m},
        {"info", m, "--json"},
        {"run", m, "--raw", "-p", "Hello", "-n", "4", "--temp", "0"},
        {"run", m, "--raw", "-p", "Hello", "-n", "4", "--temp", "0", "--json"},
        {"run", m, "-p", "Hello", "--dump-graph"},
        {"score", m, "--tokens", "1,2,3"},
        {"tokenize", m, "Hello world"},
        {"detokenize", m, "1,2,3"},
        {"template", m, "--user", "Hi"},
        {"bench", m, "-p", "4", "-n", "2", "-r", "1", "--no-roofline", "-t", "1"},
    };
    for (const auto& args : cases) {
        test::ProcessOptions options;
        options.stdout_path = "/dev/full";
        const auto r = run_minfer_process(args, options);
        EXPECT_EQ(r.exit_code, 1) << args[0] << ": " << r.err;
        EXPECT_TRUE(contains(r.err, "minfer: error: write error: No space left on device"))
            << args[0] << ": " << r.err;
    }
}

TEST(WriteErrors, HelpAndVersionFailOnAFullDisk) {
    test::ProcessOptions options;
    options.stdout_path = "/dev/full";
    const std::vector<std::vector<std::string>> cases = {
        {"--help"},          {"--version"},           {"run", "--help"},
        {"serve", "--help"}, {"help", "bench-serve"}, {}};
    for (const auto& args : cases) {
        const auto r = run_minfer_process(args, options);
        EXPECT_EQ(r.exit_code, 1) << (args.empty() ? "" : args[0]) << ": " << r.err;  // was 0
        EXPECT_TRUE(contains(r.err, "minfer: error: write error: No space left on device"))
            << r.err;
    }
}

TEST(WriteErrors, ClosedPipeWithSigpipeIgnoredFails) {
    MINFER_REQUIRE_FIXTURE(model, "models/stories260K.gguf");
    test::ProcessOptions options;
    options.stdout_closed_pipe = true;
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"run", model.string(), "--raw", "-p", "", "-n", "400", "--temp",
                                   "0"},
          std::vector<std::string>{"info", model.string(), "--full"}}) {
        const auto r = run_minfer_process(args, options);
        EXPECT_EQ(r.exit_code, 1) << args[0] << ": " << r.err;
        EXPECT_TRUE(contains(r.err, "write error: Broken pipe")) << r.err;
    }
}

// ---- directories and other non-files where a file is expected ----

TEST(InputFiles, DirectoriesAreRefusedByName) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-qwen2-f16.gguf");
    test::TempDir dir;
    const std::string d = dir.path().string();
    const std::string m = model.string();
    const std::vector<std::vector<std::string>> cases = {
        {"run", m, "-f", d},
        {"run", m, "-p", "x", "--template", d},
        {"chat", m, "--template", d},
        {"tokenize", m, "-f", d},
        {"template", m, "--messages", d},
        {"template", m, "--user", "Hi", "--tools", d},
        {"template", m, "--user", "Hi", "--template", d},
    };
    for (const auto& args : cases) {
        const auto r = run_minfer(args, "Hello\n");
        EXPECT_EQ(r.exit_code, 1) << args[0] << " " << args[2] << ": " << r.err;
        expect_one_error_line(r, "'" + d + "': it is a directory");
    }
}

TEST(InputFiles, AModelThatIsAFifoIsRefusedNotWaitedFor) {
    test::TempDir dir;
    const auto fifo = dir / "model.gguf";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
    const std::string f = fifo.string();
    const std::vector<std::vector<std::string>> cases = {
        {"info", f},
        {"run", f, "-p", "x"},
        {"tokenize", f, "x"},
        {"quantize", f, (dir / "out.gguf").string(), "q8_0"},
        {"serve", f, "--port", "0"},
    };
    for (const auto& args : cases) {
        test::ProcessOptions options;
        options.timeout = std::chrono::seconds(20);  // opening it used to wait for a writer
        const auto r = run_minfer_process(args, options);
        EXPECT_EQ(r.exit_code, 1) << args[0] << ": " << r.err;
        EXPECT_TRUE(contains(r.err, "minfer: error: " + f + ": not a regular file"))
            << args[0] << ": " << r.err;
    }
}

TEST(InputFiles, ServeRefusesDirectoriesBeforeListening) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-qwen2-f16.gguf");
    test::TempDir dir;
    const std::string d = dir.path().string();
    for (const char* flag : {"--template", "--api-key-file"}) {
        test::ProcessOptions options;
        options.timeout = std::chrono::seconds(30);  // a server that started would be killed
        const auto r =
            run_minfer_process({"serve", model.string(), "--port", "0", flag, d}, options);
        EXPECT_EQ(r.exit_code, 1) << flag << ": " << r.err;
        expect_one_error_line(r, "'" + d + "': it is a directory");
    }
}

TEST(InputFiles, ChatRefusesAStdinThatIsADirectoryOrEndless) {
    MINFER_REQUIRE_FIXTURE(model, "models/stories260K.gguf");
    test::TempDir dir;
    test::ProcessOptions options;
    options.stdin_path = dir.path().string();
    const auto directory = run_minfer_process({"chat", model.string()}, options);
    EXPECT_EQ(directory.exit_code, 1) << directory.err;  // was 0: an empty script
    expect_one_error_line(directory, "cannot read standard input: it is a directory");
    EXPECT_FALSE(contains(directory.err, "loaded")) << "refused before loading";

    // A line without end: refused at 64 MiB (it used to grow until the machine ran out).
    options.stdin_path = "/dev/zero";
    options.address_space_limit = 2ull << 30;
    const auto endless = run_minfer_process({"chat", model.string()}, options);
    EXPECT_EQ(endless.exit_code, 1) << endless.err;
    expect_one_error_line(endless, "a line of standard input holds more than the 67108864 bytes");
}

TEST(InputFiles, EndlessInputIsRefusedNotRead) {
    MINFER_REQUIRE_FIXTURE(model, "models/stories260K.gguf");
    const auto r = run_minfer({"tokenize", model.string(), "-f", "/dev/zero"});
    EXPECT_EQ(r.exit_code, 1);
    expect_one_error_line(r, "more than the");
}

// ---- memory asked for by the user ----

TEST(Memory, AContextBeyondTheMachineIsRefusedWithItsSize) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-llama-f16.gguf");
    // 2^24 positions x 4 layers x (K + V) x 128 values x 2 bytes = 32 GiB, under a 4 GiB limit.
    test::ProcessOptions options;
    options.address_space_limit = 4ull << 30;
    for (const std::string command : {"run", "score", "chat"}) {
        std::vector<std::string> args = {command, model.string(), "--ctx", "16777216"};
        if (command == "run") args.insert(args.end(), {"-p", "Hello", "--raw"});
        if (command == "score") args.insert(args.end(), {"--tokens", "1,2"});
        options.stdin_text = "Hello\n";
        const auto r = run_minfer_process(args, options);
        EXPECT_EQ(r.exit_code, 1) << command << ": " << r.err;
        EXPECT_TRUE(contains(r.err, "a KV cache of 16777216 tokens (f16) needs 32.0 GiB"))
            << command << ": " << r.err;
        EXPECT_TRUE(contains(r.err, "RLIMIT_AS")) << r.err;
        EXPECT_FALSE(contains(r.err, "bad_alloc")) << r.err;
    }
}

TEST(Memory, ABatchBeyondTheMachineIsRefusedWithItsSize) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-qwen2-f16.gguf");
    // 20000 positions scored in one batch: their logits alone (20000 x 8195 floats) are 625 MiB,
    // beyond a 768 MiB address space with the model and the threads mapped.
    std::string ids = "1";
    for (int i = 1; i < 20000; ++i) ids += "," + std::to_string(1 + i % 500);
    test::ProcessOptions options;
    options.address_space_limit = 768ull << 20;
    const auto r = run_minfer_process({"score", model.string(), "--tokens", ids, "--ctx", "20000",
                                       "-b", "20000", "-t", "1", "--top", "1"},
                                      options);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_TRUE(
        contains(r.err, "minfer: error: a batch of 20000 tokens (20000 with logits) needs "))
        << r.err;
    EXPECT_TRUE(contains(r.err, "RLIMIT_AS")) << r.err;
    EXPECT_TRUE(contains(r.err, "; lower --batch (-b)")) << r.err;
    EXPECT_FALSE(contains(r.err, "out of memory")) << r.err;
}

TEST(Memory, BenchSequencesBeyondTheBatchAreRefused) {
    MINFER_REQUIRE_FIXTURE(model, "models/stories260K.gguf");
    const auto r = run_minfer({"bench", model.string(), "-np", "1,1024", "-p", "8", "-n", "4"});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    expect_one_error_line(r, "-np 1024 is more than -b 512: one step decodes at most -b sequences");
    const auto nothing = run_minfer({"bench", model.string(), "-np", "2", "-p", "8", "-n", "0"});
    EXPECT_EQ(nothing.exit_code, 2) << nothing.err;
    expect_one_error_line(nothing, "with -np every test decodes, and every -n is 0");
}

TEST(Memory, AContextBeyondTrainingIsWarnedAbout) {
    MINFER_REQUIRE_FIXTURE(model, "models/stories260K.gguf");  // trained for 512 positions
    const auto r = run_minfer(
        {"run", model.string(), "--raw", "-p", "Once", "-n", "2", "--temp", "0", "-c", "5000"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.err, "warning: a context of 5000 tokens exceeds the")) << r.err;
}

// ---- token lists: one syntax everywhere, checked before loading ----

TEST(TokenLists, EveryPrintedFormIsAcceptedEverywhere) {
    MINFER_REQUIRE_FIXTURE(model, "models/stories260K.gguf");
    const std::string m = model.string();
    const auto ids = run_minfer({"tokenize", m, "Once upon a time", "--ids"});
    ASSERT_EQ(ids.exit_code, 0) << ids.err;
    std::string json_form = ids.out;
    json_form.pop_back();  // the newline
    const std::vector<int32_t> list = nlohmann::json::parse(json_form);
    std::string comma_form, space_form;
    for (int32_t id : list) {
        comma_form += (comma_form.empty() ? "" : ",") + std::to_string(id);
        space_form += (space_form.empty() ? "" : " ") + std::to_string(id);
    }
    std::string expected_run, expected_score, expected_text;
    for (const std::string& form : {json_form, comma_form, space_form}) {
        const auto run = run_minfer({"run", m, "--tokens", form, "-n", "5", "--temp", "0"});
        ASSERT_EQ(run.exit_code, 0) << form << ": " << run.err;
        const auto score = run_minfer({"score", m, "--tokens", form, "--json"});
        ASSERT_EQ(score.exit_code, 0) << form << ": " << score.err;
        const auto text = run_minfer({"detokenize", m, form});
        ASSERT_EQ(text.exit_code, 0) << form << ": " << text.err;
        if (expected_run.empty()) {
            expected_run = run.out, expected_score = score.out, expected_text = text.out;
        }
        EXPECT_EQ(run.out, expected_run) << form;
        EXPECT_EQ(score.out, expected_score) << form;
        EXPECT_EQ(text.out, expected_text) << form;
    }
    EXPECT_EQ(expected_text, "<s> Once upon a time\n");
}

TEST(TokenLists, MalformedListsAreRefusedBeforeTheModelIsLoaded) {
    test::TempDir dir;
    const std::string missing = (dir / "missing.gguf").string();  // never opened
    for (const std::string list : {"1,x,3", "[1, 2", "-1", "4294967296", "", "[]", "1.5"}) {
        for (const auto& args : {std::vector<std::string>{"run", missing, "--tokens", list},
                                 std::vector<std::string>{"score", missing, "--tokens", list},
                                 std::vector<std::string>{"detokenize", missing, list}}) {
            const auto r = run_minfer(args);
            EXPECT_EQ(r.exit_code, 2) << args[0] << " '" << list << "': " << r.err;
            EXPECT_FALSE(contains(r.err, "missing.gguf")) << r.err;
        }
    }
}

TEST(TokenLists, IdsOutsideTheVocabularyAreNamed) {
    MINFER_REQUIRE_FIXTURE(model, "models/stories260K.gguf");
    for (const auto& args : {std::vector<std::string>{"run", model.string(), "--tokens", "1,512"},
                             std::vector<std::string>{"score", model.string(), "--tokens", "1,512"},
                             std::vector<std::string>{"detokenize", model.string(), "1,512"}}) {
        const auto r = run_minfer(args);
        EXPECT_EQ(r.exit_code, 2) << args[0] << ": " << r.err;
        expect_one_error_line(r, "token id 512 is out of range: the model has 512 tokens");
    }
}

// ---- terminal safety and formats in what commands print ----

TEST(TerminalSafety, OutputFileNamesAreEscaped) {
    MINFER_REQUIRE_FIXTURE(input, "models/tiny-llama-f16.gguf");
    test::TempDir dir;
    const std::string odd = (dir / "q\x1b[31m.gguf").string();
    const auto r = run_minfer({"quantize", input.string(), odd, "q8_0", "-t", "1"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "q\\x1b[31m.gguf: ")) << r.out;
    EXPECT_FALSE(contains(r.out, "\x1b")) << r.out;  // was printed raw
}

TEST(Formats, BenchCsvQuotesAndEscapesFileNames) {
    MINFER_REQUIRE_FIXTURE(model, "models/stories260K.gguf");
    test::TempDir dir;
    const auto odd = dir / "a\"b\x1b.gguf";
    std::filesystem::create_symlink(model, odd);
    const auto r =
        run_minfer({"bench", odd.string(), "-p", "0", "-n", "2", "-r", "1", "-t", "1", "--csv"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(contains(r.out, "\x1b")) << r.out;
    // RFC 4180: a quote inside a quoted field is doubled (it used to end the field).
    EXPECT_TRUE(contains(r.out, ",\"" + dir.path().string() + "/a\"\"b\\x1b.gguf\",")) << r.out;
}

// ---- chat from a script fails like run ----

TEST(ChatScript, AMessageBeyondTheContextFailsTheCommand) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-qwen2-f16.gguf");
    // The rendered conversation no longer fits.
    const auto prompt_too_long =
        run_minfer({"chat", model.string(), "--ctx", "16", "--temp", "0"}, "Hello there\n");
    EXPECT_EQ(prompt_too_long.exit_code, 1) << prompt_too_long.err;
    expect_one_error_line(prompt_too_long, "no longer fits the context of 16 tokens");
    // The answer runs into the end of the context (the end-of-sequence token 2 banned).
    MINFER_REQUIRE_FIXTURE(llama, "models/tiny-llama-f16.gguf");
    const auto full = run_minfer(
        {"chat", llama.string(), "--ctx", "100", "--temp", "0", "--logit-bias", "2-inf"}, "Hi\n");
    EXPECT_EQ(full.exit_code, 1) << full.err;
    expect_one_error_line(full, "the context of 100 tokens is full");
}

// ---- Ctrl-C ----

TEST(Interrupt, CtrlCEndsWith130AfterPrintingWhatItHas) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-llama-f16.gguf");
    test::ProcessOptions options;
    options.interrupt_after = std::chrono::milliseconds(1500);
    const auto run = run_minfer_process(
        {"run", model.string(), "--raw", "-p", "Once", "-n", "60000", "-c", "60000", "--temp", "0"},
        options);
    EXPECT_EQ(run.exit_code, 130) << run.err;
    EXPECT_FALSE(run.out.empty());
    EXPECT_TRUE(contains(run.err, "stopped by  interrupted")) << run.err;

    const auto json = run_minfer_process({"run", model.string(), "--raw", "-p", "Once", "-n",
                                          "60000", "-c", "60000", "--temp", "0", "--json"},
                                         options);
    EXPECT_EQ(json.exit_code, 130) << json.err;
    EXPECT_EQ(nlohmann::json::parse(json.out)["stop_reason"], "interrupted");

    options.stdin_text = "Tell me a long story\n";
    const auto chat = run_minfer_process(
        {"chat", model.string(), "-c", "60000", "-n", "60000", "--temp", "0"}, options);
    EXPECT_EQ(chat.exit_code, 130) << chat.err;
}

}  // namespace
}  // namespace minfer
