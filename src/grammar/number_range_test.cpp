#include "grammar/number_range.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "grammar/grammar.h"

namespace specdec {
namespace {

bool accepts(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  GrammarState s(g);
  return s.accept(text) && s.complete();
}

std::shared_ptr<const Grammar> compile(const std::string& expr) {
  return Grammar::parse(str_cat("root ::= ", expr, "\n"));
}

std::string describe(std::optional<NumberBound> lo, std::optional<NumberBound> hi) {
  return str_cat(lo ? str_cat(lo->inclusive ? "[" : "(", lo->value) : std::string("(-inf"), ", ",
                 hi ? str_cat(hi->value, hi->inclusive ? "]" : ")") : std::string("inf)"));
}

// Bounds to try: none, and each inclusive and exclusive at values around the digit-count and
// sign changes.
std::vector<std::optional<NumberBound>> bounds() {
  std::vector<std::optional<NumberBound>> out{std::nullopt};
  for (const int64_t v : {-101, -100, -10, -9, -1, 0, 1, 9, 10, 19, 20, 99, 100, 123}) {
    out.push_back(NumberBound{v, true});
    out.push_back(NumberBound{v, false});
  }
  return out;
}

bool within(int64_t scaled, int64_t scale, std::optional<NumberBound> lo,
            std::optional<NumberBound> hi) {
  if (lo && (lo->inclusive ? scaled < lo->value * scale : scaled <= lo->value * scale)) {
    return false;
  }
  if (hi && (hi->inclusive ? scaled > hi->value * scale : scaled >= hi->value * scale)) {
    return false;
  }
  return true;
}

TEST(NumberRange, IntegersAreExactlyThoseBetweenTheBounds) {
  for (const auto& lo : bounds()) {
    for (const auto& hi : bounds()) {
      const std::string what = describe(lo, hi);
      bool any = false;
      for (int64_t v = -150; v <= 150; ++v) any = any || within(v, 1, lo, hi);
      if (!any && lo && hi) {
        EXPECT_THROW(integer_range_gbnf(lo, hi), Error) << what;
        continue;
      }
      const std::string expr = integer_range_gbnf(lo, hi);
      std::shared_ptr<const Grammar> g;
      ASSERT_NO_THROW(g = compile(expr)) << what << "\n" << expr;
      for (int64_t v = -150; v <= 150; ++v) {
        ASSERT_EQ(accepts(g, std::to_string(v)), within(v, 1, lo, hi))
            << what << " value " << v << "\n"
            << expr;
      }
      // Only canonical spellings.
      for (const char* t : {"-0", "00", "01", "+1", "1.0", "1e1", "", "-"}) {
        EXPECT_FALSE(accepts(g, t)) << what << " " << t;
      }
    }
  }
}

TEST(NumberRange, NumbersWithFractionsAreExactlyThoseBetweenTheBounds) {
  // Values in hundredths, spelled with no, one or two fraction digits (and a trailing zero).
  struct Spelling {
    std::string text;
    int64_t hundredths;
  };
  std::vector<Spelling> spellings;
  for (int64_t v = -12500; v <= 12500; v += 25) {
    const int64_t mag = v < 0 ? -v : v;
    const std::string sign = v < 0 ? "-" : "";
    const std::string ip = std::to_string(mag / 100);
    const int64_t f = mag % 100;
    if (f == 0) {
      spellings.push_back({sign + ip, v});
      spellings.push_back({sign + ip + ".0", v});
      spellings.push_back({sign + ip + ".000", v});
    } else {
      const std::string fd = str_cat(f / 10, f % 10);
      spellings.push_back({sign + ip + "." + fd, v});
      if (f % 10 == 0) spellings.push_back({sign + ip + "." + fd.substr(0, 1), v});
    }
  }
  for (const auto& lo : bounds()) {
    for (const auto& hi : bounds()) {
      const std::string what = describe(lo, hi);
      std::string expr;
      try {
        expr = number_range_gbnf(lo, hi);
      } catch (const Error&) {
        // Nothing between: (a, a), [a, a), (a, a], or lo above hi.
        ASSERT_TRUE(lo && hi) << what;
        EXPECT_TRUE(lo->value > hi->value ||
                    (lo->value == hi->value && !(lo->inclusive && hi->inclusive)))
            << what;
        continue;
      }
      std::shared_ptr<const Grammar> g;
      ASSERT_NO_THROW(g = compile(expr)) << what << "\n" << expr;
      for (const Spelling& s : spellings) {
        ASSERT_EQ(accepts(g, s.text), within(s.hundredths, 100, lo, hi))
            << what << " " << s.text << "\n"
            << expr;
      }
      for (const char* t : {"-0", "-0.0", "00", "01.5", "1.", ".5", "1e1", "+1"}) {
        EXPECT_FALSE(accepts(g, t)) << what << " " << t;
      }
    }
  }
}

TEST(NumberRange, WideBoundsStayCompact) {
  const std::string e = integer_range_gbnf(NumberBound{-1000000000000000000, true},
                                           NumberBound{1000000000000000000, true});
  EXPECT_LT(e.size(), 2000u) << e;
  const auto g = compile(e);
  EXPECT_TRUE(accepts(g, "1000000000000000000"));
  EXPECT_FALSE(accepts(g, "1000000000000000001"));
  EXPECT_TRUE(accepts(g, "-999999999999999999"));
  // Open above: up to 20 digits, like the unbounded integers.
  const auto open = compile(integer_range_gbnf(NumberBound{5, true}, std::nullopt));
  EXPECT_TRUE(accepts(open, "99999999999999999999"));
  EXPECT_FALSE(accepts(open, "4"));
}

}  // namespace
}  // namespace specdec
