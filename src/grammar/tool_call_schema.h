// JSON schemas of a tool call written as one JSON object, {"name": ..., "arguments": ...}
// ("parameters" in the Llama 3 form), built from an OpenAI `tools` array so that one grammar
// constrains both the function's name and its arguments. The XML form of Qwen3.5 has its own
// compiler (CompileXmlToolCalls in grammar.h).
//
//   if (!ToolsWellFormed(tools)) refuse;
//   ojson forced = ForcedToolCallSchema(tools, /*only=*/"get_weather", "arguments");
//   TS_ASSIGN_OR_RETURN(ojson any_call, AutoToolCallSchema(tools, "arguments"));
//   TS_ASSIGN_OR_RETURN(auto grammar, CompileJsonSchema(forced));
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "base/status.h"

namespace tessera {

// The shape the front end validates (an array of {"function": {"name": <string>, ...}}),
// checked again where a job reads its tools: the builders below index them unchecked.
bool ToolsWellFormed(const nlohmann::ordered_json& tools);

// A call to one of the functions (or only to `only` when it is not empty): its name one of
// theirs, its arguments (under `arguments_key`) following that function's parameter schema.
nlohmann::ordered_json ForcedToolCallSchema(const nlohmann::ordered_json& tools,
                                            std::string_view only, std::string_view arguments_key);

// The call a model opens under tool_choice auto with strict functions. A strict function's
// arguments follow its schema. Nothing promised a non-strict function's arguments a schema,
// so its schema guides them where it compiles and declares an object; where it does not (an
// unsupported keyword), or where the functions are more than one grammar follows at once
// (kMaxGrammarAlternatives), the non-strict functions share one alternative whose arguments
// are any JSON object. More strict functions than that limit, counting the shared
// alternative, are InvalidArgument.
Expected<nlohmann::ordered_json> AutoToolCallSchema(const nlohmann::ordered_json& tools,
                                                    std::string_view arguments_key);

}  // namespace tessera
