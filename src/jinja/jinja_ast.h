#pragma once
// The syntax tree of a parsed template: expressions and statements, each with the line and
// column (1-based) where it starts, for error messages.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/jinja_ops.h"
#include "jinja/jinja_value.h"

namespace minfer::jinja {

struct SourcePos {
    int line = 1;
    int column = 1;
};

enum class ExprKind {
    Literal,      // literal
    Name,         // name
    List,         // children = items
    Tuple,        // children = items
    Dict,         // children = key0, value0, key1, value1, ...
    GetAttr,      // children[0].name
    GetItem,      // children[0][children[1]]
    Slice,        // children[0][children[1]:children[2]:children[3]] (null = absent)
    Call,         // children[0](children[1..], kwargs)
    Filter,       // children[0] | name(children[1..], kwargs); children[0] null in filter blocks
    Test,         // children[0] is [not] name(children[1..], kwargs)
    Not,          // not children[0]
    Negate,       // -children[0]
    Plus,         // +children[0]
    Binary,       // children[0] binary_op children[1]
    Concat,       // children[0] ~ children[1] ~ ...
    Compare,      // children[0] compare_ops[0] children[1] compare_ops[1] children[2] ...
    And,          // children[0] and children[1]
    Or,           // children[0] or children[1]
    Conditional,  // children[1] if children[0] else children[2] (null = undefined)
};

struct Expr {
    ExprKind kind = ExprKind::Literal;
    SourcePos pos;
    Value literal;
    std::string name;
    BinaryOp binary_op = BinaryOp::Add;
    bool negated = false;  // `is not`
    std::vector<CompareOp> compare_ops;
    std::vector<std::unique_ptr<Expr>> children;
    std::vector<std::pair<std::string, std::unique_ptr<Expr>>> kwargs;
};
using ExprPtr = std::unique_ptr<Expr>;

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

enum class StmtKind {
    Text,         // text
    Output,       // {{ expr }}
    If,           // branches (condition, body), else_body
    For,          // for target in expr [if condition] [recursive]: body else else_body
    Set,          // set target = expr (target: Name, Tuple of names, or GetAttr of a Name)
    SetBlock,     // set target [| filter]: body endset; expr = filter chain or null
    Macro,        // macro name(params=defaults): body
    CallBlock,    // call(params) expr: body (body becomes `caller`)
    FilterBlock,  // filter chain (expr, innermost input null): body
    With,         // with targets = values: body
    Scope,        // a {% block %}: body in its own scope
    Break,
    Continue,
};

struct Stmt {
    StmtKind kind = StmtKind::Text;
    SourcePos pos;
    std::string text;
    ExprPtr expr;
    ExprPtr target;
    ExprPtr condition;
    std::vector<std::pair<ExprPtr, Body>> branches;
    Body body;
    Body else_body;
    bool recursive = false;
    // Macro and call block signatures: parameter names and the defaults of the last ones.
    std::string name;
    std::vector<std::string> params;
    std::vector<ExprPtr>
        defaults;  // defaults[i] belongs to params[params.size()-defaults.size()+i]
    bool uses_caller = false, uses_varargs = false, uses_kwargs = false;
    // With: assignments
    std::vector<std::pair<ExprPtr, ExprPtr>> assignments;
};

}  // namespace minfer::jinja
