// tessera: the command-line entry point. Each subcommand lives in its own cmd_*.cc.
#include <cstdio>
#include <cstring>
#include <string>

namespace {

void PrintUsage(FILE* out) {
  std::fprintf(out,
               "usage: tessera <command> [options]\n\n"
               "commands:\n"
               "  generate     greedy generation from a prompt\n"
               "  tokenize     text (JSON Lines) to token ids\n"
               "  detokenize   token ids (JSON Lines) to text\n\n"
               "Run 'tessera <command> --help' for the options of a command.\n");
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
  std::fprintf(stderr, "tessera: unknown command '%s'; run 'tessera --help' for the list\n",
               cmd.c_str());
  return 2;
}
