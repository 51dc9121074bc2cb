// Parsing JSON that a client sent (request bodies, and the schemas, tool definitions and tool
// call arguments inside them) into an insertion-ordered document, in time linear in its size.
// nlohmann's own ordered_json parser looks each new key up in the object's member vector, so
// an object of n keys costs n^2 / 2 string comparisons (80,000 keys: about 10 s); this parser
// indexes a large object's keys in a hash table while it is being read. Limits are checked as
// the parse goes, so a document past them is refused after reading no more of it.
//
//   JsonParseLimits limits;                       // depth 32, 4,096 members per object
//   auto doc = ParseOrderedJson(body, limits, "the body");
//   if (!doc) reply 400 with doc.status().message();  // "the body has an object of more ..."
#pragma once

#include <cstddef>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace tessera {

struct JsonParseLimits {
  size_t max_depth = 32;             // nested objects and arrays
  size_t max_object_members = 4096;  // distinct keys in one object
};

// Parses one JSON document (any value at the top). A key repeated in one object keeps its
// first place and takes the last value, as nlohmann's ordered_json does. Errors are one line
// naming `what`: InvalidArgument for invalid syntax (with its line and column),
// ResourceExhausted for nesting past max_depth or an object past max_object_members (the
// text may be valid JSON). Never throws.
Expected<nlohmann::ordered_json> ParseOrderedJson(std::string_view text,
                                                  const JsonParseLimits& limits = {},
                                                  std::string_view what = "the JSON");

}  // namespace tessera
