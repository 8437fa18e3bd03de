#include "gguf/file_type.h"

#include <gtest/gtest.h>

namespace specdec::gguf {
namespace {

TEST(FileType, FileTypesAndSizesAreNamedAsOllamaNamesThem) {
  EXPECT_EQ(file_type_name(15), "Q4_K_M");
  EXPECT_EQ(file_type_name(7), "Q8_0");
  EXPECT_EQ(file_type_name(1), "F16");
  EXPECT_EQ(file_type_name(-1), "unknown");
  EXPECT_EQ(file_type_name(4), "unknown");  // a retired llama.cpp type
  EXPECT_EQ(parameter_size(1'543'714'304), "1.5B");
  EXPECT_EQ(parameter_size(494'032'768), "494M");
  EXPECT_EQ(parameter_size(120'500), "120K");
}

}  // namespace
}  // namespace specdec::gguf
