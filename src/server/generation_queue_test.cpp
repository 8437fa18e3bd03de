#include "server/generation_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <latch>

#include "support/tiny_model.h"

namespace specdec::server {
namespace {

using namespace std::chrono_literals;

// Waits for a job's end, collecting its streamed text.
std::string drain(Job& job) {
  std::string text;
  for (int i = 0; i < 2000 && !job.wait(text, 10ms); ++i) {
  }
  return text;
}

GenerationOptions greedy(int32_t max_tokens) {
  GenerationOptions o;
  o.max_tokens = max_tokens;
  o.sampling.temperature = 0;
  o.ignore_eos = true;
  return o;
}

TEST(GenerationQueue, RunsJobsInOrderOnATinyModelLikeDirectCalls) {
  testing::TinyModelSpec spec;
  const std::string path = testing::write_tiny_model(spec, testing::temp_path("q.gguf"));
  LoadedModel model = LoadedModel::load(path);
  Engine engine(model, nullptr, EngineOptions{.n_ctx = 128, .n_threads = 1});
  const std::vector<std::vector<int32_t>> prompts = {engine.tokenize_prompt("hello"),
                                                     engine.tokenize_prompt("abc"),
                                                     engine.tokenize_prompt("hello there")};
  std::vector<std::string> expected;
  for (const auto& p : prompts) {
    expected.push_back(engine.generate(p, greedy(12), [](std::string_view) { return true; }).text);
  }

  Metrics metrics;
  GenerationQueue queue([&engine](std::span<const int32_t> p, const GenerationOptions& o,
                                  const TextCallback& cb, const LogprobCallback& lp,
                                  int32_t slot) { return engine.generate(p, o, cb, lp, slot); },
                        8, metrics);
  std::vector<std::shared_ptr<Job>> jobs;
  for (const auto& p : prompts) jobs.push_back(queue.submit(p, greedy(12)));
  for (size_t i = 0; i < jobs.size(); ++i) {
    ASSERT_NE(jobs[i], nullptr);
    const std::string streamed = drain(*jobs[i]);
    EXPECT_FALSE(jobs[i]->failed());
    EXPECT_EQ(jobs[i]->result().text, expected[i]);
    EXPECT_EQ(streamed, expected[i]);  // the streamed pieces add up to the whole text
    EXPECT_EQ(jobs[i]->result().stats.generated_tokens, 12);
  }
  const std::string m = metrics.render();
  EXPECT_NE(m.find("specdec_generation_finished_total 3\n"), std::string::npos) << m;
  EXPECT_NE(m.find("specdec_generated_tokens_total 36\n"), std::string::npos) << m;
  EXPECT_NE(m.find("specdec_requests_in_flight 0\n"), std::string::npos) << m;
}

// A runner that emits one piece of text per millisecond until cancelled or `limit` pieces, and
// blocks at its start until the test opens the gate.
struct FakeRunner {
  std::atomic<bool> gate_open{false};
  std::atomic<int> runs{0};
  int limit = 1'000'000;

  GenerationQueue::Runner runner() {
    return [this](std::span<const int32_t>, const GenerationOptions&, const TextCallback& cb,
                  const LogprobCallback&, int32_t) {
      ++runs;
      while (!gate_open.load()) std::this_thread::sleep_for(1ms);
      GenerationResult r;
      for (int i = 0; i < limit; ++i) {
        r.text += "x";
        ++r.stats.generated_tokens;
        if (!cb("x")) {
          r.finish = FinishReason::Cancelled;
          return r;
        }
        std::this_thread::sleep_for(1ms);
      }
      r.finish = FinishReason::Length;
      return r;
    };
  }

  // Submits a job and waits until a worker runs it (held at the gate).
  std::shared_ptr<Job> start_one(GenerationQueue& queue) {
    auto job = queue.submit({1}, {});
    for (int i = 0; i < 1000 && job && runs.load() == 0; ++i) std::this_thread::sleep_for(1ms);
    return job;
  }
};

TEST(GenerationQueue, FullQueueRefusesAndCancelledJobsAreSkippedOrStopped) {
  FakeRunner fake;
  Metrics metrics;
  GenerationQueue queue(fake.runner(), 2, metrics);
  auto running = fake.start_one(queue);
  ASSERT_NE(running, nullptr);
  ASSERT_EQ(fake.runs.load(), 1);  // the worker holds the first job
  auto queued1 = queue.submit({1}, {});
  auto queued2 = queue.submit({1}, {});
  ASSERT_NE(queued1, nullptr);
  ASSERT_NE(queued2, nullptr);
  EXPECT_EQ(queue.submit({1}, {}), nullptr);  // 2 waiting: full
  EXPECT_EQ(queue.queued(), 2u);

  queued1->cancel();  // skipped without running
  running->cancel();  // stops at its next piece of text
  fake.gate_open = true;
  drain(*running);
  EXPECT_EQ(running->result().finish, FinishReason::Cancelled);
  drain(*queued1);
  EXPECT_EQ(queued1->result().finish, FinishReason::Cancelled);
  std::string text;
  for (int i = 0; i < 1000 && text.size() < 3; ++i) queued2->wait(text, 10ms);
  EXPECT_GE(text.size(), 3u);      // the next job streams
  EXPECT_EQ(fake.runs.load(), 2);  // queued1 never ran
  queued2->cancel();
  drain(*queued2);

  const std::string m = metrics.render();
  EXPECT_NE(m.find("specdec_generation_requests_total 3\n"), std::string::npos) << m;
  EXPECT_NE(m.find("specdec_generation_cancelled_total 3\n"), std::string::npos) << m;
  EXPECT_NE(m.find("specdec_requests_in_flight 0\n"), std::string::npos) << m;
}

// A job cancelled while it waits leaves its place at the next submission, at once, not when a
// worker reaches it (an n > 1 request that could not be queued whole cancels the part that was).
TEST(GenerationQueue, CancelledWaitingJobsFreeTheirPlacesForTheNextSubmission) {
  FakeRunner fake;
  Metrics metrics;
  GenerationQueue queue(fake.runner(), 2, metrics);
  auto running = fake.start_one(queue);
  ASSERT_NE(running, nullptr);
  ASSERT_EQ(fake.runs.load(), 1);  // the worker holds the first job, gated
  auto a = queue.submit({1}, {});
  auto b = queue.submit({1}, {});
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(queue.submit({1}, {}), nullptr);  // full
  a->cancel();
  b->cancel();
  auto c = queue.submit({1}, {});  // the worker is still on the first job
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(queue.queued(), 1u);
  drain(*a);  // ended as cancelled without a worker
  drain(*b);
  EXPECT_EQ(a->result().finish, FinishReason::Cancelled);
  EXPECT_EQ(b->result().finish, FinishReason::Cancelled);
  running->cancel();
  c->cancel();
  fake.gate_open = true;
  drain(*running);
  drain(*c);
  EXPECT_EQ(fake.runs.load(), 1);  // neither a, b nor c ran
  const std::string m = metrics.render();
  EXPECT_NE(m.find("specdec_generation_requests_total 4\n"), std::string::npos) << m;
  EXPECT_NE(m.find("specdec_generation_cancelled_total 4\n"), std::string::npos) << m;
  EXPECT_NE(m.find("specdec_requests_in_flight 0\n"), std::string::npos) << m;
}

TEST(GenerationQueue, ShutdownEndsTheRunningAndQueuedJobs) {
  FakeRunner fake;
  fake.gate_open = true;
  Metrics metrics;
  auto queue = std::make_unique<GenerationQueue>(fake.runner(), 4, metrics);
  auto a = queue->submit({1}, {});
  auto b = queue->submit({1}, {});
  std::string text;
  a->wait(text, 1s);
  queue->shutdown();
  EXPECT_TRUE(a->wait(text, 0ms));
  EXPECT_TRUE(b->wait(text, 0ms));
  EXPECT_EQ(b->result().finish, FinishReason::Cancelled);
  EXPECT_EQ(queue->submit({1}, {}), nullptr);  // no more work after shutdown
  queue.reset();                               // a second shutdown is harmless
}

TEST(GenerationQueue, ARunnerThatThrowsFailsOnlyItsJob) {
  Metrics metrics;
  std::atomic<int> calls{0};
  GenerationQueue queue(
      [&calls](std::span<const int32_t>, const GenerationOptions&, const TextCallback&,
               const LogprobCallback&, int32_t) {
        if (calls++ == 0) throw std::runtime_error("boom");
        GenerationResult r;
        r.text = "ok";
        return r;
      },
      4, metrics);
  auto bad = queue.submit({1}, {});
  auto good = queue.submit({1}, {});
  drain(*bad);
  drain(*good);
  EXPECT_TRUE(bad->failed());
  EXPECT_EQ(bad->error(), "boom");
  EXPECT_FALSE(good->failed());
  EXPECT_EQ(good->result().text, "ok");
  EXPECT_NE(metrics.render().find("specdec_generation_failed_total 1\n"), std::string::npos);
}

TEST(GenerationQueue, LogprobsTravelWithTheTextTheyBelongTo) {
  Metrics metrics;
  GenerationQueue queue(
      [](std::span<const int32_t>, const GenerationOptions&, const TextCallback& cb,
         const LogprobCallback& lp, int32_t) {
        const TokenLogprob a{1, -0.5f, {}}, b{2, -1.5f, {}}, end{3, -0.1f, {}};
        lp(std::span(&a, 1));
        cb("one");
        lp(std::span(&b, 1));
        cb("two");
        lp(std::span(&end, 1));  // after the last text: delivered at the end
        GenerationResult r;
        r.text = "onetwo";
        return r;
      },
      4, metrics);
  auto job = queue.submit({1}, {});
  std::string text;
  std::vector<TokenLogprob> lps;
  while (!job->wait(text, 10ms, &lps)) {
  }
  EXPECT_EQ(text, "onetwo");
  ASSERT_EQ(lps.size(), 3u);
  EXPECT_EQ(lps[0].token, 1);
  EXPECT_EQ(lps[1].token, 2);
  EXPECT_EQ(lps[2].token, 3);
}

TEST(GenerationQueue, SeveralSlotsRunAtOnceAndJobsGoToTheSlotWithTheirPrefix) {
  Metrics metrics;
  std::atomic<int> concurrent{0}, most{0};
  std::mutex mu;
  std::vector<int32_t> slot_of(8, -1);
  // Slot s "caches" prompts that start with token 100 + s.
  GenerationQueue queue(
      [&](std::span<const int32_t> prompt, const GenerationOptions&, const TextCallback& cb,
          const LogprobCallback&, int32_t slot) {
        const int now = ++concurrent;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        {
          std::lock_guard lock(mu);
          slot_of[static_cast<size_t>(prompt[1])] = slot;
        }
        // The first three jobs wait (bounded) until all three run: they must run at once.
        if (prompt[0] == 7) {
          const auto deadline = std::chrono::steady_clock::now() + 5s;
          while (most.load() < 3 && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(1ms);
          }
        }
        cb("x");
        --concurrent;
        GenerationResult r;
        r.text.push_back('x');  // (GCC 12 warns falsely on assigning a literal here)
        return r;
      },
      8, metrics, 3,
      [](int32_t slot, std::span<const int32_t> prompt, const GenerationOptions&) -> size_t {
        return prompt[0] == 100 + slot ? 1 : 0;
      });
  // Three jobs at once run on three slots; then jobs whose prefix one slot caches go there.
  std::vector<std::shared_ptr<Job>> jobs;
  for (int32_t i = 0; i < 3; ++i) jobs.push_back(queue.submit({7, i}, {}));
  for (auto& j : jobs) drain(*j);
  EXPECT_EQ(most.load(), 3);
  jobs.clear();
  for (int32_t i = 3; i < 6; ++i) {
    jobs.push_back(queue.submit({100 + (i - 3), i}, {}));
    drain(*jobs.back());  // one at a time: every slot free, the prefix decides
  }
  EXPECT_EQ(slot_of[3], 0);
  EXPECT_EQ(slot_of[4], 1);
  EXPECT_EQ(slot_of[5], 2);
  EXPECT_NE(metrics.render().find("specdec_generation_finished_total 6\n"), std::string::npos);
}

TEST(GenerationQueue, SlotStatesShowTheRunningJobsPromptLimitAndTokens) {
  Metrics metrics;
  std::atomic<bool> release{false};
  std::atomic<int> started{0};
  GenerationQueue queue(
      [&](std::span<const int32_t>, const GenerationOptions& options, const TextCallback&,
          const LogprobCallback&, int32_t) {
        // As the engine does: the job's counter holds its committed tokens.
        if (options.decoded_counter) options.decoded_counter->store(5);
        ++started;
        const auto deadline = std::chrono::steady_clock::now() + 5s;
        while (!release.load() && std::chrono::steady_clock::now() < deadline) {
          std::this_thread::sleep_for(1ms);
        }
        return GenerationResult{};
      },
      4, metrics, 2);
  for (const GenerationQueue::SlotState& s : queue.slot_states()) {
    EXPECT_FALSE(s.processing);
    EXPECT_EQ(s.task, 0u);
  }
  GenerationOptions o;
  o.max_tokens = 33;
  const std::shared_ptr<Job> job = queue.submit({1, 2, 3}, o);
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (started.load() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  std::vector<GenerationQueue::SlotState> states = queue.slot_states();
  ASSERT_EQ(states.size(), 2u);
  const auto busy =
      std::find_if(states.begin(), states.end(), [](const auto& s) { return s.processing; });
  ASSERT_NE(busy, states.end());
  EXPECT_EQ(busy->task, 1u);
  EXPECT_EQ(busy->prompt_tokens, 3u);
  EXPECT_EQ(busy->options.max_tokens, 33);
  EXPECT_EQ(busy->decoded, 5);
  EXPECT_EQ(std::count_if(states.begin(), states.end(), [](const auto& s) { return s.processing; }),
            1);
  release = true;
  drain(*job);
  states = queue.slot_states();
  EXPECT_TRUE(
      std::none_of(states.begin(), states.end(), [](const auto& s) { return s.processing; }));
  // An idle slot keeps the number of the task it ran last.
  EXPECT_EQ(std::count_if(states.begin(), states.end(), [](const auto& s) { return s.task == 1; }),
            1);
}

}  // namespace
}  // namespace specdec::server

namespace specdec::server {
namespace {

TEST(GenerationQueue, ASlotActionWaitsForTheSlotsJobAndKeepsNewJobsOffTheSlot) {
  Metrics metrics;
  std::atomic<bool> release{false};
  std::mutex mu;
  std::vector<std::pair<int32_t, int32_t>> ran;  // (job, slot)
  std::atomic<bool> in_action{false};
  std::atomic<int> on_reserved_slot_during_action{0};
  GenerationQueue queue(
      [&](std::span<const int32_t> prompt, const GenerationOptions&, const TextCallback&,
          const LogprobCallback&, int32_t slot) {
        if (in_action.load() && slot == 0) ++on_reserved_slot_during_action;
        {
          std::lock_guard lock(mu);
          ran.emplace_back(prompt[0], slot);
        }
        if (prompt[0] == 1) {  // the first job holds slot 0 until released
          const auto deadline = std::chrono::steady_clock::now() + 5s;
          while (!release.load() && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(1ms);
          }
        }
        return GenerationResult{};
      },
      8, metrics, 2,
      // Every job prefers slot 0 (its "cache").
      [](int32_t slot, std::span<const int32_t>, const GenerationOptions&) -> size_t {
        return slot == 0 ? 1 : 0;
      });
  const std::shared_ptr<Job> first = queue.submit({1}, {});
  {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (std::chrono::steady_clock::now() < deadline) {
      std::lock_guard lock(mu);
      if (!ran.empty()) break;
    }
  }
  std::atomic<bool> action_done{false};
  bool ran_action = false;
  std::thread action([&] {
    ran_action = queue.with_idle_slot(0, [&] {
      in_action = true;
      // While the action runs, a job that prefers slot 0 goes to slot 1 instead.
      const std::shared_ptr<Job> during = queue.submit({3}, {});
      drain(*during);
      in_action = false;
    });
    action_done = true;
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(action_done.load());  // slot 0 is still running job 1
  release = true;
  drain(*first);
  action.join();
  EXPECT_TRUE(ran_action);
  EXPECT_EQ(on_reserved_slot_during_action.load(), 0);
  {
    std::lock_guard lock(mu);
    ASSERT_EQ(ran.size(), 2u);
    EXPECT_EQ(ran[1], std::make_pair(3, 1));
  }
  // Afterwards slot 0 takes jobs again; an action's exception passes through and frees it.
  EXPECT_THROW(queue.with_idle_slot(0, [] { throw std::runtime_error("x"); }), std::runtime_error);
  const std::shared_ptr<Job> after = queue.submit({4}, {});
  drain(*after);
  {
    std::lock_guard lock(mu);
    EXPECT_EQ(ran.back(), std::make_pair(4, 0));
  }
  queue.shutdown();
  EXPECT_FALSE(queue.with_idle_slot(0, [] { ADD_FAILURE() << "ran after shutdown"; }));
}

TEST(GenerationQueue, AJobPinnedToASlotWaitsForItWithoutHoldingUpTheOthers) {
  Metrics metrics;
  std::atomic<bool> release{false};
  std::mutex mu;
  std::vector<std::pair<int32_t, int32_t>> ran;  // (job, slot), in start order
  GenerationQueue queue(
      [&](std::span<const int32_t> prompt, const GenerationOptions&, const TextCallback&,
          const LogprobCallback&, int32_t slot) {
        {
          std::lock_guard lock(mu);
          ran.emplace_back(prompt[0], slot);
        }
        if (prompt[0] == 1) {  // holds slot 0 until released
          const auto deadline = std::chrono::steady_clock::now() + 5s;
          while (!release.load() && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(1ms);
          }
        }
        return GenerationResult{};
      },
      8, metrics, 2);
  const std::shared_ptr<Job> first = queue.submit({1}, {}, 0);
  for (auto deadline = std::chrono::steady_clock::now() + 5s;
       std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(1ms)) {
    std::lock_guard lock(mu);
    if (!ran.empty()) break;  // job 1 runs on slot 0
  }
  const std::shared_ptr<Job> pinned = queue.submit({2}, {}, 0);  // waits for slot 0
  const std::shared_ptr<Job> free_job = queue.submit({3}, {});   // takes slot 1 meanwhile
  drain(*free_job);
  EXPECT_EQ(free_job->slot(), 1);
  EXPECT_EQ(pinned->slot(), -1);  // not handed out yet
  release = true;
  drain(*first);
  drain(*pinned);
  EXPECT_EQ(first->slot(), 0);
  EXPECT_EQ(pinned->slot(), 0);
  std::lock_guard lock(mu);
  ASSERT_EQ(ran.size(), 3u);
  EXPECT_EQ(ran[0], std::make_pair(1, 0));
  EXPECT_EQ(ran[1], std::make_pair(3, 1));
  EXPECT_EQ(ran[2], std::make_pair(2, 0));
}

}  // namespace
}  // namespace specdec::server
