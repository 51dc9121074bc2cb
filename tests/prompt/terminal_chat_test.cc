// `tessera chat` end to end through a pseudo-terminal: the program runs as it would for a user
// (stdin/stdout are a terminal, Ctrl-C arrives as SIGINT from the line discipline). Output is
// read with poll() until an expected marker appears or a deadline passes; nothing sleeps.
// Replies are checked against `tessera generate` greedy output for the same rendered prompt
// (render-chat -> tokenize -> generate --prompt-ids), which also checks the KV cache reuse of
// the second turn against a full prefill.
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_support.h"

namespace tessera {
namespace {

using nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

constexpr const char* kPromptMarker = "you> ";
constexpr const char* kTemplate =
    "{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}";

// stories260k (no chat template of its own) with a simple template, optionally with a longer
// position limit so that a reply can run for seconds.
void MakeChatModel(const std::string& dir, int64_t max_positions = 0) {
  const std::string src = test::SharedDir() + "/models/stories260k/";
  for (const char* f : {"model.safetensors", "tokenizer.json", "generation_config.json"}) {
    test::WriteFile(dir + "/" + f, test::ReadFile(src + f));
  }
  ordered_json config = ordered_json::parse(test::ReadFile(src + "config.json"));
  if (max_positions > 0) config["max_position_embeddings"] = max_positions;
  test::WriteFile(dir + "/config.json", config.dump());
  ordered_json tc = ordered_json::parse(test::ReadFile(src + "tokenizer_config.json"));
  tc["chat_template"] = kTemplate;
  test::WriteFile(dir + "/tokenizer_config.json", tc.dump());
}

Clock::time_point Deadline(double seconds) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// A child process on a pseudo-terminal with echo off (so the output is only the program's).
class PtyProcess {
 public:
  explicit PtyProcess(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {test::TesseraBinary()};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    // A cooked-mode terminal as a user has it, minus echo; control characters other than
    // Ctrl-C and Ctrl-D are disabled (0 is _POSIX_VDISABLE on Linux).
    struct termios tio;
    std::memset(&tio, 0, sizeof(tio));
    tio.c_iflag = ICRNL;
    tio.c_oflag = OPOST | ONLCR;
    tio.c_lflag = ISIG | ICANON;
    tio.c_cflag = CS8 | CREAD;
    tio.c_cc[VINTR] = 0x03;
    tio.c_cc[VEOF] = 0x04;
    tio.c_cc[VMIN] = 1;
    ::cfsetispeed(&tio, B38400);
    ::cfsetospeed(&tio, B38400);
    pid_ = ::forkpty(&master_, nullptr, &tio, nullptr);
    if (pid_ == 0) {
      ::execv(cargv[0], cargv.data());
      ::_exit(127);
    }
  }
  ~PtyProcess() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (master_ >= 0) ::close(master_);
  }

  bool started() const { return pid_ > 0; }
  const std::string& output() const { return output_; }
  size_t mark() const { return output_.size(); }

  void Write(const std::string& text) {
    size_t done = 0;
    while (done < text.size()) {
      ssize_t n = ::write(master_, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      done += static_cast<size_t>(n);
    }
  }

  // Reads until `marker` occurs at or after output offset `from`; false at the deadline or
  // when the terminal closes first.
  bool ReadUntil(const std::string& marker, size_t from, double seconds) {
    Clock::time_point deadline = Deadline(seconds);
    while (output_.find(marker, from) == std::string::npos) {
      if (!ReadSome(deadline)) return false;
    }
    return true;
  }

  // Reads until `count` more bytes arrived after offset `from`.
  bool ReadAtLeast(size_t count, size_t from, double seconds) {
    Clock::time_point deadline = Deadline(seconds);
    while (output_.size() < from + count) {
      if (!ReadSome(deadline)) return false;
    }
    return true;
  }

  // Reads until the child closes the terminal, then reaps it; the exit code, or -1.
  int WaitForExit(double seconds) {
    Clock::time_point deadline = Deadline(seconds);
    while (ReadSome(deadline)) {
    }
    if (Clock::now() >= deadline) return -1;
    int status = 0;
    if (::waitpid(pid_, &status, 0) != pid_) return -1;
    exited_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  // One poll + read; false at the deadline or end of output (EIO once the child is gone).
  bool ReadSome(Clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd fd = {master_, POLLIN, 0};
    int r = ::poll(&fd, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) return true;
    if (r <= 0) return false;
    char buf[4096];
    ssize_t n = ::read(master_, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) return true;
    if (n <= 0) return false;
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] != '\r') output_ += buf[i];  // the terminal turns \n into \r\n
    }
    return true;
  }

  int master_ = -1;
  pid_t pid_ = -1;
  bool exited_ = false;
  std::string output_;
};

// The reply printed between `from` and the next prompt marker (the reply ends with "\n").
std::string ReplyBetween(const std::string& out, size_t from) {
  size_t end = out.find(std::string("\n") + kPromptMarker, from);
  if (end == std::string::npos) return "<no prompt after the reply in: " + out.substr(from) + ">";
  return out.substr(from, end - from);
}

std::string LeftTrim(const std::string& s) {
  size_t b = s.find_first_not_of(" \n");
  return b == std::string::npos ? "" : s.substr(b);
}

// What `tessera generate` continues the chat prompt with, greedily, as text.
std::string GreedyReference(const std::string& model, const ordered_json& messages,
                            int max_tokens) {
  ordered_json req = {{"messages", messages}, {"add_generation_prompt", true}};
  auto rendered = test::RunTessera({"render-chat", "--model", model}, req.dump() + "\n");
  EXPECT_EQ(rendered.exit_code, 0) << rendered.err;
  std::string text = ordered_json::parse(rendered.out)["rendered"].get<std::string>();
  auto tokenized =
      test::RunTessera({"tokenize", "--model", model}, ordered_json(text).dump() + "\n");
  EXPECT_EQ(tokenized.exit_code, 0) << tokenized.err;
  std::string ids;
  for (const auto& id : ordered_json::parse(tokenized.out)) {
    ids += (ids.empty() ? "" : ",") + std::to_string(id.get<int>());
  }
  auto generated =
      test::RunTessera({"generate", "--model", model, "--prompt-ids", ids, "--max-tokens",
                        std::to_string(max_tokens), "--placement", "reference", "--json"});
  EXPECT_EQ(generated.exit_code, 0) << generated.err;
  return ordered_json::parse(generated.out)["completion_text"].get<std::string>();
}

TEST(TerminalChat, TwoTurnsStatsResetAndExit) {
  test::TempDir tmp;
  MakeChatModel(tmp.path());
  const int max_tokens = 24;
  PtyProcess chat({"chat", "--model", tmp.path(), "--placement", "reference", "--temperature", "0",
                   "--max-tokens", std::to_string(max_tokens)});
  ASSERT_TRUE(chat.started());
  ASSERT_TRUE(chat.ReadUntil(kPromptMarker, 0, 60)) << chat.output();

  const std::string first = "Once upon a time";
  size_t at = chat.mark();
  chat.Write(first + "\n");
  ASSERT_TRUE(chat.ReadUntil(kPromptMarker, at, 60)) << chat.output();
  std::string reply1 = ReplyBetween(chat.output(), at);
  EXPECT_FALSE(LeftTrim(reply1).empty());
  EXPECT_EQ(reply1.find("<s>"), std::string::npos);  // never template text
  ordered_json messages = {{{"role", "user"}, {"content", first}}};
  EXPECT_EQ(LeftTrim(reply1), LeftTrim(GreedyReference(tmp.path(), messages, max_tokens)));

  const std::string second = " Then Tom came.";
  at = chat.mark();
  chat.Write(second + "\n");
  ASSERT_TRUE(chat.ReadUntil(kPromptMarker, at, 60)) << chat.output();
  std::string reply2 = ReplyBetween(chat.output(), at);
  EXPECT_FALSE(LeftTrim(reply2).empty());
  messages.push_back({{"role", "assistant"}, {"content", reply1}});
  messages.push_back({{"role", "user"}, {"content", second}});
  EXPECT_EQ(LeftTrim(reply2), LeftTrim(GreedyReference(tmp.path(), messages, max_tokens)));

  at = chat.mark();
  chat.Write("/stats\n");
  ASSERT_TRUE(chat.ReadUntil(kPromptMarker, at, 30)) << chat.output();
  std::string stats = chat.output().substr(at);
  for (const char* field :
       {"ttft: ", " ms", "prefill: ", "decode: ", "tok/s", "context: ", "peak rss: ", " MB"}) {
    EXPECT_NE(stats.find(field), std::string::npos) << field << " in:\n" << stats;
  }
  // The second prompt reused the cache: only the new part was prefilled, far fewer tokens than
  // the context holds (which includes the first turn's prompt and reply).
  auto number_after = [&](const std::string& label) {
    size_t p = stats.find(label);
    return p == std::string::npos ? -1LL : std::atoll(stats.c_str() + p + label.size());
  };
  long long prefill = number_after("prefill: ");
  long long decode = number_after("decode: ");
  long long context = number_after("context: ");
  EXPECT_EQ(decode, max_tokens) << stats;
  EXPECT_GT(prefill, 0) << stats;
  EXPECT_LT(prefill + 2 * (max_tokens - 1), context) << stats;

  at = chat.mark();
  chat.Write("/reset\n");
  ASSERT_TRUE(chat.ReadUntil(kPromptMarker, at, 30)) << chat.output();
  EXPECT_NE(chat.output().find("[conversation cleared]", at), std::string::npos);
  // After a reset the same first message gets the same greedy reply.
  at = chat.mark();
  chat.Write(first + "\n");
  ASSERT_TRUE(chat.ReadUntil(kPromptMarker, at, 60)) << chat.output();
  EXPECT_EQ(ReplyBetween(chat.output(), at), reply1);

  at = chat.mark();
  chat.Write("/help\n");
  ASSERT_TRUE(chat.ReadUntil(kPromptMarker, at, 30)) << chat.output();
  EXPECT_NE(chat.output().find("/reset", at), std::string::npos);

  chat.Write("/exit\n");
  EXPECT_EQ(chat.WaitForExit(30), 0) << chat.output();
}

TEST(TerminalChat, CtrlCStopsTheReplyNotTheProgram) {
  test::TempDir tmp;
  // 4096 positions: an unstopped reply would run for thousands of tokens (seconds).
  MakeChatModel(tmp.path(), 4096);
  PtyProcess chat({"chat", "--model", tmp.path(), "--placement", "reference", "--temperature", "0",
                   "--max-tokens", "100000", "--context", "4096"});
  ASSERT_TRUE(chat.started());
  ASSERT_TRUE(chat.ReadUntil(kPromptMarker, 0, 60)) << chat.output();

  // Ctrl-C at the prompt: a hint, and the program keeps going.
  size_t at = chat.mark();
  chat.Write("\x03");
  ASSERT_TRUE(chat.ReadUntil(kPromptMarker, at, 30)) << chat.output();
  EXPECT_NE(chat.output().find("/exit", at), std::string::npos) << chat.output().substr(at);

  for (const char* message : {"Once upon a time", "The dog ran"}) {
    at = chat.mark();
    chat.Write(std::string(message) + "\n");
    // Wait until the reply is streaming, then interrupt it.
    ASSERT_TRUE(chat.ReadAtLeast(20, at, 60)) << chat.output();
    chat.Write("\x03");
    ASSERT_TRUE(chat.ReadUntil(std::string("[reply stopped]\n") + kPromptMarker, at, 30))
        << chat.output().substr(at);
    std::string reply = chat.output().substr(at, chat.output().find("[reply stopped]", at) - at);
    EXPECT_FALSE(LeftTrim(reply).empty());
    EXPECT_LT(reply.size(), 4000u);  // far from the whole reply
  }
  chat.Write("/exit\n");
  EXPECT_EQ(chat.WaitForExit(30), 0) << chat.output();
}

TEST(TerminalChat, EofExitsAndOneShotPrintsOnlyTheReply) {
  test::TempDir tmp;
  MakeChatModel(tmp.path());
  PtyProcess chat({"chat", "--model", tmp.path(), "--placement", "reference"});
  ASSERT_TRUE(chat.ReadUntil(kPromptMarker, 0, 60)) << chat.output();
  chat.Write("\x04");  // Ctrl-D on an empty line
  EXPECT_EQ(chat.WaitForExit(30), 0) << chat.output();

  auto one = test::RunTessera({"chat", "--model", tmp.path(), "--placement", "reference",
                               "--prompt", "Once upon a time", "--temperature", "0", "--max-tokens",
                               "16", "--system", "Lily."});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  ordered_json messages = {{{"role", "system"}, {"content", "Lily."}},
                           {{"role", "user"}, {"content", "Once upon a time"}}};
  EXPECT_EQ(LeftTrim(one.out), LeftTrim(GreedyReference(tmp.path(), messages, 16)) + "\n");
  EXPECT_EQ(one.out.find(kPromptMarker), std::string::npos);
}

TEST(TerminalChat, HistoryIsTrimmedToTheContextWithANotice) {
  test::TempDir tmp;
  MakeChatModel(tmp.path());
  // 64 positions, 8 reserved for each reply: a few turns fill the rest. Lines come from a
  // pipe here (not a terminal), which the chat reads the same way; EOF ends it.
  std::string input;
  for (int i = 0; i < 8; ++i) input += "Once upon a time there was a dog.\n";
  auto r = test::RunTessera({"chat", "--model", tmp.path(), "--placement", "reference",
                             "--temperature", "0", "--max-tokens", "8", "--context", "64"},
                            input);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("[history trimmed: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("to fit the 64-token context]"), std::string::npos) << r.err;
  // Every turn got a reply: eight prompts answered, plus the final prompt before EOF.
  size_t prompts = 0;
  for (size_t p = r.out.find(kPromptMarker); p != std::string::npos;
       p = r.out.find(kPromptMarker, p + 1)) {
    ++prompts;
  }
  EXPECT_EQ(prompts, 9u) << r.out;
}

TEST(TerminalChat, ErrorsAreOneLineWithTheRightExitCode) {
  test::TempDir tmp;
  MakeChatModel(tmp.path());
  // A model without a chat template takes no system message (completion mode, below).
  auto no_template = test::RunTessera({"chat", "--model", test::SharedDir() + "/models/stories260k",
                                       "--system", "Be brief.", "--prompt", "hi"});
  EXPECT_EQ(no_template.exit_code, 2);
  EXPECT_NE(no_template.err.find("has no chat template, so --system"), std::string::npos)
      << no_template.err;
  struct Case {
    const char* flag;
    const char* value;
  };
  for (Case c :
       {Case{"--temperature", "3"}, Case{"--top-k", "-1"}, Case{"--top-p", "0"},
        Case{"--min-p", "1.5"}, Case{"--repetition-penalty", "0"}, Case{"--presence-penalty", "5"},
        Case{"--frequency-penalty", "-3"}, Case{"--seed", "-1"}, Case{"--max-tokens", "0"}}) {
    auto r = test::RunTessera({"chat", "--model", tmp.path(), "--prompt", "hi", c.flag, c.value});
    EXPECT_EQ(r.exit_code, 2) << c.flag << ": " << r.err;
    EXPECT_NE(r.err.find(c.flag), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  }
  // A message longer than the whole context is reported, not fatal, in a one-shot run.
  auto too_long = test::RunTessera(
      {"chat", "--model", tmp.path(), "--context", "32", "--prompt", std::string(400, 'a')});
  EXPECT_NE(too_long.exit_code, 0);
  EXPECT_NE(too_long.err.find("budget"), std::string::npos) << too_long.err;
}

// Without a chat template (stories260k), each line is continued as plain text; with no
// --model and nothing installed, the built-in copy of stories260k is the model, said on stderr.
TEST(TerminalChat, CompletionModeOnTheBuiltInDemoModel) {
  test::TempDir store;
  test::TempDir hub;
  auto r = test::RunProcess(
      {"/usr/bin/env", "TESSERA_MODELS=" + store.path(), "HF_HUB_CACHE=" + hub.path(),
       test::TesseraBinary(), "chat", "--max-tokens", "8"},
      "Once upon a time\n/exit\n", 60000);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("using the built-in demo model stories260k"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no chat template: completion mode"), std::string::npos) << r.err;
  // The greedy continuation of llama2.c's stories260K (as in ../shared's reference).
  EXPECT_NE(r.out.find(", there was a little girl"), std::string::npos) << r.out;
  // The name resolves to the files written out in the store's hidden folder.
  auto named = test::RunProcess({"/usr/bin/env", "TESSERA_MODELS=" + store.path(),
                                 test::TesseraBinary(), "resolve", "stories260k"},
                                "", 60000);
  EXPECT_EQ(named.out, store.path() + "/.builtin/stories260k\tbuilt-in\n") << named.err;
}

// Without --model: the one installed model (said on stderr); with several, the user names one.
TEST(TerminalChat, WithoutModelTheOneInstalledModelOrAChoice) {
  test::TempDir store;
  test::TempDir hub;
  std::filesystem::create_directories(store.File("smollm2-135m-instruct"));
  MakeChatModel(store.File("smollm2-135m-instruct"));
  auto chat = [&] {
    return test::RunProcess(
        {"/usr/bin/env", "TESSERA_MODELS=" + store.path(), "HF_HUB_CACHE=" + hub.path(),
         test::TesseraBinary(), "chat", "--max-tokens", "4", "--prompt", "Hi"},
        "", 60000);
  };
  auto one = chat();
  EXPECT_EQ(one.exit_code, 0) << one.err;
  EXPECT_NE(one.err.find("using smollm2-135m-instruct, the one installed model"), std::string::npos)
      << one.err;
  std::filesystem::create_directories(store.File("qwen3-0.6b"));
  MakeChatModel(store.File("qwen3-0.6b"));
  auto two = chat();
  EXPECT_EQ(two.exit_code, 2) << two.err;
  EXPECT_NE(two.err.find("2 are installed (qwen3-0.6b, smollm2-135m-instruct); name one with "
                         "--model NAME"),
            std::string::npos)
      << two.err;
}

}  // namespace
}  // namespace tessera
