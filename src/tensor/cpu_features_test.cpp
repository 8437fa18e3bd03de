// The decode prefetch choice (tensor/cpu_features.h): the environment wins, the vendor decides
// otherwise, and a bad value is reported and ignored.
#include "tensor/cpu_features.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace specdec {
namespace {

TEST(DecodePrefetch, VendorDecidesWithoutEnvironment) {
  EXPECT_EQ(choose_decode_prefetch(nullptr, true), DecodePrefetch::kL2Far);
  EXPECT_EQ(choose_decode_prefetch(nullptr, false), DecodePrefetch::kL1Near);
  EXPECT_EQ(choose_decode_prefetch("", true), DecodePrefetch::kL2Far);
  EXPECT_EQ(choose_decode_prefetch("", false), DecodePrefetch::kL1Near);
}

TEST(DecodePrefetch, EnvironmentOverridesVendor) {
  for (const bool intel : {false, true}) {
    bool unknown = false;
    EXPECT_EQ(choose_decode_prefetch("l1", intel, &unknown), DecodePrefetch::kL1Near);
    EXPECT_EQ(choose_decode_prefetch("l2", intel, &unknown), DecodePrefetch::kL2Far);
    EXPECT_FALSE(unknown);
  }
}

TEST(DecodePrefetch, UnknownValueIsReportedAndIgnored) {
  for (const char* bad : {"L2", "l3", "far", " l1"}) {
    bool unknown = false;
    EXPECT_EQ(choose_decode_prefetch(bad, true, &unknown), DecodePrefetch::kL2Far) << bad;
    EXPECT_TRUE(unknown) << bad;
    unknown = false;
    EXPECT_EQ(choose_decode_prefetch(bad, false, &unknown), DecodePrefetch::kL1Near) << bad;
    EXPECT_TRUE(unknown) << bad;
  }
}

TEST(DecodePrefetch, ThisProcessFollowsItsEnvironmentAndVendor) {
  EXPECT_EQ(decode_prefetch(),
            choose_decode_prefetch(std::getenv("SPECDEC_DECODE_PREFETCH"), cpu_is_intel()));
}

}  // namespace
}  // namespace specdec
