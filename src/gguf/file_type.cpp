#include "gguf/file_type.h"

#include <array>
#include <cstdio>
#include <utility>

namespace specdec::gguf {

std::string file_type_name(int64_t file_type) {
  // llama.cpp's enum llama_ftype, the values general.file_type holds.
  static const std::array<std::pair<int64_t, const char*>, 27> kNames = {{
      {0, "F32"},      {1, "F16"},      {2, "Q4_0"},    {3, "Q4_1"},    {7, "Q8_0"},
      {8, "Q5_0"},     {9, "Q5_1"},     {10, "Q2_K"},   {11, "Q3_K_S"}, {12, "Q3_K_M"},
      {13, "Q3_K_L"},  {14, "Q4_K_S"},  {15, "Q4_K_M"}, {16, "Q5_K_S"}, {17, "Q5_K_M"},
      {18, "Q6_K"},    {19, "IQ2_XXS"}, {20, "IQ2_XS"}, {21, "Q2_K_S"}, {22, "IQ3_XS"},
      {23, "IQ3_XXS"}, {24, "IQ1_S"},   {25, "IQ4_NL"}, {26, "IQ3_S"},  {27, "IQ3_M"},
      {30, "IQ4_XS"},  {32, "BF16"},
  }};
  for (const auto& [id, type] : kNames) {
    if (id == file_type) return type;
  }
  return "unknown";
}

std::string parameter_size(int64_t parameters) {
  char buf[32];
  if (parameters >= 1'000'000'000) {
    std::snprintf(buf, sizeof buf, "%.1fB", static_cast<double>(parameters) / 1e9);
  } else if (parameters >= 1'000'000) {
    std::snprintf(buf, sizeof buf, "%.0fM", static_cast<double>(parameters) / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.0fK", static_cast<double>(parameters) / 1e3);
  }
  return buf;
}

}  // namespace specdec::gguf
