#pragma once
// Grammars of the kinds llama.cpp ships as examples (written for these tests): JSON, JSON arrays,
// lists, arithmetic, a C-like language, chess moves, English-only text, Japanese characters.

#include <utility>

namespace minfer::grammar::testing {

inline constexpr const char* kJsonGrammar = R"gbnf(root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt/] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
)gbnf";

inline constexpr std::pair<const char*, const char*> kExampleGrammars[] = {
    {"json", kJsonGrammar},
    {"json_array", R"gbnf(root ::= arr
value ::= object | arr | string | number | ("true" | "false" | "null") ws
arr ::= "[" ws ( value ("," ws value)* )? "]" ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
string ::= "\"" ( [^"\\] | "\\" ["\\/bfnrtu] )* "\"" ws
number ::= "-"? [0-9]+ ("." [0-9]+)? ws
ws ::= ([ \t\n] ws)?
)gbnf"},
    {"list", R"gbnf(root ::= item+
# a list of dashed items, one a line
item ::= "- " [^\r\n\x0b\x0c\x85\u2028\u2029]+ "\n"
)gbnf"},
    {"arithmetic", R"gbnf(root  ::= (expr "=" ws term "\n")+
expr  ::= term ([-+*/] term)*
term  ::= ident | num | "(" ws expr ")" ws
ident ::= [a-z] [a-z0-9_]* ws
num   ::= [0-9]+ ws
ws    ::= [ \t\n]*
)gbnf"},
    {"c_like", R"gbnf(root ::= (declaration)*
declaration ::= dataType identifier "(" parameter? ")" "{" statement* "}"
dataType  ::= "int" ws | "float" ws | "char" ws
identifier ::= [a-zA-Z_] [a-zA-Z_0-9]*
parameter ::= dataType identifier
statement ::=
    ( dataType identifier ws "=" ws expression ";" ) |
    ( identifier ws "=" ws expression ";" ) |
    ( "return" ws expression ";" ) |
    ( "while" "(" condition ")" "{" statement* "}" )
expression ::= term ( ws ("+" | "-" | "*" | "/") ws term )*
term ::= identifier | [0-9]+ | "(" expression ")"
condition ::= expression relationOperator expression
relationOperator ::= ("<=" | "<" | "==" | "!=" | ">=" | ">")
ws ::= ([ \t\n]+)?
)gbnf"},
    {"chess", R"gbnf(root ::= "1. " move " " move "\n" ([1-9] [0-9]? ". " move " " move "\n")*
move ::= (pawn | nonpawn | castle) [+#]?
nonpawn ::= [NBKQR] [a-h]? [1-8]? "x"? [a-h] [1-8]
pawn ::= ([a-h] "x")? [a-h] [1-8] ("=" [NBKQR])?
castle ::= "O-O" "-O"?
)gbnf"},
    {"english", R"gbnf(root ::= [A-Za-z0-9 .,;:!?'"()\n-]+
)gbnf"},
    {"japanese", R"gbnf(root ::= jp-char+ ([ \t\n] jp-char+)*
jp-char ::= hiragana | katakana | punctuation | cjk
hiragana ::= [ぁ-ゟ]
katakana ::= [ァ-ヿ]
punctuation ::= [、-〾]
cjk ::= [一-鿿]
)gbnf"},
    {"unicode_and_repeats", R"gbnf(root ::= ("é" | "😀" | [a-c]){2,4} (" " [^a-z]{1,3})? "."
)gbnf"},
};

}  // namespace minfer::grammar::testing
