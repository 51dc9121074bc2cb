// TextStream on the real stories260k tokenizer: text decoded in the prompt's context, stop
// strings cut even when split across tokens, stop ids add no text, logprob token texts match
// the streamed text.
#include "runtime/text_stream.h"

#include <gtest/gtest.h>

#include <cmath>

#include "test_support.h"

namespace tessera {
namespace {

Tokenizer Stories() {
  auto tok = Tokenizer::FromFile(test::SharedDir() + "/models/stories260k/tokenizer.json");
  EXPECT_TRUE(tok) << tok.status().message();
  return std::move(*tok);
}

std::vector<int32_t> Encode(const Tokenizer& tok, const std::string& text, bool special) {
  EncodeOptions o;
  o.add_special_tokens = special;
  auto ids = tok.Encode(text, o);
  EXPECT_TRUE(ids);
  return *ids;
}

TEST(TextStream, DecodesInThePromptsContextAndCutsStopStrings) {
  const Tokenizer tok = Stories();
  const auto prompt = Encode(tok, "Once upon a time", true);
  const auto completion = Encode(tok, "Once upon a time, there was a dog. The end", true);
  ASSERT_GT(completion.size(), prompt.size());
  std::vector<int32_t> gen(completion.begin() + static_cast<std::ptrdiff_t>(prompt.size()),
                           completion.end());
  {
    TextStream s(tok, prompt, {}, {});
    std::string text;
    for (int32_t id : gen) text += s.Push(id, {}).text;
    text += s.Finish();
    EXPECT_EQ(text, ", there was a dog. The end");
  }
  {
    TextStream s(tok, prompt, {.stop = {"dog."}}, {});
    std::string text;
    bool stopped = false;
    for (int32_t id : gen) {
      TokenDelta d = s.Push(id, {});
      text += d.text;
      if (d.stopped) {
        stopped = true;
        break;
      }
    }
    EXPECT_TRUE(stopped);
    EXPECT_EQ(text + s.Finish(), ", there was a ");
  }
  {
    TextStream s(tok, prompt, {}, {2});
    EXPECT_EQ(s.Push(2, {}).text, "");  // a stop id adds nothing
  }
}

TEST(TextStream, LogprobsNameTheTokensInContext) {
  const Tokenizer tok = Stories();
  const auto prompt = Encode(tok, "Once upon a time", true);
  const auto next = Encode(tok, "Once upon a time,", true);
  const int32_t comma = next.back();
  std::vector<float> logits(static_cast<size_t>(tok.vocab_size()), 0.0f);
  logits[static_cast<size_t>(comma)] = 5.0f;
  TextStream s(tok, prompt, {.stop = {}, .logprobs = true, .top_logprobs = 2}, {});
  TokenDelta d = s.Push(comma, logits);
  ASSERT_TRUE(d.logprob);
  EXPECT_EQ(d.logprob->token, d.text);
  ASSERT_EQ(d.logprob->top.size(), 2u);
  EXPECT_EQ(d.logprob->top[0].first, d.text);
  const double expect = 5.0 - std::log(std::exp(5.0) + (tok.vocab_size() - 1));
  EXPECT_NEAR(d.logprob->logprob, expect, 1e-4);
}

}  // namespace
}  // namespace tessera
