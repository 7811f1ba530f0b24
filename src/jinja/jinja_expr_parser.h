#pragma once
// The expression half of the template parser (jinja2's grammar: conditional expressions, or,
// and, not, comparisons, + -, ~, * / // %, **, unary signs, filters, tests, calls, subscripts,
// literals) over a token cursor. The statement parser (jinja_parser.cpp) derives from it.

#include <string>
#include <string_view>
#include <vector>

#include "jinja/jinja_ast.h"
#include "jinja/jinja_lexer.h"
#include "jinja/jinja_parser.h"

namespace minfer::jinja {

class ExpressionParser {
  public:
    explicit ExpressionParser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  protected:
    // RAII nesting counter.
    struct Nest {
        explicit Nest(ExpressionParser& p) : parser(p) {
            if (++parser.depth_ > kMaxNesting)
                parser.fail(parser.current(),
                            concat("template nested deeper than ", kMaxNesting, " levels"));
        }
        ~Nest() { --parser.depth_; }
        Nest(const Nest&) = delete;
        Nest& operator=(const Nest&) = delete;
        ExpressionParser& parser;
    };

    const Token& current() const { return tokens_[index_]; }
    const Token& peek(std::size_t ahead = 1) const {
        return tokens_[std::min(index_ + ahead, tokens_.size() - 1)];
    }
    const Token& advance() {
        const Token& t = tokens_[index_];
        if (index_ + 1 < tokens_.size()) ++index_;
        return t;
    }

    static std::string describe(const Token& t) {
        switch (t.type) {
            case TokenType::End:
                return "end of template";
            case TokenType::BlockEnd:
                return "end of statement block";
            case TokenType::VariableEnd:
                return "end of print statement";
            case TokenType::BlockBegin:
                return "begin of statement block";
            case TokenType::VariableBegin:
                return "begin of print statement";
            case TokenType::Text:
                return "template data";
            default:
                return t.value;
        }
    }

    [[noreturn]] void fail(const Token& at, std::string_view message) const {
        throw FormatError(position_message(at.pos, message));
    }

    bool is_op(std::string_view op) const {
        return current().type == TokenType::Operator && current().value == op;
    }
    bool is_name(std::string_view name) const {
        return current().type == TokenType::Name && current().value == name;
    }
    bool skip_op(std::string_view op) {
        if (!is_op(op)) return false;
        advance();
        return true;
    }
    bool skip_name(std::string_view name) {
        if (!is_name(name)) return false;
        advance();
        return true;
    }
    void expect_op(std::string_view op) {
        if (!skip_op(op))
            fail(current(), concat("expected '", op, "', got '", describe(current()), "'"));
    }
    std::string expect_name() {
        if (current().type != TokenType::Name)
            fail(current(), concat("expected a name, got '", describe(current()), "'"));
        return advance().value;
    }
    void expect(TokenType type, std::string_view what) {
        if (current().type != type)
            fail(current(), concat("expected ", what, ", got '", describe(current()), "'"));
        advance();
    }

    static ExprPtr make(ExprKind kind, const SourcePos& pos) {
        auto e = std::make_unique<Expr>();
        e->kind = kind;
        e->pos = pos;
        return e;
    }

    // Assignment targets: a name, a tuple of names, or (with_namespace) `ns.attr`.
    ExprPtr parse_assign_target(bool with_tuple, bool with_namespace,
                                const std::vector<std::string_view>& extra_end);
    bool is_tuple_end(const std::vector<std::string_view>& extra_end) const;
    ExprPtr parse_tuple(bool simplified, bool with_condexpr,
                        const std::vector<std::string_view>& extra_end, bool explicit_parentheses);
    ExprPtr parse_expression(bool with_condexpr);
    ExprPtr parse_condexpr();
    ExprPtr binary_node(ExprKind kind, ExprPtr left, ExprPtr right, const SourcePos& pos);
    ExprPtr parse_or();
    ExprPtr parse_and();
    ExprPtr parse_not();
    ExprPtr parse_compare();
    ExprPtr arith(ExprPtr left, BinaryOp op, ExprPtr right, const SourcePos& pos);
    ExprPtr parse_math1();
    ExprPtr parse_concat();
    ExprPtr parse_math2();
    ExprPtr parse_pow();
    ExprPtr parse_unary(bool with_filter);
    ExprPtr literal(const Value& v, const SourcePos& pos);
    Value parse_integer(const Token& t);
    ExprPtr parse_primary();
    ExprPtr parse_list();
    ExprPtr parse_dict();
    ExprPtr parse_postfix(ExprPtr node);
    ExprPtr parse_filter_expr(ExprPtr node);
    ExprPtr parse_subscript(ExprPtr node);
    ExprPtr parse_subscribed();
    void parse_call_args(Expr& e);
    ExprPtr parse_call(ExprPtr node);
    ExprPtr parse_filter(ExprPtr node, bool start_inline);
    ExprPtr parse_test(ExprPtr node);

    std::vector<Token> tokens_;
    std::size_t index_ = 0;
    int depth_ = 0;
    std::vector<Stmt*> macros_;  // macros and call blocks being parsed (innermost last)

  private:
    static bool assignable(const Expr& e);
};

}  // namespace minfer::jinja
