// Helpers for the Jinja unit tests: render a template with a JSON context and get either the
// output or "ERROR: <message>".
//
//   EXPECT_EQ(Render("{{ 1 + 2 }}"), "3");
//   EXPECT_EQ(Render("{{ x }}", R"({"x": "hi"})"), "hi");
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "chat/jinja.h"

namespace tessera::jinja::test {

inline std::string Render(const std::string& source, const std::string& context_json = "{}",
                          const Limits& limits = {}) {
  auto tmpl = Template::Parse(source, limits);
  if (!tmpl) return "ERROR: " + tmpl.status().message();
  auto ctx = nlohmann::ordered_json::parse(context_json);
  auto out = tmpl->Render(ctx, limits);
  if (!out) return "ERROR: " + out.status().message();
  return *out;
}

inline bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

}  // namespace tessera::jinja::test
