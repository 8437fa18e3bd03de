// Ranges of decimal numbers as GBNF. A range of unsigned integers [a, b] splits by digit count;
// within one count, by the first digit where a and b differ: a's digit followed by anything at
// least the rest of a, the digits between followed by anything, b's digit followed by anything
// at most the rest of b. Signed ranges are a negative part ("-" and a range of magnitudes) and a
// non-negative one; fractions only matter at the bounds themselves (at an inclusive upper bound
// b the fraction must be zero, at an exclusive lower bound a it must not be).
#include "grammar/number_range.h"

#include <string>
#include <vector>

#include "common/error.h"

namespace specdec {
namespace {

constexpr int kMaxDigits = 20;  // as the schema converter's unbounded integers

std::string join(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out.append(i ? " | " : "").append(alts[i]);
  return out + ")";
}

std::string any_digits(size_t n) {
  if (n == 0) return "";
  return n == 1 ? "[0-9]" : str_cat("[0-9]{", n, "}");
}

std::string digit_class(char lo, char hi) {
  if (lo == hi) return str_cat("\"", lo, "\"");
  return str_cat("[", lo, "-", hi, "]");
}

// Digit strings of one length (leading zeros allowed) between a and b, a <= b.
std::string same_length(const std::string& a, const std::string& b) {
  const size_t n = a.size();
  if (n == 0) return "";
  if (a == b) return str_cat("\"", a, "\"");
  if (a[0] == b[0]) return str_cat("\"", a[0], "\" ", same_length(a.substr(1), b.substr(1)));
  const std::string rest_a = a.substr(1), rest_b = b.substr(1);
  const bool a_floor = rest_a.find_first_not_of('0') == std::string::npos;
  const bool b_ceil = rest_b.find_first_not_of('9') == std::string::npos;
  std::vector<std::string> alts;
  // Whole blocks of the first digit where the rest is free: merged into one class.
  const char lo = a_floor ? a[0] : static_cast<char>(a[0] + 1);
  const char hi = b_ceil ? b[0] : static_cast<char>(b[0] - 1);
  if (!a_floor) {
    alts.push_back(str_cat("\"", a[0], "\" ", same_length(rest_a, std::string(n - 1, '9'))));
  }
  if (lo <= hi) {
    const std::string tail = any_digits(n - 1);
    alts.push_back(tail.empty() ? digit_class(lo, hi) : str_cat(digit_class(lo, hi), " ", tail));
  }
  if (!b_ceil) {
    alts.push_back(str_cat("\"", b[0], "\" ", same_length(std::string(n - 1, '0'), rest_b)));
  }
  return join(alts);
}

// Unsigned integers without leading zeros in [a, b]; b absent: up to kMaxDigits digits.
std::vector<std::string> uint_range(uint64_t a, std::optional<uint64_t> b) {
  std::vector<std::string> alts;
  const std::string sa = std::to_string(a);
  const size_t max_len = b ? std::to_string(*b).size() : kMaxDigits;
  for (size_t len = sa.size(); len <= max_len; ++len) {
    const std::string lo =
        len == sa.size() ? sa : (len == 1 ? "0" : "1" + std::string(len - 1, '0'));
    if (!b && len > sa.size()) {
      // Every longer length at once.
      const size_t extra_lo = len - 1, extra_hi = kMaxDigits - 1;
      alts.push_back(extra_lo == extra_hi ? str_cat("[1-9] ", any_digits(extra_lo))
                                          : str_cat("[1-9] [0-9]{", extra_lo, ",", extra_hi, "}"));
      break;
    }
    const std::string hi = (b && len == max_len) ? std::to_string(*b) : std::string(len, '9');
    if (lo.size() == hi.size() && lo <= hi) alts.push_back(same_length(lo, hi));
  }
  return alts;
}

// What may follow the integer part where it is at or between the bounds.
enum class Fraction { kNone, kZero, kAny, kNonzero };

Fraction meet(Fraction x, Fraction y) {
  if (x == Fraction::kNone || y == Fraction::kNone) return Fraction::kNone;
  if (x == Fraction::kAny) return y;
  if (y == Fraction::kAny) return x;
  return x == y ? x : Fraction::kNone;  // zero and nonzero: nothing
}

std::string fraction_text(Fraction f) {
  switch (f) {
    case Fraction::kAny:
      return R"(( "." [0-9]{1,20} )?)";
    case Fraction::kZero:
      return R"(( "." "0"{1,20} )?)";
    case Fraction::kNonzero:
      return R"("." "0"{0,19} [1-9] [0-9]{0,19})";
    case Fraction::kNone:
      break;
  }
  return "";
}

struct Magnitude {
  uint64_t value;
  bool inclusive;
};

// Non-negative values I.F (or integers I when !fractions) between the bounds: lo absent is 0
// inclusive, hi absent is open.
void magnitudes(std::optional<Magnitude> lo, std::optional<Magnitude> hi, bool fractions,
                std::vector<std::string>& alts) {
  const uint64_t a = lo ? lo->value : 0;
  const bool a_inclusive = lo ? lo->inclusive : true;
  if (hi && hi->value < a) return;
  const auto with = [&](const std::vector<std::string>& ints, Fraction f) {
    if (f == Fraction::kNone || ints.empty()) return;
    if (!fractions) {
      if (f == Fraction::kNonzero) return;  // an integer has no fraction
      alts.insert(alts.end(), ints.begin(), ints.end());
      return;
    }
    alts.push_back(str_cat(join(ints), " ", fraction_text(f)));
  };
  Fraction at_a = a_inclusive ? Fraction::kAny : Fraction::kNonzero;
  if (hi && hi->value == a) at_a = meet(at_a, hi->inclusive ? Fraction::kZero : Fraction::kNone);
  // Integer parts strictly inside: any fraction; a itself joins them when it allows any too.
  const bool merge_a = at_a == Fraction::kAny;
  const uint64_t inside_from = merge_a ? a : a + 1;
  if (!hi) {
    with(uint_range(inside_from, std::nullopt), Fraction::kAny);
  } else if (hi->value >= 1 && inside_from <= hi->value - 1) {
    with(uint_range(inside_from, hi->value - 1), Fraction::kAny);
  }
  if (!merge_a) with(uint_range(a, a), at_a);
  if (hi && hi->value > a) {
    with(uint_range(hi->value, hi->value), hi->inclusive ? Fraction::kZero : Fraction::kNone);
  }
}

uint64_t magnitude_of(int64_t v) {
  return v < 0 ? uint64_t{0} - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
}

std::string range(std::optional<NumberBound> lo, std::optional<NumberBound> hi, bool fractions) {
  std::vector<std::string> negative, non_negative;
  // Values below zero: "-" and a magnitude above zero, at most -lo, at least -hi.
  if (!lo || lo->value < 0) {
    std::optional<Magnitude> m_hi;
    if (lo) m_hi = Magnitude{magnitude_of(lo->value), lo->inclusive};
    Magnitude m_lo{0, false};  // no "-0"
    if (hi && hi->value < 0) m_lo = Magnitude{magnitude_of(hi->value), hi->inclusive};
    magnitudes(m_lo, m_hi, fractions, negative);
  }
  // Values at or above zero.
  if (!hi || hi->value >= 0) {
    std::optional<Magnitude> m_lo;
    if (lo && lo->value >= 0) m_lo = Magnitude{static_cast<uint64_t>(lo->value), lo->inclusive};
    std::optional<Magnitude> m_hi;
    if (hi) m_hi = Magnitude{static_cast<uint64_t>(hi->value), hi->inclusive};
    magnitudes(m_lo, m_hi, fractions, non_negative);
  }
  if (negative.empty() && non_negative.empty()) {
    fail("no ", fractions ? "number" : "integer", " lies between the bounds");
  }
  std::vector<std::string> alts;
  if (!negative.empty()) alts.push_back(str_cat("\"-\" ", join(negative)));
  if (!non_negative.empty()) alts.push_back(join(non_negative));
  return join(alts);
}

}  // namespace

std::string integer_range_gbnf(std::optional<NumberBound> lo, std::optional<NumberBound> hi) {
  return range(lo, hi, /*fractions=*/false);
}

std::string number_range_gbnf(std::optional<NumberBound> lo, std::optional<NumberBound> hi) {
  return range(lo, hi, /*fractions=*/true);
}

}  // namespace specdec
