#pragma once
// Executes a parsed template: scopes, statements, expressions, macros and loops, with hard
// limits on steps, output size, memory and call depth so that no template can hang or exhaust
// memory. Errors come out as TemplateError with the template line and column.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "jinja/jinja_ast.h"
#include "jinja/jinja_ops.h"
#include "jinja/jinja_value.h"

namespace minfer::jinja {

// A render failure: "line 3, column 12: 'dict object' has no attribute 'x'".
class TemplateError : public Error {
  public:
    using Error::Error;
};

struct RenderLimits {
    std::size_t max_output_bytes = std::size_t{64} << 20;
    // Work: bytes of strings and items of lists (jinja_ops.h's kWorkUnitsPerItem each) made or
    // processed. Both this and the steps are sized to stop a hostile template within about half
    // a second of CPU on a 2-core development VM (bench_chat's render_hostile), while a real
    // template with a 200-message conversation and tools takes under a tenth of either
    // (tests/chat/fixture_renders_test.cpp).
    uint64_t max_work_units = uint64_t{64} << 20;
    uint64_t max_steps = 2'000'000;  // statements, expressions, loop iterations
    int max_call_depth = 200;        // nested macro calls
};

struct RenderOptions {
    RenderLimits limits;
    // The clock strftime_now reads (as UTC); nullopt: the local time now.
    std::optional<std::chrono::system_clock::time_point> now;
};

// One scope: a template, a macro call, a loop iteration or a with block.
struct Frame {
    std::unordered_map<std::string, Value> vars;
    std::shared_ptr<Frame> parent;
};

class Interpreter {
  public:
    Interpreter(const RenderOptions& options, const Dict& variables);

    std::string render(const Body& body);

    Budget& budget() { return budget_; }
    const RenderOptions& options() const { return options_; }
    void step();  // counts one unit of work against max_steps

    Value call(const Value& callee, CallArgs& args);
    Value apply_filter(const std::string& name, const Value& input, CallArgs& args);
    bool apply_test(const std::string& name, const Value& input, CallArgs& args);

    // Used by macro and loop objects.
    Value invoke_macro(const Stmt& def, const std::shared_ptr<Frame>& closure, CallArgs& args);
    std::string run_loop(const Stmt& loop, const Value& iterable,
                         const std::shared_ptr<Frame>& frame, int depth);

  private:
    enum class Flow { Normal, Break, Continue };

    Flow exec_body(const Body& body, const std::shared_ptr<Frame>& frame, std::string& out);
    Flow exec(const Stmt& stmt, const std::shared_ptr<Frame>& frame, std::string& out);
    void exec_for(const Stmt& stmt, const std::shared_ptr<Frame>& frame, std::string& out);
    void exec_set(const Stmt& stmt, const std::shared_ptr<Frame>& frame);
    void exec_call_block(const Stmt& stmt, const std::shared_ptr<Frame>& frame, std::string& out);
    std::string capture(const Body& body, const std::shared_ptr<Frame>& frame);
    void assign(const Expr& target, const Value& value, const std::shared_ptr<Frame>& frame);
    void append_output(std::string& out, std::string_view text);

    Value eval(const Expr& expr, const std::shared_ptr<Frame>& frame);
    Value eval_inner(const Expr& expr, const std::shared_ptr<Frame>& frame);
    Value eval_filter(const Expr& expr, const std::shared_ptr<Frame>& frame, const Value* input);
    CallArgs eval_args(const Expr& expr, std::size_t first, const std::shared_ptr<Frame>& frame);
    Value lookup(const std::string& name, const std::shared_ptr<Frame>& frame) const;

    RenderOptions options_;
    Budget budget_;
    uint64_t steps_ = 0;
    int call_depth_ = 0;
    std::shared_ptr<Frame> root_;
};

}  // namespace minfer::jinja
