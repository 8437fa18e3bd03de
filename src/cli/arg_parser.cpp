#include "cli/arg_parser.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "common/error.h"

namespace specdec::cli {

int64_t parse_int(std::string_view text, std::string_view what) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) {
    fail(what, " expects an integer, got '", text, "'");
  }
  return value;
}

double parse_float(std::string_view text, std::string_view what) {
  // strtod needs a terminated string; from_chars for double is fine in GCC 12 but strtod keeps
  // "1e-3"/"inf" handling identical to what users know from C tools.
  std::string s(text);
  char* end = nullptr;
  errno = 0;
  double value = s.empty() ? 0.0 : std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || errno == ERANGE || !std::isfinite(value)) {
    fail(what, " expects a number, got '", text, "'");
  }
  return value;
}

ArgParser::ArgParser(std::string usage, std::string summary)
    : usage_(std::move(usage)), summary_(std::move(summary)) {}

void ArgParser::add_flag(std::vector<std::string> names, std::string help, bool& target) {
  options_.push_back({std::move(names), "", std::move(help),
                      [&target](const std::string&) { target = true; }, ""});
}

void ArgParser::add_value(std::vector<std::string> names, std::string value_name, std::string help,
                          std::function<void(const std::string&)> apply) {
  options_.push_back(
      {std::move(names), std::move(value_name), std::move(help), std::move(apply), ""});
}

void ArgParser::add_optional_value(std::vector<std::string> names, std::string value_name,
                                   std::string help,
                                   std::function<void(const std::string&)> apply) {
  add_value(std::move(names), std::move(value_name), std::move(help), std::move(apply));
  options_.back().optional_value = true;
}

void ArgParser::add_string(std::vector<std::string> names, std::string value_name, std::string help,
                           std::string& target) {
  std::string def = target.empty() ? "" : "'" + target + "'";
  add_value(std::move(names), std::move(value_name), std::move(help),
            [&target](const std::string& v) { target = v; });
  options_.back().default_text = def;
}

void ArgParser::add_strings(std::vector<std::string> names, std::string value_name,
                            std::string help, std::vector<std::string>& target) {
  add_value(std::move(names), std::move(value_name), std::move(help),
            [&target](const std::string& v) { target.push_back(v); });
}

void ArgParser::add_int(std::vector<std::string> names, std::string value_name, std::string help,
                        int32_t& target, int64_t min, int64_t max) {
  std::string flag = names.front();
  add_value(std::move(names), std::move(value_name), std::move(help),
            [&target, flag, min, max](const std::string& v) {
              int64_t x = parse_int(v, flag);
              if (x < min || x > max) fail(flag, " must be in [", min, ", ", max, "], got ", x);
              target = static_cast<int32_t>(x);
            });
  options_.back().default_text = std::to_string(target);
}

void ArgParser::add_u64(std::vector<std::string> names, std::string value_name, std::string help,
                        uint64_t& target) {
  std::string flag = names.front();
  add_value(std::move(names), std::move(value_name), std::move(help),
            [&target, flag](const std::string& v) {
              int64_t x = parse_int(v, flag);
              if (x < 0) fail(flag, " must be >= 0, got ", x);
              target = static_cast<uint64_t>(x);
            });
  options_.back().default_text = std::to_string(target);
}

void ArgParser::add_float(std::vector<std::string> names, std::string value_name, std::string help,
                          float& target, double min, double max) {
  std::string flag = names.front();
  add_value(std::move(names), std::move(value_name), std::move(help),
            [&target, flag, min, max](const std::string& v) {
              double x = parse_float(v, flag);
              if (x < min || x > max) fail(flag, " must be in [", min, ", ", max, "], got ", v);
              target = static_cast<float>(x);
            });
  std::ostringstream def;
  def << target;
  options_.back().default_text = def.str();
}

void ArgParser::also_when_given(std::function<void()> also) {
  Option& o = options_.back();
  o.apply = [apply = std::move(o.apply), also = std::move(also)](const std::string& v) {
    apply(v);
    also();
  };
}

const ArgParser::Option* ArgParser::find(std::string_view name) const {
  for (const Option& o : options_) {
    for (const std::string& n : o.names) {
      if (n == name) return &o;
    }
  }
  return nullptr;
}

namespace {

// Runs an option's callback; an error that names the option by its first spelling names it as
// the command line did instead (--spec-draft-p-min, not --draft-p-min).
void apply_as_typed(const std::vector<std::string>& names, const std::string& typed,
                    const std::function<void(const std::string&)>& apply,
                    const std::string& value) {
  try {
    apply(value);
  } catch (const Error& e) {
    const std::string_view message = e.what();
    if (typed == names.front() || !message.starts_with(names.front())) throw;
    fail(typed, message.substr(names.front().size()));
  }
}

}  // namespace

bool ArgParser::parse(std::span<const std::string> args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") return false;
    std::string name = arg;
    std::string value;
    bool has_inline_value = false;
    if (arg.rfind("--", 0) == 0) {
      if (size_t eq = arg.find('='); eq != std::string::npos) {
        name = arg.substr(0, eq);
        value = arg.substr(eq + 1);
        has_inline_value = true;
      }
    }
    if (name.empty() || name[0] != '-' || name == "-" || name == "--") {
      fail("unexpected argument '", arg, "' (options start with '-'; see --help)");
    }
    const Option* opt = find(name);
    if (opt == nullptr) fail("unknown argument '", name, "' (see --help)");
    if (opt->optional_value) {
      apply_as_typed(opt->names, name, opt->apply, value);  // empty without '='
      continue;
    }
    if (opt->value_name.empty()) {
      if (has_inline_value) fail(name, " takes no value");
      apply_as_typed(opt->names, name, opt->apply, "");
      continue;
    }
    if (!has_inline_value) {
      if (i + 1 >= args.size()) fail(name, " needs a value (", opt->value_name, ")");
      value = args[++i];
    }
    apply_as_typed(opt->names, name, opt->apply, value);
  }
  return true;
}

std::string ArgParser::help() const {
  std::ostringstream out;
  out << "usage: " << usage_ << "\n\n" << summary_ << "\n\noptions:\n";
  for (const Option& o : options_) {
    std::string left = "  ";
    for (size_t i = 0; i < o.names.size(); ++i) left += (i ? ", " : "") + o.names[i];
    if (o.optional_value) {
      left += "[=" + o.value_name + "]";
    } else if (!o.value_name.empty()) {
      left += " " + o.value_name;
    }
    out << left;
    out << std::string(left.size() < 30 ? 30 - left.size() : 1, ' ') << o.help;
    // A help text that says its default in words ("threads (default: all cores)") is not
    // followed by the raw value too ("(default: 0)").
    if (!o.default_text.empty() && o.help.find("(default:") == std::string::npos) {
      out << " (default: " << o.default_text << ")";
    }
    out << "\n";
  }
  out << "  -h, --help                  show this help\n";
  return out.str();
}

std::vector<std::string> split_list(const std::string& value, const char* flag) {
  std::vector<std::string> items;
  std::stringstream in(value);
  for (std::string item; std::getline(in, item, ',');) {
    if (item.empty()) fail(flag, " has an empty item in '", value, "'");
    items.push_back(item);
  }
  if (items.empty()) fail(flag, " needs at least one value");
  return items;
}

}  // namespace specdec::cli
