// Hostile and malformed templates: each must end in a clear one-line error, within the limits,
// and never crash (this suite also runs under ASan+UBSan). What bounds the work is Limits (steps,
// depth, output, items), so the tests assert on the limit's error, never on the clock.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "jinja_test_util.h"

namespace tessera::jinja::test {
namespace {

// Renders and checks the result is a one-line error containing `needle`.
void ExpectError(const std::string& source, const std::string& needle, const Limits& limits = {}) {
  std::string out = Render(source, "{}", limits);
  EXPECT_TRUE(StartsWith(out, "ERROR: ")) << source << " rendered " << out.substr(0, 200);
  EXPECT_NE(out.find(needle), std::string::npos) << source << " -> " << out;
  EXPECT_EQ(out.find('\n'), std::string::npos) << "multi-line error: " << out;
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

// Values are reference-counted: a namespace stored inside itself would never be freed (the
// fuzzer's LeakSanitizer found `{% set ns.n = ns %}`), so that assignment is refused, however
// deep the namespace sits in the value; a shared list nested many times is walked once.
TEST(JinjaMalformed, NamespaceStoredInsideItselfIsRefused) {
  ExpectError("{% set ns = namespace(n=0) %}{% set ns.n = ns %}", "contains the namespace itself");
  ExpectError("{% set ns = namespace(n=0) %}{% set ns.n = [1, {'a': [ns]}] %}",
              "contains the namespace itself");
  std::string out = Render(
      "{% set ns = namespace(n=0) %}{% set t = namespace(a=[1]) %}{% for i in range(40) %}"
      "{% set t.a = [t.a, t.a] %}{% endfor %}{% set ns.n = t.a %}{{ ns.n | length }}",
      "{}");
  EXPECT_EQ(out, "2");
}

TEST(JinjaMalformed, InfiniteRecursionHitsDepthLimit) {
  ExpectError("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "too deep");
  ExpectError("{% macro f() %}{% call f() %}x{% endcall %}{% endmacro %}{{ f() }}", "too deep");
}

TEST(JinjaMalformed, HugeLoopsHitStepLimit) {
  ExpectError("{% for i in range(100000000) %}{% endfor %}", "range too big");
  // 10^10 iterations, stopped by the step limit: the error names the limit that was hit. A
  // small limit keeps the work (and so the test) the same size on any machine or sanitizer.
  Limits small;
  small.max_steps = 10000;
  ExpectError("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
              "template exceeded the step limit (10000)", small);
  small.max_steps = 1000;
  ExpectError("{% for i in range(5000) %}{{ i }}{% endfor %}",
              "template exceeded the step limit (1000)", small);
  // Within the limit the same loop renders.
  small.max_steps = 100000;
  EXPECT_EQ(Render("{% for i in range(5000) %}{% endfor %}ok", "{}", small), "ok");
  // The default limit is finite and is what stops an endless template.
  EXPECT_GT(Limits{}.max_steps, 0u);
  EXPECT_LT(Limits{}.max_steps, size_t{1} << 40);
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
