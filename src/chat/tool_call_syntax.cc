#include "chat/tool_call_syntax.h"

#include <iterator>

#include "chat/chat_template.h"
#include "format/json_util.h"

namespace tessera {

namespace {

constexpr ToolCallSyntax kAllSyntaxes[] = {ToolCallSyntax::kNone, ToolCallSyntax::kHermes,
                                           ToolCallSyntax::kLlama3Json, ToolCallSyntax::kGemmaJson,
                                           ToolCallSyntax::kQwen3Xml};

}  // namespace

const char* ToolCallSyntaxName(ToolCallSyntax syntax) {
  switch (syntax) {
    case ToolCallSyntax::kNone:
      return "none";
    case ToolCallSyntax::kHermes:
      return "hermes";
    case ToolCallSyntax::kLlama3Json:
      return "llama3_json";
    case ToolCallSyntax::kGemmaJson:
      return "gemma_json";
    case ToolCallSyntax::kQwen3Xml:
      return "qwen3_xml";
  }
  return "none";
}

std::string ToolCallSyntaxNames() {
  std::string names;
  const size_t n = std::size(kAllSyntaxes);
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) names += i + 1 == n ? " or " : ", ";
    names += ToolCallSyntaxName(kAllSyntaxes[i]);
  }
  return names;
}

Expected<ToolCallSyntax> ToolCallSyntaxFromName(std::string_view name, std::string_view what) {
  for (ToolCallSyntax s : kAllSyntaxes) {
    if (name == ToolCallSyntaxName(s)) return s;
  }
  return InvalidArgument(std::string(what) + " must be " + ToolCallSyntaxNames() + ", got " +
                         QuoteForMessage(name));
}

ToolCallSyntax DetectToolCallSyntax(std::string_view source) {
  auto has = [&](std::string_view marker) { return source.find(marker) != std::string_view::npos; };
  if (has("<function=") && has("<parameter=")) return ToolCallSyntax::kQwen3Xml;
  if (has("<tool_call>")) return ToolCallSyntax::kHermes;
  if (has("<|python_tag|>") || has("<|start_header_id|>")) return ToolCallSyntax::kLlama3Json;
  if (has("<start_of_turn>")) return ToolCallSyntax::kGemmaJson;
  return ToolCallSyntax::kNone;
}

const char* ToolCallSyntaxSourceName(ToolCallSyntaxSource source) {
  switch (source) {
    case ToolCallSyntaxSource::kOption:
      return "--tool-call-syntax";
    case ToolCallSyntaxSource::kCatalog:
      return "catalog";
    case ToolCallSyntaxSource::kTemplate:
      return "guessed from the chat template";
    case ToolCallSyntaxSource::kNoTemplate:
      return "no chat template";
  }
  return "guessed from the chat template";
}

std::string ToolCallSyntaxChoice::Describe() const {
  return std::string(ToolCallSyntaxName(syntax)) + " (" + ToolCallSyntaxSourceName(source) + ")";
}

ToolCallSyntaxChoice ChooseToolCallSyntax(std::optional<ToolCallSyntax> option,
                                          std::optional<ToolCallSyntax> declared,
                                          const ChatTemplateConfig* chat_template,
                                          const std::function<void(const std::string&)>& log) {
  const ToolCallSyntax markers =
      chat_template ? DetectToolCallSyntax(chat_template->source) : ToolCallSyntax::kNone;
  const bool renders_tools = chat_template && chat_template->renders_tools;
  if (!option && !declared && !chat_template) {
    return ToolCallSyntaxChoice{ToolCallSyntax::kNone, ToolCallSyntaxSource::kNoTemplate};
  }
  if (!option && !declared) {
    const ToolCallSyntaxChoice guess{markers, ToolCallSyntaxSource::kTemplate};
    // A guess reads substrings of the template, so it can be wrong: the log says how to
    // overrule it.
    if (log && renders_tools) {
      log(std::string("tool-call syntax ") + ToolCallSyntaxName(guess.syntax) +
          " guessed from the chat template, as no catalog entry declares one for this model; if "
          "the model writes its calls another way, declare it with serve --tool-call-syntax " +
          ToolCallSyntaxNames());
    }
    return guess;
  }
  const ToolCallSyntaxChoice chosen =
      option ? ToolCallSyntaxChoice{*option, ToolCallSyntaxSource::kOption}
             : ToolCallSyntaxChoice{*declared, ToolCallSyntaxSource::kCatalog};
  // A declaration the template contradicts is kept, and said, so that a refusal of tools or
  // calls coming back as plain text can be traced to it.
  if (log && chosen.syntax != ToolCallSyntax::kNone && chat_template && !renders_tools) {
    log("tool-call syntax " + chosen.Describe() +
        ", but the chat template renders no tools: requests with tools are refused");
  } else if (log && renders_tools && markers != ToolCallSyntax::kNone && markers != chosen.syntax) {
    log("tool-call syntax " + chosen.Describe() + ", although the chat template's markers look " +
        "like " + ToolCallSyntaxName(markers) + "; if tool calls come back as plain text, " +
        "correct the declaration");
  }
  return chosen;
}

}  // namespace tessera
