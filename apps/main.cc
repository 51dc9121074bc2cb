// tessera: the command-line entry point. Each subcommand lives in its own cmd_*.cc.
#include <cstdio>
#include <cstring>
#include <string>

#include "commands.h"

namespace {

struct Command {
  const char* name;
  const char* help;
  int (*run)(int argc, char** argv);
};

constexpr Command kCommands[] = {
    {"generate", "generation from a prompt", tessera::RunGenerateCommand},
    {"tokenize", "text (JSON Lines) to token ids", tessera::RunTokenizeCommand},
    {"detokenize", "token ids (JSON Lines) to text", tessera::RunDetokenizeCommand},
    {"render-chat", "render chat templates (JSON Lines)", tessera::RunRenderChatCommand},
    {"chat", "interactive chat with a model's chat template", tessera::RunChatCommand},
    {"synth", "write a random-weight checkpoint at a real model's shapes",
     tessera::RunSynthCommand},
    {"serve", "OpenAI-compatible HTTP server", tessera::RunServeCommand},
    {"worker", nullptr, tessera::RunWorkerCommand},  // started by serve, not listed
    {"bench", "load, prefill and decode speed of a model", tessera::RunBenchCommand},
    {"pull", "download a model from the Hugging Face hub, verified", tessera::RunPullCommand},
    {"convert", "convert a checkpoint into a verified runtime package", tessera::RunConvertCommand},
    {"list", "installed models (or --catalog: known names)", tessera::RunListCommand},
    {"rm", "remove a model from tessera's store", tessera::RunRmCommand},
    {"resolve", "the directory a model name resolves to", tessera::RunResolveCommand},
    {"doctor", "what runs here: the CPU backend's kernels, then the NPU, driver and XRT checks",
     tessera::RunDoctorCommand},
    {"version", "version, commit, build and this machine's CPU kernels (also --version)",
     tessera::RunVersionCommand},
    {nullptr, nullptr, nullptr},
};

void PrintUsage(FILE* out) {
  std::fprintf(out, "usage: tessera <command> [options]\n\ncommands:\n");
  for (const Command* c = kCommands; c->name != nullptr; ++c) {
    if (c->help == nullptr) continue;  // internal subcommands
    std::fprintf(out, "  %-14s %s\n", c->name, c->help);
  }
  std::fprintf(out, "\nRun 'tessera <command> --help' for the options of a command.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    PrintUsage(stderr);
    return 2;
  }
  std::string cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    PrintUsage(stdout);
    return 0;
  }
  if (cmd == "--version") return tessera::RunVersionCommand(argc, argv);
  for (const Command* c = kCommands; c->name != nullptr; ++c) {
    if (cmd == c->name) return c->run(argc, argv);
  }
  std::fprintf(stderr, "tessera: unknown command '%s'; run 'tessera --help' for the list\n",
               cmd.c_str());
  return 2;
}
