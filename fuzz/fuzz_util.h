// Small helpers shared by the fuzz targets (fuzz/*_fuzz.cc): splitting one input into parts and
// handing a parser that only opens paths a file to open.
//
//   auto parts = fuzz::Split(data, size, 2);   // parts[0], parts[1] (separator: "\n\x00\n")
//   fuzz::ScratchDir dir;                      // a fresh directory under $TMPDIR, removed at exit
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::fuzz {

// The separator between the parts of one input: a NUL cannot appear in JSON or template text,
// so a real file never splits by accident.
inline constexpr std::string_view kPartSeparator{"\n\0\n", 3};

// Up to `max_parts` parts; the last one keeps any further separators.
std::vector<std::string_view> Split(const uint8_t* data, size_t size, size_t max_parts);

// A private directory (made on first use, removed with its files when the process exits).
const std::string& ScratchDir();

// With TESSERA_FUZZ_VERBOSE set (replaying seeds), prints how far an input got, so a seed that
// stops at an early error is noticed: `what: ok` or `what: <message>`.
void Note(const char* what, const std::string& outcome);

// Writes `bytes` to `path` (replacing it); aborts on an I/O error, which is the harness's fault.
void WriteFileOrDie(const std::string& path, std::string_view bytes);

}  // namespace tessera::fuzz
