#include "jinja/jinja_parser.h"

#include "jinja/jinja_expr_parser.h"
#include "jinja/jinja_lexer.h"

namespace minfer::jinja {

namespace {

class Parser : public ExpressionParser {
  public:
    explicit Parser(std::vector<Token> tokens) : ExpressionParser(std::move(tokens)) {}

    Body parse() {
        Body body = subparse({});
        if (current().type != TokenType::End)
            fail(current(), concat("unexpected '", describe(current()), "'"));
        return body;
    }

  private:
    Body subparse(const std::vector<std::string_view>& end_names) {
        Nest nest(*this);
        Body body;
        while (true) {
            const Token& t = current();
            if (t.type == TokenType::End) {
                if (!end_names.empty()) {
                    std::string wanted;
                    for (auto n : end_names)
                        wanted += (wanted.empty() ? "'" : " or '") + std::string(n) + "'";
                    fail(t, concat("unexpected end of template; expected ", wanted));
                }
                return body;
            }
            if (t.type == TokenType::Text) {
                auto s = std::make_unique<Stmt>();
                s->kind = StmtKind::Text;
                s->pos = t.pos;
                s->text = t.value;
                body.push_back(std::move(s));
                advance();
            } else if (t.type == TokenType::VariableBegin) {
                auto s = std::make_unique<Stmt>();
                s->kind = StmtKind::Output;
                s->pos = t.pos;
                advance();
                s->expr = parse_tuple(false, true, {}, false);
                expect(TokenType::VariableEnd, "end of print statement");
                body.push_back(std::move(s));
            } else if (t.type == TokenType::BlockBegin) {
                const Token& name = peek();
                for (auto end : end_names)
                    if (name.type == TokenType::Name && name.value == end) {
                        advance();  // leave the end name current for the caller
                        return body;
                    }
                advance();
                body.push_back(parse_statement());
                expect(TokenType::BlockEnd, "end of statement block");
            } else {
                fail(t, concat("unexpected '", describe(t), "'"));
            }
        }
    }

    // After the statement header: "%}" then the body up to one of end_names (left current).
    Body parse_statements(const std::vector<std::string_view>& end_names, bool drop_needle) {
        skip_op(":");
        expect(TokenType::BlockEnd, "end of statement block");
        Body body = subparse(end_names);
        if (current().type == TokenType::End) fail(current(), "unexpected end of template");
        if (drop_needle) advance();
        return body;
    }

    std::unique_ptr<Stmt> new_stmt(StmtKind kind, const SourcePos& pos) {
        auto s = std::make_unique<Stmt>();
        s->kind = kind;
        s->pos = pos;
        return s;
    }

    std::unique_ptr<Stmt> parse_statement() {
        Nest nest(*this);
        const Token& t = current();
        if (t.type != TokenType::Name) fail(t, "tag name expected");
        const std::string name = t.value;
        const SourcePos pos = t.pos;
        if (name == "if") return parse_if();
        if (name == "for") return parse_for();
        if (name == "set") return parse_set();
        if (name == "macro") return parse_macro();
        if (name == "call") return parse_call_block();
        if (name == "filter") return parse_filter_block();
        if (name == "with") return parse_with();
        if (name == "block") return parse_block();
        if (name == "generation") return parse_generation();
        if (name == "break" || name == "continue") {
            if (loop_depth_ == 0) fail(t, concat("'", name, "' outside of a loop"));
            advance();
            return new_stmt(name == "break" ? StmtKind::Break : StmtKind::Continue, pos);
        }
        if (name == "include" || name == "import" || name == "from" || name == "extends")
            fail(t, concat("tag '", name,
                           "' is not supported (chat templates have no template loader)"));
        fail(t, concat("encountered unknown tag '", name, "'"));
    }

    std::unique_ptr<Stmt> parse_if() {
        auto s = new_stmt(StmtKind::If, current().pos);
        advance();
        while (true) {
            ExprPtr cond = parse_tuple(false, false, {}, false);
            Body body = parse_statements({"elif", "else", "endif"}, false);
            s->branches.emplace_back(std::move(cond), std::move(body));
            const std::string tag = advance().value;
            if (tag == "elif") continue;
            if (tag == "else") s->else_body = parse_statements({"endif"}, true);
            break;
        }
        return s;
    }

    std::unique_ptr<Stmt> parse_for() {
        auto s = new_stmt(StmtKind::For, current().pos);
        advance();
        s->target = parse_assign_target(true, false, {"in"});
        if (!skip_name("in")) fail(current(), "expected 'in'");
        s->expr = parse_tuple(false, false, {"recursive"}, false);
        if (skip_name("if")) s->condition = parse_expression(true);
        s->recursive = skip_name("recursive");
        ++loop_depth_;
        s->body = parse_statements({"endfor", "else"}, false);
        --loop_depth_;
        if (advance().value == "else") s->else_body = parse_statements({"endfor"}, true);
        return s;
    }

    std::unique_ptr<Stmt> parse_set() {
        const SourcePos pos = current().pos;
        advance();
        ExprPtr target = parse_assign_target(true, true, {});
        if (skip_op("=")) {
            auto s = new_stmt(StmtKind::Set, pos);
            s->target = std::move(target);
            s->expr = parse_tuple(false, true, {}, false);
            return s;
        }
        auto s = new_stmt(StmtKind::SetBlock, pos);
        s->target = std::move(target);
        if (is_op("|")) s->expr = parse_filter(nullptr, false);
        s->body = parse_statements({"endset"}, true);
        return s;
    }

    void parse_signature(Stmt& s) {
        expect_op("(");
        while (!is_op(")")) {
            if (!s.params.empty()) expect_op(",");
            s.params.push_back(expect_name());
            if (skip_op("="))
                s.defaults.push_back(parse_expression(true));
            else if (!s.defaults.empty())
                fail(current(), "non-default argument follows default argument");
        }
        expect_op(")");
    }

    // Parses a macro-like body (macro or call block) with its own `caller`/`varargs` tracking
    // and without the enclosing loop (break/continue do not cross it).
    void parse_callable_body(Stmt& s, std::string_view end) {
        macros_.push_back(&s);
        const int saved_loops = std::exchange(loop_depth_, 0);
        s.body = parse_statements({end}, true);
        loop_depth_ = saved_loops;
        macros_.pop_back();
    }

    std::unique_ptr<Stmt> parse_macro() {
        auto s = new_stmt(StmtKind::Macro, current().pos);
        advance();
        s->name = expect_name();
        parse_signature(*s);
        parse_callable_body(*s, "endmacro");
        return s;
    }

    std::unique_ptr<Stmt> parse_call_block() {
        auto s = new_stmt(StmtKind::CallBlock, current().pos);
        advance();
        if (is_op("(")) parse_signature(*s);
        s->expr = parse_expression(true);
        if (s->expr->kind != ExprKind::Call) fail(current(), "expected call");
        parse_callable_body(*s, "endcall");
        return s;
    }

    std::unique_ptr<Stmt> parse_filter_block() {
        auto s = new_stmt(StmtKind::FilterBlock, current().pos);
        advance();
        s->expr = parse_filter(nullptr, true);
        s->body = parse_statements({"endfilter"}, true);
        return s;
    }

    std::unique_ptr<Stmt> parse_with() {
        auto s = new_stmt(StmtKind::With, current().pos);
        advance();
        while (current().type != TokenType::BlockEnd) {
            if (!s->assignments.empty()) expect_op(",");
            ExprPtr target = parse_assign_target(true, false, {});
            expect_op("=");
            s->assignments.emplace_back(std::move(target), parse_expression(true));
        }
        s->body = parse_statements({"endwith"}, true);
        return s;
    }

    // Hugging Face's {% generation %}: marks assistant text for masks; renders its body in a
    // scope of its own (it is a call block there).
    std::unique_ptr<Stmt> parse_generation() {
        auto s = new_stmt(StmtKind::Scope, current().pos);
        advance();
        s->body = parse_statements({"endgeneration"}, true);
        return s;
    }

    std::unique_ptr<Stmt> parse_block() {
        auto s = new_stmt(StmtKind::Scope, current().pos);
        advance();
        s->name = expect_name();
        skip_name("scoped");
        skip_name("required");
        s->body = parse_statements({"endblock"}, true);
        if (current().type == TokenType::Name) advance();  // {% endblock name %}
        return s;
    }

    int loop_depth_ = 0;
};

}  // namespace

Body parse_template(std::string_view source) {
    return Parser(tokenize(source)).parse();
}

}  // namespace minfer::jinja
