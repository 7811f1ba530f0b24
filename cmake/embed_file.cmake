# Writes a C++ source defining `const std::string_view NAME` with the bytes of IN, as a byte array
# (no raw-string delimiter can collide with the file's contents).
# Usage: cmake -DIN=file -DOUT=file.cpp -DNAME=minfer::server::kChatPageHtml -DHEADER=server/chat_page.h -P embed_file.cmake
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
string(REGEX MATCH "^(.*)::([^:]+)$" _ "${NAME}")
set(ns "${CMAKE_MATCH_1}")
set(var "${CMAKE_MATCH_2}")
file(WRITE "${OUT}.tmp" "// Generated from ${IN} by cmake/embed_file.cmake: do not edit.\n#include \"${HEADER}\"\n\nnamespace ${ns} {\nnamespace {\nconst unsigned char kBytes[] = {\n${bytes}\n};\n}  // namespace\nconst std::string_view ${var}(reinterpret_cast<const char*>(kBytes), sizeof kBytes);\n}  // namespace ${ns}\n")
file(RENAME "${OUT}.tmp" "${OUT}")
