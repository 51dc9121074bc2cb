// A seeded generator of random JSON Schemas over every keyword the grammar supports (objects,
// arrays, strings with lengths/patterns, bounded integers and numbers, enum/const, anyOf,
// oneOf with disjoint branches, type lists, recursive $ref/$defs, annotations).
#pragma once

#include <nlohmann/json.hpp>
#include <random>

namespace tessera::test {

nlohmann::json RandomSchema(std::mt19937& rng);

}  // namespace tessera::test
