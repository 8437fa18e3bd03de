// A small llama.cpp-style command-line parser: multi-letter single-dash aliases (-md, -ngl)
// are allowed, values follow as the next argument or after '=', and every option carries its
// help text so --help documents all of them. Any mistake throws specdec::Error with a one-line
// message naming the argument.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace specdec::cli {

class ArgParser {
 public:
  ArgParser(std::string usage, std::string summary);

  // A flag with no value.
  void add_flag(std::vector<std::string> names, std::string help, bool& target);
  // A value parsed by `apply`, which throws specdec::Error with a reason on bad input.
  void add_value(std::vector<std::string> names, std::string value_name, std::string help,
                 std::function<void(const std::string& value)> apply);
  // A value that may be left out: `--name` alone calls apply(""), `--name=VALUE` apply(VALUE);
  // the next argument is never taken as its value (GNU style, as in `ls --color[=WHEN]`).
  void add_optional_value(std::vector<std::string> names, std::string value_name, std::string help,
                          std::function<void(const std::string& value)> apply);
  // Typed helpers: the value must parse completely and lie in [min, max].
  void add_string(std::vector<std::string> names, std::string value_name, std::string help,
                  std::string& target);
  void add_strings(std::vector<std::string> names, std::string value_name, std::string help,
                   std::vector<std::string>& target);  // repeatable
  void add_int(std::vector<std::string> names, std::string value_name, std::string help,
               int32_t& target, int64_t min, int64_t max);
  void add_u64(std::vector<std::string> names, std::string value_name, std::string help,
               uint64_t& target);
  void add_float(std::vector<std::string> names, std::string value_name, std::string help,
                 float& target, double min, double max);

  // The option added last also runs `also` after it takes a value (e.g. to record that it was
  // given, where its default cannot tell).
  void also_when_given(std::function<void()> also);

  // Parses args (without the program and command names). Returns false if --help/-h was given
  // (the caller prints help()), true otherwise. Throws specdec::Error on any bad argument.
  bool parse(std::span<const std::string> args);
  std::string help() const;

 private:
  struct Option {
    std::vector<std::string> names;
    std::string value_name;  // empty for flags
    std::string help;
    std::function<void(const std::string&)> apply;
    std::string default_text;
    bool optional_value = false;  // add_optional_value
  };
  const Option* find(std::string_view name) const;
  std::string usage_, summary_;
  std::vector<Option> options_;
};

// Strict number parsing shared by the typed helpers and by the server's request validation.
int64_t parse_int(std::string_view text, std::string_view what);
double parse_float(std::string_view text, std::string_view what);
// The items of a comma-separated flag value; throws on an empty item or an empty list.
std::vector<std::string> split_list(const std::string& value, const char* flag);

}  // namespace specdec::cli
