// An independent JSON Schema validator for the keywords the grammar supports, written from the
// specification (not from the grammar code) to check what the grammar generates.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace tessera::test {

// True when `value` satisfies `schema`; otherwise false with the reason in *why. `root` is the
// document $refs resolve against.
bool ValidateJson(const nlohmann::json& value, const nlohmann::json& schema,
                  const nlohmann::json& root, std::string* why);

}  // namespace tessera::test
