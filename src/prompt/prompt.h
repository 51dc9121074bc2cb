// Prompt assembly for chat models: render the checkpoint's chat template over a conversation
// and tokenize the result so that control tokens come only from the template, never from what
// the user or the model wrote; and trim a conversation to a token budget.
//
//   TS_ASSIGN_OR_RETURN(ChatTemplateConfig config, LoadChatTemplateConfig(dir));
//   TS_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::FromFile(dir + "/tokenizer.json"));
//   TS_ASSIGN_OR_RETURN(PromptAssembler assembler, PromptAssembler::Create(config, tok));
//   nlohmann::ordered_json messages = {{{"role", "user"}, {"content", "Hi <|im_start|>"}}};
//   TS_ASSIGN_OR_RETURN(AssembledPrompt p,
//                       assembler.Assemble(messages, /*add_generation_prompt=*/true,
//                                          {{"enable_thinking", false}}));
//   // p.rendered is the template's text; in p.ids the content's "<|im_start|>" is ordinary
//   // tokens while the template's own <|im_start|> is the control token.
//   TS_ASSIGN_OR_RETURN(TrimmedPrompt t, assembler.AssembleWithin(messages, true, {}, 4096));
//
// How content is kept from becoming control tokens: before rendering, every occurrence of a
// special token's text (added tokens with special=true) in a message string is replaced by a
// private marker U+FDD0 <decimal index> U+FDD1 (Unicode noncharacters, which no real text
// uses); U+FDD0 and U+FDD1 already present in messages are escaped the same way. After
// rendering the markers are turned back into their original text and the byte ranges they
// occupy become EncodeOptions::protected_ranges. Templates that inspect content for a special
// token's text (rare: Qwen3's '</think>' check concerns a non-special token) see the marker
// instead. With content_specials_are_text = false, the Hugging Face behaviour, no markers are
// used and special-token text anywhere becomes the control token.
//
// BOS follows the template (templates write bos_token themselves), so the rendered text is
// encoded with add_special_tokens = false.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/status.h"
#include "chat/chat_template.h"
#include "chat/jinja.h"
#include "tokenizer/tokenizer.h"

namespace tessera {

struct AssembleOptions {
  // true: special-token text inside message strings is ordinary text (safe for untrusted
  // content). false: as transformers' apply_chat_template(tokenize=True) does.
  bool content_specials_are_text = true;
};

struct AssembledPrompt {
  std::string rendered;
  std::vector<int32_t> ids;
};

struct TrimmedPrompt {
  AssembledPrompt prompt;
  nlohmann::ordered_json messages;  // the messages that were kept, in order
  size_t dropped_messages = 0;      // oldest messages left out to fit the budget
};

class PromptAssembler {
 public:
  // Parses the template and collects the tokenizer's special-token strings.
  static Expected<PromptAssembler> Create(const ChatTemplateConfig& config,
                                          const Tokenizer& tokenizer);

  // `messages` must be a JSON array and `kwargs` an object (or null); kwargs such as
  // enable_thinking or tools reach the template as variables. Messages and kwargs["tools"] go
  // through MakeToolChatContext (chat_template.h): JSON-string tool-call arguments become
  // objects, bare function specs are wrapped, an empty tools list is no tools. Strings in the
  // tools are marked like message content.
  Expected<AssembledPrompt> Assemble(const nlohmann::ordered_json& messages,
                                     bool add_generation_prompt,
                                     const nlohmann::ordered_json& kwargs,
                                     const AssembleOptions& options = {}) const;

  // Like Assemble, but keeps the prompt within `max_tokens` by dropping whole turns, oldest
  // first: a leading system message is always kept, and a turn is a user message with the
  // messages after it up to the next user message. InvalidArgument when even the system
  // message and the last turn do not fit.
  Expected<TrimmedPrompt> AssembleWithin(const nlohmann::ordered_json& messages,
                                         bool add_generation_prompt,
                                         const nlohmann::ordered_json& kwargs, size_t max_tokens,
                                         const AssembleOptions& options = {}) const;

  const ChatTemplateConfig& config() const { return config_; }
  const Tokenizer& tokenizer() const { return tokenizer_; }

 private:
  PromptAssembler(ChatTemplateConfig config, jinja::Template tmpl, Tokenizer tokenizer,
                  std::vector<std::string> specials)
      : config_(std::move(config)),
        template_(std::move(tmpl)),
        tokenizer_(std::move(tokenizer)),
        marked_strings_(std::move(specials)) {}

  ChatTemplateConfig config_;
  jinja::Template template_;
  Tokenizer tokenizer_;
  // What the markers stand for: the special-token strings, longest first, then U+FDD0 and
  // U+FDD1 themselves (the last two are escapes and are not protected).
  std::vector<std::string> marked_strings_;
};

// One-shot form of PromptAssembler::Create + Assemble.
Expected<AssembledPrompt> AssemblePrompt(const ChatTemplateConfig& config,
                                         const Tokenizer& tokenizer,
                                         const nlohmann::ordered_json& messages,
                                         bool add_generation_prompt,
                                         const nlohmann::ordered_json& kwargs,
                                         const AssembleOptions& options = {});

}  // namespace tessera
