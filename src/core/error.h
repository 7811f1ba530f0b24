#pragma once
// The one error hierarchy of minfer. Library code throws these with a message that names the
// file, key or tensor, the offset and what was expected versus found; the CLI prints the
// message as one line on stderr and exits non-zero.

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace minfer {

class Error : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

// A file (GGUF, template, JSON) whose contents break the format's rules.
class FormatError : public Error {
  public:
    using Error::Error;
};

// A valid input that asks for something minfer does not implement (yet).
class UnsupportedError : public Error {
  public:
    using Error::Error;
};

// A bad value given by the user (command-line flag, request field).
class UsageError : public Error {
  public:
    using Error::Error;
};

// A valid request that exceeds a limit of this run: a prompt longer than the context, a KV cache
// larger than the memory the process may use, a full KV block pool.
class LimitError : public Error {
  public:
    using Error::Error;
};

// An operating-system failure: open, mmap, write, rename.
class IoError : public Error {
  public:
    using Error::Error;
};

// Work stopped because its caller asked it to (Ctrl-C during a download): the CLI exits 130.
// Whatever was done so far is kept in a state the next attempt can use (a resumable download).
class Cancelled : public Error {
  public:
    using Error::Error;
};

// Builds a message from any streamable pieces: concat("tensor '", name, "' at offset ", off).
// (libstdc++ 12 has no std::format.)
template <class... Args>
std::string concat(Args&&... args) {
    std::ostringstream out;
    (out << ... << std::forward<Args>(args));
    return out.str();
}

}  // namespace minfer
