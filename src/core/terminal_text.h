#pragma once
// Text from files and users (file names, GGUF metadata, tensor names) made safe to print on a
// terminal: nothing in it can move the cursor, change colours, end the line or be read by the
// terminal as a command.

#include <string>
#include <string_view>

namespace minfer {

// Keeps valid printable UTF-8 as it is and escapes the rest:
//   C0 controls        \n \r \t, other bytes 0x00..0x1F as \xNN (ESC is \x1b)
//   DEL                \x7f
//   C1 controls        \u0080..\u009f (valid UTF-8 for U+0080..U+009F, which some terminals obey)
//   invalid UTF-8      \xNN for each byte that starts no valid sequence (strict: no overlong
//                      forms, surrogates, truncated sequences or code points past U+10FFFF)
// A backslash is kept as it is: the result is for people to read, not to parse back, and so
// text that is already escaped (GgufValue::to_display_string) passes through unchanged and
// Windows paths and regular expressions read as written. An escape sequence in the output is
// therefore either ours or a literal backslash in the input; the output holds no control byte
// and no invalid UTF-8 either way.
std::string escape_for_terminal(std::string_view text);

}  // namespace minfer
