// Replays fuzz inputs without libFuzzer: runs LLVMFuzzerTestOneInput over every file in the
// directories (or files) given, in name order. Built into fuzz_replay_<name> by the normal
// build, so the corpus (and every crash input added to it) is a regression test everywhere.
//
//   fuzz_replay_tokenizer fuzz/corpus/tokenizer   # "replayed 12 inputs", exit 0
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc < 2) {
    fprintf(stderr, "usage: %s DIR_OR_FILE...\n", argv[0]);
    return 2;
  }
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    const fs::path p(argv[i]);
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      for (const auto& entry : fs::directory_iterator(p)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
    } else if (fs::is_regular_file(p, ec)) {
      files.push_back(p);
    } else {
      fprintf(stderr, "%s: no such file or directory\n", argv[i]);
      return 2;
    }
  }
  // An empty corpus would make this test pass without testing anything.
  if (files.empty()) {
    fprintf(stderr, "no inputs found\n");
    return 2;
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      fprintf(stderr, "cannot read %s\n", f.c_str());
      return 2;
    }
    fprintf(stderr, "replaying %s (%zu bytes)\n", f.c_str(), bytes.size());
    // A copy in a buffer of exactly its size, so ASan sees any read past the end.
    std::vector<uint8_t> data(bytes.begin(), bytes.end());
    LLVMFuzzerTestOneInput(data.data(), data.size());
  }
  printf("replayed %zu inputs\n", files.size());
  return 0;
}
