#include "server/slot_actions.h"

#include <gtest/gtest.h>

#include "server/api_error.h"

namespace specdec::server {
namespace {

// The 400's message, or "" when the request parses.
std::string refusal(std::string_view id, std::string_view target, std::string_view body,
                    int32_t n_slots = 2) {
  try {
    parse_slot_action(id, target, body, n_slots);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    return e.what();
  }
  return "";
}

TEST(SlotActions, ParsesTheSlotTheActionAndTheFilename) {
  EXPECT_EQ(slot_path_id("/slots/1"), "1");
  EXPECT_EQ(slot_path_id("/slots/"), std::nullopt);
  EXPECT_EQ(slot_path_id("/slots"), std::nullopt);
  EXPECT_EQ(slot_path_id("/slotsx/1"), std::nullopt);

  SlotActionRequest r =
      parse_slot_action("1", "/slots/1?action=save", R"({"filename":"a.bin"})", 2);
  EXPECT_EQ(r.slot, 1);
  EXPECT_EQ(r.action, SlotAction::Save);
  EXPECT_EQ(r.filename, "a.bin");
  r = parse_slot_action("0", "/slots/0?x=1&action=restore", R"({"filename":"my cache"})", 2);
  EXPECT_EQ(r.action, SlotAction::Restore);
  EXPECT_EQ(r.filename, "my cache");
  // Erase needs no body; percent-encoded names decode.
  r = parse_slot_action("0", "/slots/0?%61ction=%65rase", "", 2);
  EXPECT_EQ(r.action, SlotAction::Erase);
}

TEST(SlotActions, RefusesBadSlotsActionsAndFilenamesInLlamaServersWords) {
  const std::string body = R"({"filename":"ok.bin"})";
  EXPECT_EQ(refusal("2", "/slots/2?action=save", body), "Invalid slot ID");
  EXPECT_EQ(refusal("-1", "/slots/-1?action=save", body), "Invalid slot ID");
  EXPECT_EQ(refusal("1x", "/slots/1x?action=save", body), "Invalid slot ID");
  EXPECT_EQ(refusal("99999999999", "/slots/99999999999?action=save", body), "Invalid slot ID");
  EXPECT_EQ(refusal("0", "/slots/0", body), "Invalid action");
  EXPECT_EQ(refusal("0", "/slots/0?action=load", body), "Invalid action");
  EXPECT_NE(refusal("0", "/slots/0?action=save", "{}").find("filename"), std::string::npos);
  EXPECT_NE(refusal("0", "/slots/0?action=save", R"({"filename":3})").find("filename"),
            std::string::npos);
  EXPECT_NE(refusal("0", "/slots/0?action=save", "not json"), "");
  for (const char* name : {"", "../x", "a/b", "a\\\\b", ".hidden", "x.", " x", "x ", "a:b", "a*b",
                           "a?b", "a|b", "a<b", "a\\u0001b", ".."}) {
    const nlohmann::json body_with_name{
        {"filename", nlohmann::json::parse(std::string("\"") + name + "\"")}};
    EXPECT_EQ(refusal("0", "/slots/0?action=restore", body_with_name.dump()), "Invalid filename")
        << name;
  }
  EXPECT_EQ(refusal("0", "/slots/0?action=save",
                    nlohmann::json{{"filename", std::string(256, 'a')}}.dump()),
            "Invalid filename");
  EXPECT_TRUE(valid_slot_filename(std::string(255, 'a')));
  EXPECT_TRUE(valid_slot_filename("système.bin"));
}

TEST(SlotActions, ResponsesCarryLlamaServersFields) {
  SlotActionRequest r;
  r.slot = 1;
  r.filename = "f.bin";
  const Engine::SlotFileStats s{.tokens = 10, .draft_tokens = 9, .bytes = 1234};
  const auto saved = slot_saved_json(r, s, 2.5);
  EXPECT_EQ(saved["id_slot"], 1);
  EXPECT_EQ(saved["filename"], "f.bin");
  EXPECT_EQ(saved["n_saved"], 10);
  EXPECT_EQ(saved["n_saved_draft"], 9);
  EXPECT_EQ(saved["n_written"], 1234);
  EXPECT_EQ(saved["timings"]["save_ms"], 2.5);
  const auto restored = slot_restored_json(r, s, 1.0);
  EXPECT_EQ(restored["n_restored"], 10);
  EXPECT_EQ(restored["n_read"], 1234);
  EXPECT_EQ(restored["timings"]["restore_ms"], 1.0);
  EXPECT_EQ(slot_erased_json(r, 7), (nlohmann::json{{"id_slot", 1}, {"n_erased", 7}}));
}

}  // namespace
}  // namespace specdec::server
