// For the parsers' unit tests: the field a parser refuses a body for, checked to be a 400 whose
// message names that field in quotes.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "server/api_error.h"

namespace specdec::server::testing {

// `parse` takes the body; returns the refused field, or "" (and a test failure) if it accepted.
template <class Parse>
std::string refused_field(const Parse& parse, const nlohmann::json& body) {
  try {
    parse(body);
  } catch (const ApiError& err) {
    EXPECT_EQ(err.status(), 400);
    EXPECT_NE(std::string(err.what()).find("'" + err.param() + "'"), std::string::npos)
        << err.what();
    return err.param();
  }
  ADD_FAILURE() << "accepted: " << body.dump();
  return "";
}

}  // namespace specdec::server::testing
