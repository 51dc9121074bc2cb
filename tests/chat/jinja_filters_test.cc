// Built-in filters, with outputs as Jinja2 (and transformers' tojson) produce them.
#include <gtest/gtest.h>

#include "jinja_test_util.h"

namespace tessera::jinja::test {
namespace {

TEST(JinjaFilters, ToJsonMatchesPythonJsonDumps) {
  const char* ctx = R"({"d": {"z": 1, "a": [1, 2.5, "x\"y", null, true], "u": "é\n"}})";
  EXPECT_EQ(Render("{{ d | tojson }}", ctx),
            "{\"z\": 1, \"a\": [1, 2.5, \"x\\\"y\", null, true], \"u\": \"é\\n\"}");
  EXPECT_EQ(Render("{{ d | tojson(indent=2) }}", R"({"d": {"a": [1], "b": {}}})"),
            "{\n  \"a\": [\n    1\n  ],\n  \"b\": {}\n}");
  EXPECT_EQ(Render("{{ d | tojson(sort_keys=true) }}", R"({"d": {"b": 1, "a": 2}})"),
            "{\"a\": 2, \"b\": 1}");
  // No HTML escaping (transformers overrides Jinja2's tojson).
  EXPECT_EQ(Render("{{ '<a & \\'b\\'>' | tojson }}"), "\"<a & 'b'>\"");
  EXPECT_EQ(Render("{{ 'é' | tojson(ensure_ascii=true) }}"), "\"\\u00e9\"");
}

TEST(JinjaFilters, StringFilters) {
  EXPECT_EQ(Render("[{{ '  a b \\n' | trim }}] {{ 'ab' | upper }} {{ 'AB' | lower }}"
                   " {{ 'hello wORLD' | title }} {{ 'hELLO' | capitalize }}"),
            "[a b] AB ab Hello World Hello");
  EXPECT_EQ(Render("{{ 'aXbX' | replace('X', '-') }} {{ 'a b' | split(' ') }} {{ 12 | string }}"
                   " {{ 'abc' | reverse }} {{ 'a b  c' | wordcount }}"),
            "a-b- ['a', 'b'] 12 cba 3");
  EXPECT_EQ(Render("{{ '<&>\"\\'' | e }} {{ 'x' | safe }}"), "&lt;&amp;&gt;&#34;&#39; x");
  EXPECT_EQ(Render("{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}"),
            "a\n  b\n\n  c|  a\n  b");
}

TEST(JinjaFilters, SequenceFilters) {
  const char* ctx = R"({"xs": [3, 1, 2], "users": [{"n": "a", "age": 3}, {"n": "b", "age": 9}]})";
  EXPECT_EQ(Render("{{ xs | length }} {{ xs | count }} {{ 'héllo' | length }} {{ xs | first }}"
                   " {{ xs | last }} {{ xs | join(',') }} {{ xs | reverse | list }}",
                   ctx),
            "3 3 5 3 2 3,1,2 [2, 1, 3]");
  EXPECT_EQ(Render("{{ users | map(attribute='n') | join }} {{ ['a', 'b'] | map('upper') | list }}"
                   " {{ users | selectattr('age', 'gt', 5) | map(attribute='n') | list }}"
                   " {{ users | rejectattr('age', 'gt', 5) | map(attribute='n') | list }}"
                   " {{ xs | select('odd') | list }} {{ xs | reject('odd') | list }}",
                   ctx),
            "ab ['A', 'B'] ['b'] ['a'] [3, 1] [2]");
  EXPECT_EQ(
      Render("{{ [1, 2, 1, 3] | unique | list }} {{ xs | sort }} {{ [-2] | map('abs') | list }}"
             " {{ xs | max }} {{ xs | min }} {{ xs | sum }}",
             ctx),
      "[1, 2, 3] [1, 2, 3] [2] 3 1 6");
  EXPECT_EQ(Render("{{ {'b': 1, 'A': 2} | dictsort }} {{ {'k': 'v'} | items | list }}"),
            "[('A', 2), ('b', 1)] [('k', 'v')]");
}

TEST(JinjaFilters, DefaultAndConversions) {
  EXPECT_EQ(Render("{{ nope | default('d') }} {{ '' | default('d') }} {{ '' | default('d', true) }}"
                   " {{ none | d('x', true) }}"),
            "d  d x");
  EXPECT_EQ(Render("{{ '42' | int }} {{ 'x' | int }} {{ 'x' | int(7) }} {{ 3.9 | int }}"
                   " {{ '2.5' | float }} {{ 2.5 | round }} {{ 3.14159 | round(2) }}"
                   " {{ 2.1 | round(0, 'ceil') }} {{ -3 | abs }}"),
            "42 0 7 3 2.5 2.0 3.14 3.0 3");
}

TEST(JinjaFilters, UnknownFilterIsAParseError) {
  std::string err = Render("line one\n{{ x | nosuchfilter }}");
  EXPECT_EQ(err, "ERROR: template line 2, column 8: unknown filter 'nosuchfilter'");
  EXPECT_EQ(Render("{{ x is nosuchtest }}"),
            "ERROR: template line 1, column 9: unknown test 'nosuchtest'");
}

}  // namespace
}  // namespace tessera::jinja::test
