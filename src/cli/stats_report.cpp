#include "cli/stats_report.h"

#include <iomanip>
#include <sstream>
#include <string_view>

namespace specdec::cli {
namespace {

double per_second(double count, double ms) { return ms > 0 ? count * 1000.0 / ms : 0.0; }

}  // namespace

double mean_overlap(const DecodeStats& d) {
  double sum = 0;
  int64_t n = 0;
  for (const RoundLog& l : d.log) {
    for (float o : l.overlap) sum += o;
    n += static_cast<int64_t>(l.overlap.size());
  }
  return n > 0 ? sum / static_cast<double>(n) : 0.0;
}

namespace {}  // namespace

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 3) {
    bytes /= 1024.0;
    ++u;
  }
  std::ostringstream out;
  out << std::fixed << std::setprecision(u == 0 ? 0 : 1) << bytes << " " << units[u];
  return out.str();
}

std::string format_summary(const GenerationResult& r, double load_ms, uint64_t seed,
                           int n_threads) {
  const GenerationStats& s = r.stats;
  std::ostringstream out;
  out << std::fixed << std::setprecision(1);
  out << "\nload:      " << load_ms << " ms, " << n_threads << " threads, seed " << seed << "\n";
  if (s.prompt_tokens <= 1) {
    // The last prompt token is evaluated by the first decode step, so a one-token prompt has
    // no prefill to time (a rate would divide by ~0).
    out << "prompt:    " << s.prompt_tokens << " token (evaluated with the first generated one)\n";
  } else if (s.cached_tokens > 0) {
    // The rate is of the tokens read, not of those the cache held.
    const int32_t read = s.prompt_tokens - s.cached_tokens;
    out << "prompt:    " << s.prompt_tokens << " tokens, " << s.cached_tokens << " from the cache";
    if (read <= 1) {
      out << " (the last one evaluated with the first generated one)\n";
    } else {
      out << ", " << read << " read in " << s.prefill_ms << " ms ("
          << per_second(read, s.prefill_ms) << " tok/s)\n";
    }
  } else {
    out << "prompt:    " << s.prompt_tokens << " tokens in " << s.prefill_ms << " ms ("
        << per_second(s.prompt_tokens, s.prefill_ms) << " tok/s)\n";
  }
  out << "generated: " << s.generated_tokens << " tokens in " << s.decode_ms << " ms ("
      << per_second(s.generated_tokens, s.decode_ms)
      << " tok/s), finish: " << finish_reason_name(r.finish) << "\n";
  if (s.speculative) {
    const DecodeStats& d = s.spec;
    const double mean_accepted =
        d.rounds > 0 ? static_cast<double>(d.accepted) / static_cast<double>(d.rounds) : 0.0;
    out << "speculative: gamma " << s.draft_max << ", " << d.rounds << " rounds, " << d.drafted
        << " drafted, " << d.accepted << " accepted (" << 100.0 * d.acceptance_rate() << "%), "
        << std::setprecision(2) << mean_accepted << " accepted/round, "
        << d.tokens_per_target_call() << " tokens/target pass\n"
        << std::setprecision(1);
    // The drafter goes on the second line: scripts and tests parse "speculative: gamma N".
    out << "             drafter " << s.drafter;
    if (std::string_view(s.drafter) == "ngram") {
      out << " (n " << s.ngram.n_min << ".." << s.ngram.n_max << ") "
          << ngram_policy_name(s.ngram.policy);
      if (s.ngram.policy == NgramPolicy::Adaptive) {
        out << " (verify cost " << std::setprecision(2) << s.ngram.verify_cost << ", adapt rate "
            << s.ngram.adapt_rate << std::setprecision(1) << ")";
      }
    }
    out << ", " << d.baseline_steps << " target-only steps";
    if (std::string_view(s.drafter) == "ngram") out << " (no match or no room to draft)";
    if (d.dropped_rounds > 0) {
      out << " (" << d.dropped_rounds << " of them after " << d.dropped_drafts
          << " drafts dropped under --draft-min)";
    }
    out << "; draft " << d.draft_seconds * 1000.0 << " ms, verify " << d.verify_seconds * 1000.0
        << " ms; accepted per round:";
    for (size_t a = 0; a < d.accepted_hist.size(); ++a)
      out << " " << a << ":" << d.accepted_hist[a];
    out << "\n";
  }
  return out.str();
}

nlohmann::json stats_to_json(const GenerationResult& r, const GenerationOptions& o, int n_threads) {
  const GenerationStats& s = r.stats;
  nlohmann::json j;
  j["prompt_tokens"] = s.prompt_tokens;
  j["prefill_ms"] = s.prefill_ms;
  j["generated_tokens"] = s.generated_tokens;
  j["decode_ms"] = s.decode_ms;
  j["decode_tokens_per_s"] = per_second(s.generated_tokens, s.decode_ms);
  j["finish_reason"] = finish_reason_name(r.finish);
  j["threads"] = n_threads;
  j["sampling"] = {{"temperature", o.sampling.temperature},
                   {"top_k", o.sampling.top_k},
                   {"top_p", o.sampling.top_p},
                   {"min_p", o.sampling.min_p},
                   {"typical_p", o.sampling.typical_p},
                   {"top_n_sigma", o.sampling.top_n_sigma},
                   {"xtc_probability", o.sampling.xtc_probability},
                   {"xtc_threshold", o.sampling.xtc_threshold},
                   {"dynatemp_range", o.sampling.dynatemp_range},
                   {"dynatemp_exponent", o.sampling.dynatemp_exponent},
                   {"mirostat", o.sampling.mirostat},
                   {"mirostat_tau", o.sampling.mirostat_tau},
                   {"mirostat_eta", o.sampling.mirostat_eta},
                   {"seed", o.sampling.seed}};
  j["speculative"] = s.speculative;
  if (s.speculative) {
    const DecodeStats& d = s.spec;
    nlohmann::json spec;
    spec["drafter"] = s.drafter;
    if (std::string_view(s.drafter) == "ngram") {
      spec["ngram"] = {{"n_max", s.ngram.n_max},
                       {"n_min", s.ngram.n_min},
                       {"policy", ngram_policy_name(s.ngram.policy)},
                       {"verify_cost", s.ngram.verify_cost},
                       {"adapt_rate", s.ngram.adapt_rate}};
    }
    spec["gamma"] = s.draft_max;
    spec["rounds"] = d.rounds;
    spec["baseline_steps"] = d.baseline_steps;
    spec["dropped_rounds"] = d.dropped_rounds;
    spec["dropped_drafts"] = d.dropped_drafts;
    spec["drafted"] = d.drafted;
    spec["accepted"] = d.accepted;
    spec["emitted"] = d.emitted;
    spec["corrections"] = d.corrections;
    spec["bonus"] = d.bonus;
    spec["acceptance_rate"] = d.acceptance_rate();
    spec["mean_accepted_per_round"] =
        d.rounds > 0 ? static_cast<double>(d.accepted) / static_cast<double>(d.rounds) : 0.0;
    spec["tokens_per_target_pass"] = d.tokens_per_target_call();
    spec["analytic_acceptance_rate"] = mean_overlap(d);
    spec["accepted_histogram"] = d.accepted_hist;
    spec["draft_ms"] = d.draft_seconds * 1000.0;
    spec["verify_ms"] = d.verify_seconds * 1000.0;
    nlohmann::json rounds = nlohmann::json::array();
    for (const RoundLog& l : d.log) {
      rounds.push_back({{"gamma", l.gamma},
                        {"accepted", l.accepted},
                        {"emitted", l.emitted},
                        {"target_entropy", l.target_entropy},
                        {"overlap", l.overlap}});
    }
    spec["per_round"] = std::move(rounds);
    j["speculative_stats"] = std::move(spec);
  }
  return j;
}

}  // namespace specdec::cli
