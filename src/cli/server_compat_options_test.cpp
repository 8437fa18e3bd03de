// llama-server's remaining common flags (cli/server_compat_options.h): taken, noted, or refused.
#include "cli/server_compat_options.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"

namespace specdec::cli {
namespace {

ServerCompatOptions parse(const std::vector<std::string>& args) {
  ServerCompatOptions o;
  ArgParser p("test", "");
  add_server_compat_options(p, o);
  p.parse(args);
  return o;
}

TEST(ServerCompatOptions, TimeoutIsKeptAndTheRestNoted) {
  const ServerCompatOptions o = parse({"-to",
                                       "600",
                                       "-b",
                                       "2048",
                                       "--ubatch-size",
                                       "512",
                                       "--keep",
                                       "-1",
                                       "--no-context-shift",
                                       "--cache-reuse",
                                       "256",
                                       "--no-warmup",
                                       "--slots",
                                       "--props",
                                       "--threads-http",
                                       "-1",
                                       "-sps",
                                       "0.5",
                                       "--numa",
                                       "isolate"});
  ASSERT_TRUE(o.timeout_s.has_value());
  EXPECT_EQ(*o.timeout_s, 600);
  EXPECT_FALSE(o.context_shift);
  std::ostringstream log;
  check_server_compat_options(o, log);
  const std::string s = log.str();
  for (const char* note :
       {"--batch-size 2048 changes nothing", "--ubatch-size 512 changes nothing",
        "--keep -1 changes nothing: specdec never shifts the context",
        "--cache-reuse 256 changes nothing", "--threads-http -1 changes nothing",
        "--slot-prompt-similarity 0.5 changes nothing", "--numa isolate changes nothing"}) {
    EXPECT_NE(s.find(note), std::string::npos) << note << "\n" << s;
  }
  // What specdec always does is accepted without a word.
  EXPECT_EQ(s.find("warmup"), std::string::npos) << s;
  EXPECT_EQ(s.find("--slots"), std::string::npos) << s;
  EXPECT_EQ(s.find("context-shift"), std::string::npos) << s;
  // Nothing given: nothing set, nothing said.
  std::ostringstream quiet;
  check_server_compat_options(parse({}), quiet);
  EXPECT_TRUE(quiet.str().empty());
  EXPECT_FALSE(parse({}).timeout_s.has_value());
}

TEST(ServerCompatOptions, ContextShiftAndBadValuesAreRefused) {
  std::ostringstream log;
  EXPECT_THROW(check_server_compat_options(parse({"--context-shift"}), log), Error);
  // The last of --context-shift / --no-context-shift wins, as in llama.cpp.
  EXPECT_NO_THROW(
      check_server_compat_options(parse({"--context-shift", "--no-context-shift"}), log));
  for (const auto& bad : std::vector<std::vector<std::string>>{{"-b", "0"},
                                                               {"-ub", "x"},
                                                               {"--keep", "-2"},
                                                               {"-to", "0"},
                                                               {"--timeout", "4000"},
                                                               {"-sps", "1.5"},
                                                               {"--numa", "all"},
                                                               {"--cache-reuse", "-1"}}) {
    EXPECT_THROW(parse(bad), Error) << bad[0] << " " << bad[1];
  }
}

}  // namespace
}  // namespace specdec::cli
