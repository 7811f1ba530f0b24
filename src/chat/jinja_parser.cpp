#include "chat/jinja_parser.h"

#include <cerrno>
#include <cstdlib>

#include "chat/jinja_lexer.h"

namespace minfer::chat::jinja {

namespace {

class Parser {
  public:
    explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

    Body parse() {
        Body body = subparse({});
        if (current().type != TokenType::End)
            fail(current(), concat("unexpected '", describe(current()), "'"));
        return body;
    }

  private:
    // RAII nesting counter.
    struct Nest {
        explicit Nest(Parser& p) : parser(p) {
            if (++parser.depth_ > kMaxNesting)
                parser.fail(parser.current(),
                            concat("template nested deeper than ", kMaxNesting, " levels"));
        }
        ~Nest() { --parser.depth_; }
        Nest(const Nest&) = delete;
        Nest& operator=(const Nest&) = delete;
        Parser& parser;
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

    // ---- statements ----

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

    // ---- assignment targets ----

    static bool assignable(const Expr& e) {
        if (e.kind == ExprKind::Name) return true;
        if (e.kind == ExprKind::Tuple) {
            for (const auto& c : e.children)
                if (!assignable(*c)) return false;
            return true;
        }
        return false;
    }

    ExprPtr parse_assign_target(bool with_tuple, bool with_namespace,
                                const std::vector<std::string_view>& extra_end) {
        if (with_namespace && current().type == TokenType::Name &&
            peek().type == TokenType::Operator && peek().value == ".") {
            auto target = make(ExprKind::GetAttr, current().pos);
            auto ns = make(ExprKind::Name, current().pos);
            ns->name = advance().value;
            advance();
            target->name = expect_name();
            target->children.push_back(std::move(ns));
            return target;
        }
        const Token& start = current();
        ExprPtr target = with_tuple ? parse_tuple(true, true, extra_end, false) : parse_primary();
        if (!assignable(*target)) fail(start, "can't assign to this expression");
        return target;
    }

    // ---- expressions ----

    bool is_tuple_end(const std::vector<std::string_view>& extra_end) const {
        const Token& t = current();
        if (t.type == TokenType::VariableEnd || t.type == TokenType::BlockEnd ||
            t.type == TokenType::End)
            return true;
        if (t.type == TokenType::Operator && t.value == ")") return true;
        if (t.type == TokenType::Name)
            for (auto n : extra_end)
                if (t.value == n) return true;
        return false;
    }

    ExprPtr parse_tuple(bool simplified, bool with_condexpr,
                        const std::vector<std::string_view>& extra_end, bool explicit_parentheses) {
        const SourcePos pos = current().pos;
        std::vector<ExprPtr> items;
        bool is_tuple = false;
        while (true) {
            if (!items.empty()) expect_op(",");
            if (is_tuple_end(extra_end)) break;
            items.push_back(simplified ? parse_primary() : parse_expression(with_condexpr));
            if (is_op(","))
                is_tuple = true;
            else
                break;
        }
        if (!is_tuple) {
            if (!items.empty()) return std::move(items.front());
            if (!explicit_parentheses)
                fail(current(), concat("expected an expression, got '", describe(current()), "'"));
        }
        auto t = make(ExprKind::Tuple, pos);
        t->children = std::move(items);
        return t;
    }

    ExprPtr parse_expression(bool with_condexpr) {
        Nest nest(*this);
        return with_condexpr ? parse_condexpr() : parse_or();
    }

    ExprPtr parse_condexpr() {
        ExprPtr expr = parse_or();
        while (is_name("if")) {
            const SourcePos pos = advance().pos;
            auto cond = make(ExprKind::Conditional, pos);
            ExprPtr test = parse_or();
            ExprPtr otherwise = skip_name("else") ? parse_condexpr() : nullptr;
            cond->children.push_back(std::move(test));
            cond->children.push_back(std::move(expr));
            cond->children.push_back(std::move(otherwise));
            expr = std::move(cond);
        }
        return expr;
    }

    ExprPtr binary_node(ExprKind kind, ExprPtr left, ExprPtr right, const SourcePos& pos) {
        auto e = make(kind, pos);
        e->children.push_back(std::move(left));
        e->children.push_back(std::move(right));
        return e;
    }

    ExprPtr parse_or() {
        ExprPtr left = parse_and();
        while (is_name("or")) {
            const SourcePos pos = advance().pos;
            left = binary_node(ExprKind::Or, std::move(left), parse_and(), pos);
        }
        return left;
    }

    ExprPtr parse_and() {
        ExprPtr left = parse_not();
        while (is_name("and")) {
            const SourcePos pos = advance().pos;
            left = binary_node(ExprKind::And, std::move(left), parse_not(), pos);
        }
        return left;
    }

    ExprPtr parse_not() {
        if (is_name("not")) {
            Nest nest(*this);
            auto e = make(ExprKind::Not, advance().pos);
            e->children.push_back(parse_not());
            return e;
        }
        return parse_compare();
    }

    ExprPtr parse_compare() {
        const SourcePos pos = current().pos;
        ExprPtr first = parse_math1();
        auto cmp = make(ExprKind::Compare, pos);
        cmp->children.push_back(std::move(first));
        while (true) {
            static const std::pair<std::string_view, CompareOp> ops[] = {
                {"==", CompareOp::Eq}, {"!=", CompareOp::Ne}, {"<", CompareOp::Lt},
                {"<=", CompareOp::Le}, {">", CompareOp::Gt},  {">=", CompareOp::Ge}};
            bool matched = false;
            for (const auto& [text, op] : ops)
                if (is_op(text)) {
                    advance();
                    cmp->compare_ops.push_back(op);
                    matched = true;
                    break;
                }
            if (!matched) {
                if (is_name("in")) {
                    advance();
                    cmp->compare_ops.push_back(CompareOp::In);
                } else if (is_name("not") && peek().type == TokenType::Name &&
                           peek().value == "in") {
                    advance();
                    advance();
                    cmp->compare_ops.push_back(CompareOp::NotIn);
                } else {
                    break;
                }
            }
            cmp->children.push_back(parse_math1());
        }
        if (cmp->compare_ops.empty()) return std::move(cmp->children.front());
        return cmp;
    }

    ExprPtr arith(ExprPtr left, BinaryOp op, ExprPtr right, const SourcePos& pos) {
        auto e = binary_node(ExprKind::Binary, std::move(left), std::move(right), pos);
        e->binary_op = op;
        return e;
    }

    ExprPtr parse_math1() {
        ExprPtr left = parse_concat();
        while (is_op("+") || is_op("-")) {
            const Token& t = advance();
            const BinaryOp op = t.value == "+" ? BinaryOp::Add : BinaryOp::Sub;
            left = arith(std::move(left), op, parse_concat(), t.pos);
        }
        return left;
    }

    ExprPtr parse_concat() {
        const SourcePos pos = current().pos;
        ExprPtr first = parse_math2();
        if (!is_op("~")) return first;
        auto e = make(ExprKind::Concat, pos);
        e->children.push_back(std::move(first));
        while (skip_op("~")) e->children.push_back(parse_math2());
        return e;
    }

    ExprPtr parse_math2() {
        ExprPtr left = parse_pow();
        while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
            const Token& t = advance();
            const BinaryOp op = t.value == "*"    ? BinaryOp::Mul
                                : t.value == "/"  ? BinaryOp::Div
                                : t.value == "//" ? BinaryOp::FloorDiv
                                                  : BinaryOp::Mod;
            left = arith(std::move(left), op, parse_pow(), t.pos);
        }
        return left;
    }

    ExprPtr parse_pow() {
        ExprPtr left = parse_unary(true);
        while (is_op("**")) {
            const SourcePos pos = advance().pos;
            left = arith(std::move(left), BinaryOp::Pow, parse_unary(true), pos);
        }
        return left;
    }

    ExprPtr parse_unary(bool with_filter) {
        Nest nest(*this);
        ExprPtr node;
        if (is_op("-") || is_op("+")) {
            const Token& t = advance();
            node = make(t.value == "-" ? ExprKind::Negate : ExprKind::Plus, t.pos);
            node->children.push_back(parse_unary(false));
        } else {
            node = parse_primary();
        }
        node = parse_postfix(std::move(node));
        if (with_filter) node = parse_filter_expr(std::move(node));
        return node;
    }

    ExprPtr literal(const Value& v, const SourcePos& pos) {
        auto e = make(ExprKind::Literal, pos);
        e->literal = v;
        return e;
    }

    Value parse_integer(const Token& t) {
        std::string text = t.value;
        int base = 10;
        if (text.size() > 2 && text[0] == '0') {
            const char b = static_cast<char>(text[1] | 0x20);
            base = b == 'x' ? 16 : b == 'o' ? 8 : b == 'b' ? 2 : 10;
            if (base != 10) text = text.substr(2);
        }
        errno = 0;
        char* end = nullptr;
        const long long v = std::strtoll(text.c_str(), &end, base);
        if (errno != 0 || end != text.c_str() + text.size())
            fail(t, concat("integer literal '", t.value, "' out of range"));
        return Value::integer(v);
    }

    ExprPtr parse_primary() {
        Nest nest(*this);
        const Token& t = current();
        switch (t.type) {
            case TokenType::Name: {
                advance();
                if (t.value == "true" || t.value == "True")
                    return literal(Value::boolean(true), t.pos);
                if (t.value == "false" || t.value == "False")
                    return literal(Value::boolean(false), t.pos);
                if (t.value == "none" || t.value == "None") return literal(Value::none(), t.pos);
                if (!macros_.empty()) {
                    if (t.value == "caller") macros_.back()->uses_caller = true;
                    if (t.value == "varargs") macros_.back()->uses_varargs = true;
                    if (t.value == "kwargs") macros_.back()->uses_kwargs = true;
                }
                auto e = make(ExprKind::Name, t.pos);
                e->name = t.value;
                return e;
            }
            case TokenType::String: {
                const SourcePos pos = t.pos;
                std::string value;
                while (current().type == TokenType::String) value += advance().value;
                return literal(Value::string(std::move(value)), pos);
            }
            case TokenType::Integer:
                advance();
                return literal(parse_integer(t), t.pos);
            case TokenType::Float: {
                advance();
                return literal(Value::number(std::strtod(t.value.c_str(), nullptr)), t.pos);
            }
            case TokenType::Operator:
                if (t.value == "(") {
                    advance();
                    ExprPtr e = parse_tuple(false, true, {}, true);
                    expect_op(")");
                    return e;
                }
                if (t.value == "[") return parse_list();
                if (t.value == "{") return parse_dict();
                break;
            default:
                break;
        }
        fail(t, concat("unexpected '", describe(t), "'"));
    }

    ExprPtr parse_list() {
        auto e = make(ExprKind::List, advance().pos);
        while (!is_op("]")) {
            if (!e->children.empty()) expect_op(",");
            if (is_op("]")) break;
            e->children.push_back(parse_expression(true));
        }
        expect_op("]");
        return e;
    }

    ExprPtr parse_dict() {
        auto e = make(ExprKind::Dict, advance().pos);
        while (!is_op("}")) {
            if (!e->children.empty()) expect_op(",");
            if (is_op("}")) break;
            e->children.push_back(parse_expression(true));
            expect_op(":");
            e->children.push_back(parse_expression(true));
        }
        expect_op("}");
        return e;
    }

    ExprPtr parse_postfix(ExprPtr node) {
        while (true) {
            if (is_op(".") || is_op("["))
                node = parse_subscript(std::move(node));
            else if (is_op("("))
                node = parse_call(std::move(node));
            else
                return node;
        }
    }

    ExprPtr parse_filter_expr(ExprPtr node) {
        while (true) {
            if (is_op("|"))
                node = parse_filter(std::move(node), false);
            else if (is_name("is"))
                node = parse_test(std::move(node));
            else if (is_op("("))
                node = parse_call(std::move(node));
            else
                return node;
        }
    }

    ExprPtr parse_subscript(ExprPtr node) {
        Nest nest(*this);
        const Token& t = advance();
        if (t.value == ".") {
            const Token& attr = current();
            if (attr.type == TokenType::Name) {
                auto e = make(ExprKind::GetAttr, t.pos);
                e->name = advance().value;
                e->children.push_back(std::move(node));
                return e;
            }
            if (attr.type == TokenType::Integer) {
                advance();
                auto e = make(ExprKind::GetItem, t.pos);
                e->children.push_back(std::move(node));
                e->children.push_back(literal(parse_integer(attr), attr.pos));
                return e;
            }
            fail(attr, "expected name or number after '.'");
        }
        std::vector<ExprPtr> args;
        while (!is_op("]")) {
            if (!args.empty()) {
                expect_op(",");
                if (is_op("]")) break;
            }
            args.push_back(parse_subscribed());
        }
        expect_op("]");
        if (args.empty()) fail(t, "expected a subscript");
        ExprPtr key;
        if (args.size() > 1)
            for (const auto& arg : args)
                if (arg->kind == ExprKind::Slice)
                    fail(t, "a slice inside a tuple subscript is not supported");
        if (args.size() == 1) {
            key = std::move(args.front());
        } else {
            key = make(ExprKind::Tuple, t.pos);
            key->children = std::move(args);
        }
        if (key->kind == ExprKind::Slice) {
            key->children.insert(key->children.begin(), std::move(node));
            return key;
        }
        auto e = make(ExprKind::GetItem, t.pos);
        e->children.push_back(std::move(node));
        e->children.push_back(std::move(key));
        return e;
    }

    // One subscript: an expression or a slice a:b:c (absent parts null).
    ExprPtr parse_subscribed() {
        const SourcePos pos = current().pos;
        std::vector<ExprPtr> parts;
        if (skip_op(":")) {
            parts.push_back(nullptr);
        } else {
            ExprPtr e = parse_expression(true);
            if (!skip_op(":")) return e;
            parts.push_back(std::move(e));
        }
        const auto slice_end = [&] { return is_op("]") || is_op(",") || is_op(":"); };
        parts.push_back(slice_end() ? nullptr : parse_expression(true));
        if (skip_op(":"))
            parts.push_back(is_op("]") || is_op(",") ? nullptr : parse_expression(true));
        else
            parts.push_back(nullptr);
        auto s = make(ExprKind::Slice, pos);
        s->children = std::move(parts);
        return s;
    }

    // "(args, name=value)" appended to `e` (children after those already there, kwargs).
    void parse_call_args(Expr& e) {
        expect_op("(");
        bool first = true;
        while (!is_op(")")) {
            if (!first) {
                expect_op(",");
                if (is_op(")")) break;
            }
            first = false;
            if (is_op("*") || is_op("**"))
                fail(current(), "*args and **kwargs in calls are not supported");
            if (current().type == TokenType::Name && peek().type == TokenType::Operator &&
                peek().value == "=") {
                std::string key = advance().value;
                advance();
                e.kwargs.emplace_back(std::move(key), parse_expression(true));
            } else {
                if (!e.kwargs.empty())
                    fail(current(), "positional argument follows keyword argument");
                e.children.push_back(parse_expression(true));
            }
        }
        expect_op(")");
    }

    ExprPtr parse_call(ExprPtr node) {
        Nest nest(*this);
        auto e = make(ExprKind::Call, current().pos);
        e->children.push_back(std::move(node));
        parse_call_args(*e);
        return e;
    }

    // "| name(args) | name ..."; with start_inline the first filter has no leading "|".
    ExprPtr parse_filter(ExprPtr node, bool start_inline) {
        while (is_op("|") || start_inline) {
            Nest nest(*this);
            if (!start_inline) advance();
            start_inline = false;
            auto e = make(ExprKind::Filter, current().pos);
            e->name = expect_name();
            while (is_op(".")) {
                advance();
                e->name += '.';
                e->name += expect_name();
            }
            e->children.push_back(std::move(node));
            if (is_op("(")) parse_call_args(*e);
            node = std::move(e);
        }
        return node;
    }

    ExprPtr parse_test(ExprPtr node) {
        Nest nest(*this);
        auto e = make(ExprKind::Test, advance().pos);
        e->negated = skip_name("not");
        e->name = expect_name();
        while (is_op(".")) {
            advance();
            e->name += '.';
            e->name += expect_name();
        }
        e->children.push_back(std::move(node));
        const Token& t = current();
        const bool starts_arg =
            t.type == TokenType::Name || t.type == TokenType::String ||
            t.type == TokenType::Integer || t.type == TokenType::Float ||
            (t.type == TokenType::Operator && (t.value == "(" || t.value == "[" || t.value == "{"));
        if (is_op("(")) {
            parse_call_args(*e);
        } else if (starts_arg && !is_name("else") && !is_name("or") && !is_name("and")) {
            if (is_name("is")) fail(t, "you cannot chain multiple tests with is");
            e->children.push_back(parse_postfix(parse_primary()));
        }
        return e;
    }

    std::vector<Token> tokens_;
    std::size_t index_ = 0;
    int depth_ = 0;
    int loop_depth_ = 0;
    std::vector<Stmt*> macros_;
};

}  // namespace

Body parse_template(std::string_view source) {
    return Parser(tokenize(source)).parse();
}

}  // namespace minfer::chat::jinja
