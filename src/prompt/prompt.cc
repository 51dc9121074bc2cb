#include "prompt/prompt.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace tessera {

namespace {

using nlohmann::ordered_json;

// The marker brackets: U+FDD0 and U+FDD1 in UTF-8.
constexpr std::string_view kMarkerOpen = "\xEF\xB7\x90";
constexpr std::string_view kMarkerClose = "\xEF\xB7\x91";

std::string Marker(size_t index) {
  std::string m(kMarkerOpen);
  m += std::to_string(index);
  m += kMarkerClose;
  return m;
}

// Replaces each occurrence of a string of `marked` (leftmost, then longest: `marked` is sorted
// longest first) with its marker.
std::string MarkString(std::string_view text, const std::vector<std::string>& marked) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    size_t hit = marked.size();
    for (size_t i = 0; i < marked.size(); ++i) {
      if (text.substr(pos, marked[i].size()) == marked[i]) {
        hit = i;
        break;
      }
    }
    if (hit == marked.size()) {
      out += text[pos++];
      continue;
    }
    out += Marker(hit);
    pos += marked[hit].size();
  }
  return out;
}

// Every string in `value`, object keys included, with its special-token text marked.
ordered_json MarkJson(const ordered_json& value, const std::vector<std::string>& marked) {
  if (value.is_string()) return MarkString(value.get_ref<const std::string&>(), marked);
  if (value.is_array()) {
    ordered_json out = ordered_json::array();
    for (const auto& item : value) out.push_back(MarkJson(item, marked));
    return out;
  }
  if (value.is_object()) {
    ordered_json out = ordered_json::object();
    for (auto it = value.begin(); it != value.end(); ++it) {
      out[MarkString(it.key(), marked)] = MarkJson(it.value(), marked);
    }
    return out;
  }
  return value;
}

// Turns markers back into their text. Restored special-token text (index < protected_count)
// is recorded as a protected byte range of the result. A marker bracket that is not part of a
// well-formed marker (the template cut one apart) is kept as it is.
std::string RestoreMarkers(std::string_view rendered, const std::vector<std::string>& marked,
                           size_t protected_count,
                           std::vector<std::pair<size_t, size_t>>* protected_ranges) {
  std::string out;
  out.reserve(rendered.size());
  size_t pos = 0;
  while (pos < rendered.size()) {
    size_t open = rendered.find(kMarkerOpen, pos);
    if (open == std::string_view::npos) break;
    out.append(rendered.substr(pos, open - pos));
    size_t digits_begin = open + kMarkerOpen.size();
    size_t digits_end = digits_begin;
    size_t index = 0;
    // Indexes are below marked.size(), so eight digits are more than enough.
    while (digits_end < rendered.size() && digits_end - digits_begin < 8 &&
           rendered[digits_end] >= '0' && rendered[digits_end] <= '9') {
      index = index * 10 + static_cast<size_t>(rendered[digits_end] - '0');
      ++digits_end;
    }
    bool well_formed = digits_end > digits_begin && index < marked.size() &&
                       rendered.substr(digits_end, kMarkerClose.size()) == kMarkerClose;
    if (!well_formed) {
      out.append(kMarkerOpen);
      pos = digits_begin;
      continue;
    }
    size_t begin = out.size();
    out += marked[index];
    if (index < protected_count) protected_ranges->emplace_back(begin, out.size());
    pos = digits_end + kMarkerClose.size();
  }
  if (pos < rendered.size()) out.append(rendered.substr(pos));
  return out;
}

}  // namespace

Expected<PromptAssembler> PromptAssembler::Create(const ChatTemplateConfig& config,
                                                  const Tokenizer& tokenizer) {
  auto tmpl = jinja::Template::Parse(config.source);
  if (!tmpl) return tmpl.status().WithContext("chat template");
  std::vector<std::string> specials;
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (!tokenizer.IsSpecial(id)) continue;
    std::optional<std::string> text = tokenizer.IdToToken(id);
    if (text && !text->empty()) specials.push_back(std::move(*text));
  }
  // Longest first, so that a token whose text contains another's is marked whole.
  std::stable_sort(specials.begin(), specials.end(),
                   [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  specials.emplace_back(kMarkerOpen);
  specials.emplace_back(kMarkerClose);
  return PromptAssembler(config, std::move(*tmpl), tokenizer, std::move(specials));
}

Expected<AssembledPrompt> PromptAssembler::Assemble(const ordered_json& messages,
                                                    bool add_generation_prompt,
                                                    const ordered_json& kwargs,
                                                    const AssembleOptions& options) const {
  if (!messages.is_array()) return InvalidArgument("messages must be a JSON array");
  if (!kwargs.is_null() && !kwargs.is_object()) {
    return InvalidArgument("chat template kwargs must be a JSON object");
  }
  const bool mark = options.content_specials_are_text;
  // Tool calls and tools in the shapes templates expect (chat_template.h).
  TS_ASSIGN_OR_RETURN(
      ordered_json context,
      MakeToolChatContext(config_, messages, add_generation_prompt, nullptr, kwargs));
  if (mark) {
    // Tool specs come from the request like the messages do.
    for (const char* key : {"messages", "tools"}) {
      if (context.contains(key)) context[key] = MarkJson(context[key], marked_strings_);
    }
  }
  auto rendered = template_.Render(context);
  if (!rendered) return rendered.status().WithContext("rendering the chat template");

  AssembledPrompt prompt;
  EncodeOptions encode;
  encode.add_special_tokens = false;  // the template writes BOS itself when the model wants it
  if (mark) {
    prompt.rendered = RestoreMarkers(*rendered, marked_strings_, marked_strings_.size() - 2,
                                     &encode.protected_ranges);
  } else {
    prompt.rendered = std::move(*rendered);
  }
  auto ids = tokenizer_.Encode(prompt.rendered, encode);
  if (!ids) return ids.status().WithContext("tokenizing the rendered chat prompt");
  prompt.ids = std::move(*ids);
  return prompt;
}

Expected<TrimmedPrompt> PromptAssembler::AssembleWithin(const ordered_json& messages,
                                                        bool add_generation_prompt,
                                                        const ordered_json& kwargs,
                                                        size_t max_tokens,
                                                        const AssembleOptions& options) const {
  if (!messages.is_array()) return InvalidArgument("messages must be a JSON array");
  auto role_of = [&](size_t i) -> std::string {
    const ordered_json& m = messages[i];
    if (!m.is_object()) return "";
    auto it = m.find("role");
    return it != m.end() && it->is_string() ? it->get<std::string>() : "";
  };
  const size_t first = !messages.empty() && role_of(0) == "system" ? 1 : 0;
  // Where each turn begins; messages before the first user message form a turn of their own.
  std::vector<size_t> turn_starts;
  for (size_t i = first; i < messages.size(); ++i) {
    if (i == first || role_of(i) == "user") turn_starts.push_back(i);
  }
  auto keep_from = [&](size_t turn) {
    ordered_json kept = ordered_json::array();
    if (first == 1) kept.push_back(messages[0]);
    size_t from = turn < turn_starts.size() ? turn_starts[turn] : messages.size();
    for (size_t i = from; i < messages.size(); ++i) kept.push_back(messages[i]);
    return kept;
  };
  auto attempt = [&](size_t dropped_turns) -> Expected<TrimmedPrompt> {
    TrimmedPrompt t;
    t.messages = keep_from(dropped_turns);
    t.dropped_messages = messages.size() - t.messages.size();
    TS_ASSIGN_OR_RETURN(t.prompt, Assemble(t.messages, add_generation_prompt, kwargs, options));
    return t;
  };

  TS_ASSIGN_OR_RETURN(TrimmedPrompt whole, attempt(0));
  if (whole.prompt.ids.size() <= max_tokens || turn_starts.size() <= 1) {
    if (whole.prompt.ids.size() <= max_tokens) return whole;
  }
  const size_t last = turn_starts.empty() ? 0 : turn_starts.size() - 1;
  TS_ASSIGN_OR_RETURN(TrimmedPrompt shortest, attempt(last));
  if (shortest.prompt.ids.size() > max_tokens) {
    return InvalidArgument("the conversation needs " + std::to_string(shortest.prompt.ids.size()) +
                           " tokens even with only " +
                           (first == 1 ? "the system message and " : std::string()) +
                           "the last turn, more than the budget of " + std::to_string(max_tokens) +
                           "; shorten the message or allow a longer context");
  }
  // Fewest dropped turns that fit: binary search, since dropping more never adds tokens for
  // templates that render each message independently (and the result is checked anyway).
  size_t lo = 0;  // does not fit
  size_t hi = last;
  TrimmedPrompt best = std::move(shortest);
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    TS_ASSIGN_OR_RETURN(TrimmedPrompt t, attempt(mid));
    if (t.prompt.ids.size() <= max_tokens) {
      hi = mid;
      best = std::move(t);
    } else {
      lo = mid;
    }
  }
  return best;
}

Expected<AssembledPrompt> AssemblePrompt(const ChatTemplateConfig& config,
                                         const Tokenizer& tokenizer, const ordered_json& messages,
                                         bool add_generation_prompt, const ordered_json& kwargs,
                                         const AssembleOptions& options) {
  TS_ASSIGN_OR_RETURN(PromptAssembler assembler, PromptAssembler::Create(config, tokenizer));
  return assembler.Assemble(messages, add_generation_prompt, kwargs, options);
}

}  // namespace tessera
