// Hostile and malformed templates: each must end in a clear one-line error, within the limits
// and quickly, and never crash (this suite also runs under ASan+UBSan).
#include <gtest/gtest.h>

#include <chrono>

#include "jinja_test_util.h"

namespace tessera::jinja::test {
namespace {

// Sanitizer builds run several times slower; the bound is for the work done, not the machine.
#if defined(__SANITIZE_ADDRESS__)
constexpr double kSecondsAllowed = 20.0;
#else
constexpr double kSecondsAllowed = 3.0;
#endif

// Renders and checks the result is a one-line error containing `needle`, reached quickly.
void ExpectError(const std::string& source, const std::string& needle, const Limits& limits = {}) {
  auto start = std::chrono::steady_clock::now();
  std::string out = Render(source, "{}", limits);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(StartsWith(out, "ERROR: ")) << source << " rendered " << out.substr(0, 200);
  EXPECT_NE(out.find(needle), std::string::npos) << source << " -> " << out;
  EXPECT_EQ(out.find('\n'), std::string::npos) << "multi-line error: " << out;
  EXPECT_LT(seconds, kSecondsAllowed) << source;
}

TEST(JinjaMalformed, UnterminatedConstructs) {
  ExpectError("{% if x %}never closed", "expected '{% endif %}'");
  ExpectError("{% for x in y %}", "expected '{% endfor %}'");
  ExpectError("{{ x ", "unterminated expression");
  ExpectError("abc {% if", "unterminated block tag");
  ExpectError("{# comment", "unterminated comment");
  ExpectError("{% raw %}abc", "unterminated 'raw' block");
  ExpectError("{{ 'abc }}", "unterminated string");
  ExpectError("{{ (1 + 2 }}", "line 1");
  ExpectError("{% endif %}", "unexpected 'endif'");
  ExpectError("{% macro m( %}{% endmacro %}", "line 1");
}

TEST(JinjaMalformed, UnknownThings) {
  ExpectError("{{ x | frobnicate }}", "unknown filter 'frobnicate'");
  ExpectError("{% frobnicate %}", "unknown tag 'frobnicate'");
  ExpectError("{% include 'x.html' %}", "not supported");
  ExpectError("{{ 1 is frob }}", "unknown test 'frob'");
  ExpectError("{{ x @ y }}", "unexpected character '@'");
  ExpectError("{% break %}", "outside of a for loop");
  ExpectError("{{ 'x'.nomethod() }}", "has no attribute 'nomethod'");
  ExpectError("{{ 5() }}", "not callable");
}

TEST(JinjaMalformed, RuntimeErrorsNameLineAndColumn) {
  std::string out = Render("ok\n  {{ 1 + 'a' }}");
  EXPECT_TRUE(StartsWith(out, "ERROR: template line 2, column")) << out;
  ExpectError("{{ none.x.y }}", "has no attribute 'x'");
  ExpectError("{% for a, b in [1] %}{% endfor %}", "not iterable");
  ExpectError("{% set x = 1 %}{% set x.y = 2 %}", "not a namespace");
  ExpectError("{{ [1][0:1:0] }}", "slice step cannot be zero");
  ExpectError("{{ 'a' in 1 }}", "not iterable");
  ExpectError("{{ 'a'.split('') }}", "empty separator");
}

TEST(JinjaMalformed, InfiniteRecursionHitsDepthLimit) {
  ExpectError("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "too deep");
  ExpectError("{% macro f() %}{% call f() %}x{% endcall %}{% endmacro %}{{ f() }}", "too deep");
}

TEST(JinjaMalformed, HugeLoopsHitStepLimit) {
  ExpectError("{% for i in range(100000000) %}{% endfor %}", "range too big");
  ExpectError("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
              "step limit");
  Limits small;
  small.max_steps = 1000;
  ExpectError("{% for i in range(5000) %}{{ i }}{% endfor %}", "step limit", small);
}

TEST(JinjaMalformed, HugeOutputsHitSizeLimit) {
  ExpectError("{{ 'x' * 100000000 }}", "exceeds the output limit");
  ExpectError("{{ 'x' * 9223372036854775807 }}", "exceeds the output limit");
  ExpectError(
      "{% set s = namespace(v='xxxxxxxxxxxxxxxx') %}{% for i in range(64) %}"
      "{% set s.v = s.v ~ s.v %}{% endfor %}",
      "exceeds the output limit");
  ExpectError("{% for i in range(100000) %}{{ 'y' * 100000 }}{% endfor %}",
              "rendered output exceeds");
  ExpectError("{{ [1] * 100000000 }}", "exceeds the limit");
  ExpectError("{{ 'ab'.replace('', 'x' * 10000000) }}", "exceeds the output limit");
}

TEST(JinjaMalformed, DeeplyNestedExpressionsAreRejected) {
  ExpectError(
      std::string("{{ ") + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}",
      "nested too deeply");
  ExpectError(std::string("{{ ") + std::string(100000, '[') + std::string(100000, ']') + " }}",
              "nested too deeply");
  std::string chain = "{{ 1";
  for (int i = 0; i < 100000; ++i) chain += " + 1";
  ExpectError(chain + " }}", "nested too deeply");
  std::string filters = "{{ 'x'";
  for (int i = 0; i < 100000; ++i) filters += " | upper";
  ExpectError(filters + " }}", "nested too deeply");
  std::string nots = "{{ ";
  for (int i = 0; i < 100000; ++i) nots += "not ";
  ExpectError(nots + "1 }}", "nested too deeply");
  std::string ifs;
  for (int i = 0; i < 10000; ++i) ifs += "{% if true %}";
  ExpectError(ifs, "nested too deeply");
}

TEST(JinjaMalformed, DeepRuntimeValuesDoNotCrash) {
  // Builds a list nested 100000 deep through append; printing it refuses, destroying it must
  // not overflow the stack.
  std::string out = Render(
      "{% set ns = namespace(cur=[]) %}{% set root = ns.cur %}"
      "{% for i in range(100000) %}{% set next = [] %}{% set _ = ns.cur.append(next) %}"
      "{% set ns.cur = next %}{% endfor %}{{ root | length }}");
  EXPECT_EQ(out, "1");
  ExpectError(
      "{% set ns = namespace(cur=[]) %}{% set root = ns.cur %}"
      "{% for i in range(100000) %}{% set next = [] %}{% set _ = ns.cur.append(next) %}"
      "{% set ns.cur = next %}{% endfor %}{{ root }}",
      "nested too deeply");
}

TEST(JinjaMalformed, BadContextAndBytes) {
  auto tmpl = Template::Parse("{{ x }}");
  ASSERT_TRUE(tmpl.has_value());
  EXPECT_FALSE(tmpl->Render(nlohmann::ordered_json::array()).has_value());
  EXPECT_FALSE(Template::Parse(std::string("\xff\xfe{{ x }}")).has_value());
  EXPECT_FALSE(Template::Parse(std::string("{{ '\\ud800' }}")).has_value());
  // A NUL byte in the template is plain data.
  EXPECT_EQ(Render(std::string("a\0b", 3)), std::string("a\0b", 3));
}

}  // namespace
}  // namespace tessera::jinja::test
