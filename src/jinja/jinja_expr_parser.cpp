#include "jinja/jinja_expr_parser.h"

#include <cerrno>
#include <cstdlib>

namespace minfer::jinja {

bool ExpressionParser::assignable(const Expr& e) {
    if (e.kind == ExprKind::Name) return true;
    if (e.kind == ExprKind::Tuple) {
        for (const auto& c : e.children)
            if (!assignable(*c)) return false;
        return true;
    }
    return false;
}

ExprPtr ExpressionParser::parse_assign_target(bool with_tuple, bool with_namespace,
                                              const std::vector<std::string_view>& extra_end) {
    if (with_namespace && current().type == TokenType::Name && peek().type == TokenType::Operator &&
        peek().value == ".") {
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

bool ExpressionParser::is_tuple_end(const std::vector<std::string_view>& extra_end) const {
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

ExprPtr ExpressionParser::parse_tuple(bool simplified, bool with_condexpr,
                                      const std::vector<std::string_view>& extra_end,
                                      bool explicit_parentheses) {
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

ExprPtr ExpressionParser::parse_expression(bool with_condexpr) {
    Nest nest(*this);
    return with_condexpr ? parse_condexpr() : parse_or();
}

ExprPtr ExpressionParser::parse_condexpr() {
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

ExprPtr ExpressionParser::binary_node(ExprKind kind, ExprPtr left, ExprPtr right,
                                      const SourcePos& pos) {
    auto e = make(kind, pos);
    e->children.push_back(std::move(left));
    e->children.push_back(std::move(right));
    return e;
}

ExprPtr ExpressionParser::parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
        const SourcePos pos = advance().pos;
        left = binary_node(ExprKind::Or, std::move(left), parse_and(), pos);
    }
    return left;
}

ExprPtr ExpressionParser::parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
        const SourcePos pos = advance().pos;
        left = binary_node(ExprKind::And, std::move(left), parse_not(), pos);
    }
    return left;
}

ExprPtr ExpressionParser::parse_not() {
    if (is_name("not")) {
        Nest nest(*this);
        auto e = make(ExprKind::Not, advance().pos);
        e->children.push_back(parse_not());
        return e;
    }
    return parse_compare();
}

ExprPtr ExpressionParser::parse_compare() {
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
            } else if (is_name("not") && peek().type == TokenType::Name && peek().value == "in") {
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

ExprPtr ExpressionParser::arith(ExprPtr left, BinaryOp op, ExprPtr right, const SourcePos& pos) {
    auto e = binary_node(ExprKind::Binary, std::move(left), std::move(right), pos);
    e->binary_op = op;
    return e;
}

ExprPtr ExpressionParser::parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
        const Token& t = advance();
        const BinaryOp op = t.value == "+" ? BinaryOp::Add : BinaryOp::Sub;
        left = arith(std::move(left), op, parse_concat(), t.pos);
    }
    return left;
}

ExprPtr ExpressionParser::parse_concat() {
    const SourcePos pos = current().pos;
    ExprPtr first = parse_math2();
    if (!is_op("~")) return first;
    auto e = make(ExprKind::Concat, pos);
    e->children.push_back(std::move(first));
    while (skip_op("~")) e->children.push_back(parse_math2());
    return e;
}

ExprPtr ExpressionParser::parse_math2() {
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

ExprPtr ExpressionParser::parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op("**")) {
        const SourcePos pos = advance().pos;
        left = arith(std::move(left), BinaryOp::Pow, parse_unary(true), pos);
    }
    return left;
}

ExprPtr ExpressionParser::parse_unary(bool with_filter) {
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

ExprPtr ExpressionParser::literal(const Value& v, const SourcePos& pos) {
    auto e = make(ExprKind::Literal, pos);
    e->literal = v;
    return e;
}

Value ExpressionParser::parse_integer(const Token& t) {
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

ExprPtr ExpressionParser::parse_primary() {
    Nest nest(*this);
    const Token& t = current();
    switch (t.type) {
        case TokenType::Name: {
            advance();
            if (t.value == "true" || t.value == "True") return literal(Value::boolean(true), t.pos);
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

ExprPtr ExpressionParser::parse_list() {
    auto e = make(ExprKind::List, advance().pos);
    while (!is_op("]")) {
        if (!e->children.empty()) expect_op(",");
        if (is_op("]")) break;
        e->children.push_back(parse_expression(true));
    }
    expect_op("]");
    return e;
}

ExprPtr ExpressionParser::parse_dict() {
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

ExprPtr ExpressionParser::parse_postfix(ExprPtr node) {
    while (true) {
        if (is_op(".") || is_op("["))
            node = parse_subscript(std::move(node));
        else if (is_op("("))
            node = parse_call(std::move(node));
        else
            return node;
    }
}

ExprPtr ExpressionParser::parse_filter_expr(ExprPtr node) {
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

ExprPtr ExpressionParser::parse_subscript(ExprPtr node) {
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
ExprPtr ExpressionParser::parse_subscribed() {
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
void ExpressionParser::parse_call_args(Expr& e) {
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
            if (!e.kwargs.empty()) fail(current(), "positional argument follows keyword argument");
            e.children.push_back(parse_expression(true));
        }
    }
    expect_op(")");
}

ExprPtr ExpressionParser::parse_call(ExprPtr node) {
    Nest nest(*this);
    auto e = make(ExprKind::Call, current().pos);
    e->children.push_back(std::move(node));
    parse_call_args(*e);
    return e;
}

// "| name(args) | name ..."; with start_inline the first filter has no leading "|".
ExprPtr ExpressionParser::parse_filter(ExprPtr node, bool start_inline) {
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

ExprPtr ExpressionParser::parse_test(ExprPtr node) {
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
        t.type == TokenType::Name || t.type == TokenType::String || t.type == TokenType::Integer ||
        t.type == TokenType::Float ||
        (t.type == TokenType::Operator && (t.value == "(" || t.value == "[" || t.value == "{"));
    if (is_op("(")) {
        parse_call_args(*e);
    } else if (starts_arg && !is_name("else") && !is_name("or") && !is_name("and")) {
        if (is_name("is")) fail(t, "you cannot chain multiple tests with is");
        e->children.push_back(parse_postfix(parse_primary()));
    }
    return e;
}

}  // namespace minfer::jinja
