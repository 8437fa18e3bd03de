#include "tensor/ggml_type.h"

#include <array>

#include "common/error.h"

namespace specdec {
namespace {

struct Entry {
  uint32_t id;
  TypeTraits traits;
};

// Block geometry as defined by ggml (QK4_0 = 32, QK_K = 256, ...). Types we know by id but do
// not implement are listed so that errors can name them.
constexpr std::array kTable = {
    Entry{0, {"F32", 1, 4, true}},          Entry{1, {"F16", 1, 2, true}},
    Entry{2, {"Q4_0", 32, 18, true}},       Entry{3, {"Q4_1", 32, 20, true}},
    Entry{6, {"Q5_0", 32, 22, true}},       Entry{7, {"Q5_1", 32, 24, true}},
    Entry{8, {"Q8_0", 32, 34, true}},       Entry{9, {"Q8_1", 32, 36, false}},
    Entry{10, {"Q2_K", 256, 84, false}},    Entry{11, {"Q3_K", 256, 110, false}},
    Entry{12, {"Q4_K", 256, 144, true}},    Entry{13, {"Q5_K", 256, 176, true}},
    Entry{14, {"Q6_K", 256, 210, true}},    Entry{15, {"Q8_K", 256, 292, false}},
    Entry{16, {"IQ2_XXS", 256, 66, false}}, Entry{17, {"IQ2_XS", 256, 74, false}},
    Entry{18, {"IQ3_XXS", 256, 98, false}}, Entry{19, {"IQ1_S", 256, 50, false}},
    Entry{20, {"IQ4_NL", 32, 18, false}},   Entry{21, {"IQ3_S", 256, 110, false}},
    Entry{22, {"IQ2_S", 256, 82, false}},   Entry{23, {"IQ4_XS", 256, 136, false}},
    Entry{24, {"I8", 1, 1, false}},         Entry{25, {"I16", 1, 2, false}},
    Entry{26, {"I32", 1, 4, false}},        Entry{27, {"I64", 1, 8, false}},
    Entry{28, {"F64", 1, 8, false}},        Entry{29, {"IQ1_M", 256, 56, false}},
    Entry{30, {"BF16", 1, 2, true}},        Entry{34, {"TQ1_0", 256, 54, false}},
    Entry{35, {"TQ2_0", 256, 66, false}},
};

}  // namespace

std::optional<TypeTraits> type_traits(uint32_t raw_type) {
  for (const auto& e : kTable) {
    if (e.id == raw_type) return e.traits;
  }
  return std::nullopt;
}

const TypeTraits& traits(GgmlType type) {
  for (const auto& e : kTable) {
    if (e.id == static_cast<uint32_t>(type)) return e.traits;
  }
  fail("unknown tensor type id ", static_cast<uint32_t>(type));
}

std::string_view type_name(GgmlType type) { return traits(type).name; }

size_t row_bytes(GgmlType type, int64_t n) {
  const TypeTraits& t = traits(type);
  return static_cast<size_t>(n / t.block_size) * t.type_size;
}

}  // namespace specdec
