// serve's --tool-call-syntax: MODEL=SYNTAX entries (or a bare SYNTAX beside one model) set
// what each served model's worker load is told (ModelEntry::tool_call_syntax).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "worker/worker.h"

namespace tessera::worker {
namespace {

std::vector<ModelEntry> Served(const std::vector<std::string>& names) {
  std::vector<ModelEntry> models;
  for (const std::string& name : names) models.push_back({name, "/models/" + name});
  return models;
}

TEST(ToolCallSyntaxFlag, EachEntryDeclaresItsModelOnly) {
  std::vector<ModelEntry> models = Served({"a", "b", "c"});
  ASSERT_TRUE(DeclareToolCallSyntaxes(models, {"b=qwen3_xml", "c=none"}).ok());
  EXPECT_FALSE(models[0].tool_call_syntax.has_value());  // left to the catalog or the template
  EXPECT_EQ(models[1].tool_call_syntax, ToolCallSyntax::kQwen3Xml);
  EXPECT_EQ(models[2].tool_call_syntax, ToolCallSyntax::kNone);
  // A bare syntax names the one model served.
  std::vector<ModelEntry> one = Served({"only"});
  ASSERT_TRUE(DeclareToolCallSyntaxes(one, {"hermes"}).ok());
  EXPECT_EQ(one[0].tool_call_syntax, ToolCallSyntax::kHermes);
}

TEST(ToolCallSyntaxFlag, RefusesUnknownSyntaxesModelsAndAmbiguity) {
  struct Case {
    std::vector<std::string> models;
    std::string entry;
    std::string says;  // what the message must name
  };
  for (const Case& c :
       {Case{{"a"}, "a=mistral", ToolCallSyntaxNames()},
        Case{{"a"}, "mistral", ToolCallSyntaxNames()},
        Case{{"a"}, "b=hermes", "no served model is named b"},
        Case{{"a", "b"}, "hermes", "MODEL=SYNTAX"}, Case{{"a"}, "=hermes", "MODEL=SYNTAX"}}) {
    std::vector<ModelEntry> models = Served(c.models);
    Status st = DeclareToolCallSyntaxes(models, {c.entry});
    ASSERT_FALSE(st.ok()) << c.entry;
    EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(st.message().find("--tool-call-syntax '" + c.entry + "'"), std::string::npos)
        << st.message();
    EXPECT_NE(st.message().find(c.says), std::string::npos) << st.message();
    for (const ModelEntry& m : models) EXPECT_FALSE(m.tool_call_syntax.has_value()) << c.entry;
  }
}

}  // namespace
}  // namespace tessera::worker
