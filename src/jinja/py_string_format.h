#pragma once
// Python's two string-formatting mini-languages as templates use them: `fmt % args`
// (printf-style, also the `format` filter) and `str.format(*args, **kwargs)`.

#include <string>

#include "jinja/jinja_value.h"

namespace minfer::jinja {

// Python's `fmt % args` for strings (%s %r %d %i %x %X %o %f %e %g %% with flags, width and
// precision; %(name)s with a dict). `args`: a tuple (positional), a dict or a single value.
std::string percent_format(const std::string& fmt, const Value& args);

// Python's str.format(*args, **kwargs) with {} / {0} / {name} fields, attribute and index
// lookups ({0.x}, {0[k]}), !r, and format specs [[fill]align][sign][0][width][,][.precision][type].
std::string python_str_format(const std::string& format, const CallArgs& args);

}  // namespace minfer::jinja
