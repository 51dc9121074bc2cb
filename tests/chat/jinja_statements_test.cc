// Statements and whitespace control, with expectations from Jinja2's documented semantics
// (trim_blocks=True, lstrip_blocks=True as transformers configures it).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "jinja_test_util.h"

namespace tessera::jinja::test {
namespace {

TEST(JinjaWhitespace, TrimBlocksRemovesFirstNewlineAfterBlockTag) {
  EXPECT_EQ(Render("{% if true %}\nyes\n{% endif %}\nafter"), "yes\nafter");
  // Only one newline is removed.
  EXPECT_EQ(Render("{% if true %}\n\nyes{% endif %}"), "\nyes");
}

TEST(JinjaWhitespace, TrimBlocksDoesNotApplyToExpressions) {
  EXPECT_EQ(Render("{{ 'a' }}\nb"), "a\nb");
}

TEST(JinjaWhitespace, LstripBlocksStripsIndentBeforeBlockTags) {
  EXPECT_EQ(Render("x\n    {% if true %}y{% endif %}"), "x\ny");
  // Not before expressions.
  EXPECT_EQ(Render("x\n    {{ 'y' }}"), "x\n    y");
  // Not when other text precedes the tag on its line.
  EXPECT_EQ(Render("x\n  a {% if true %}y{% endif %}"), "x\n  a y");
  // At the very start of the template.
  EXPECT_EQ(Render("  {% if true %}y{% endif %}"), "y");
}

TEST(JinjaWhitespace, PlusDisablesLstrip) {
  EXPECT_EQ(Render("x\n    {%+ if true %}y{% endif %}"), "x\n    y");
}

TEST(JinjaWhitespace, MinusStripsAllWhitespace) {
  EXPECT_EQ(Render("a  \n\n  {%- if true -%}  \n\n b {%- endif %}"), "ab");
  EXPECT_EQ(Render("a \n {{- 'b' -}} \n c"), "abc");
  EXPECT_EQ(Render("a \n {#- comment -#} \n c"), "ac");
}

TEST(JinjaWhitespace, CommentsFollowBlockRules) {
  EXPECT_EQ(Render("a\n  {# note #}\nb"), "a\nb");
}

TEST(JinjaWhitespace, TrailingNewlineOfTemplateIsDropped) {
  EXPECT_EQ(Render("hello\n"), "hello");
  EXPECT_EQ(Render("hello\n\n"), "hello\n");
  EXPECT_EQ(Render("a\r\nb"), "a\nb");
}

TEST(JinjaWhitespace, RawBlocks) {
  EXPECT_EQ(Render("{% raw %}{{ not evaluated }}{% endraw %}"), "{{ not evaluated }}");
  EXPECT_EQ(Render("{% raw -%}  x  {%- endraw %}"), "x");
}

TEST(JinjaStatements, IfElifElse) {
  const char* t = "{% if x > 2 %}big{% elif x > 0 %}small{% else %}none{% endif %}";
  EXPECT_EQ(Render(t, R"({"x": 5})"), "big");
  EXPECT_EQ(Render(t, R"({"x": 1})"), "small");
  EXPECT_EQ(Render(t, R"({"x": 0})"), "none");
}

TEST(JinjaStatements, ForLoopVariables) {
  EXPECT_EQ(Render("{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
                   "{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};"
                   "{% endfor %}"),
            "1032TrueFalse3;2121FalseFalse3;3210FalseTrue3;");
  EXPECT_EQ(Render("{% for x in [1,2,3] %}{{ loop.previtem }}-{{ loop.nextitem }},{% endfor %}"),
            "-2,1-3,2-,");
  EXPECT_EQ(Render("{% for x in range(4) %}{{ loop.cycle('a', 'b') }}{% endfor %}"), "abab");
}

TEST(JinjaStatements, ForElseAndFilter) {
  EXPECT_EQ(Render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(Render("{% for x in range(6) if x is even %}{{ x }}/{{ loop.length }} {% endfor %}"),
            "0/3 2/3 4/3 ");
}

TEST(JinjaStatements, ForOverDictsAndUnpacking) {
  const char* ctx = R"({"d": {"b": 1, "a": 2}})";
  EXPECT_EQ(Render("{% for k in d %}{{ k }}{% endfor %}", ctx), "ba");
  EXPECT_EQ(Render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", ctx), "b=1;a=2;");
  EXPECT_EQ(Render("{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}"), "37");
}

TEST(JinjaStatements, BreakAndContinue) {
  EXPECT_EQ(Render("{% for i in range(10) %}{% if i == 3 %}{% break %}{% endif %}{{ i }}"
                   "{% endfor %}"),
            "012");
  EXPECT_EQ(Render("{% for i in range(5) %}{% if i is odd %}{% continue %}{% endif %}{{ i }}"
                   "{% endfor %}"),
            "024");
}

TEST(JinjaStatements, SetScopingFollowsJinja) {
  // A set inside a for loop does not leak out of the loop.
  EXPECT_EQ(Render("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}"), "1");
  // Inside if it does.
  EXPECT_EQ(Render("{% set x = 1 %}{% if true %}{% set x = 2 %}{% endif %}{{ x }}"), "2");
  // Namespaces carry state out of loops.
  EXPECT_EQ(Render("{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}"
                   "{% endfor %}{{ ns.n }}"),
            "6");
  EXPECT_EQ(Render("{% set a, b = 1, 2 %}{{ b }}{{ a }}"), "21");
}

TEST(JinjaStatements, BlockSet) {
  EXPECT_EQ(Render("{% set x %}a{{ 1 + 1 }}b{% endset %}[{{ x }}]"), "[a2b]");
  EXPECT_EQ(Render("{% set x | upper %}abc{% endset %}{{ x }}"), "ABC");
}

TEST(JinjaStatements, MacrosWithDefaultsAndKeywords) {
  const char* t =
      "{% macro greet(name, greeting='Hello', punct='!') %}{{ greeting }}, {{ name }}{{ punct }}"
      "{% endmacro %}{{ greet('Ann') }}|{{ greet('Bob', punct='?') }}|{{ greet('C', 'Hi') }}";
  EXPECT_EQ(Render(t), "Hello, Ann!|Hello, Bob?|Hi, C!");
  // A missing argument is undefined, which prints as nothing.
  EXPECT_EQ(Render("{% macro m(a, b) %}[{{ b }}]{% endmacro %}{{ m(1) }}"), "[]");
  // Macros see template-level variables.
  EXPECT_EQ(Render("{% macro m() %}{{ g }}{% endmacro %}{{ m() }}", R"({"g": "G"})"), "G");
}

TEST(JinjaStatements, CallBlocks) {
  EXPECT_EQ(Render("{% macro wrap() %}<{{ caller() }}>{% endmacro %}"
                   "{% call wrap() %}inner{% endcall %}"),
            "<inner>");
  EXPECT_EQ(Render("{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}"
                   "{% call(v) each([1, 2]) %}({{ v }}){% endcall %}"),
            "(1)(2)");
}

TEST(JinjaStatements, FilterWithAndGenerationBlocks) {
  EXPECT_EQ(Render("{% filter upper %}abc{% endfilter %}"), "ABC");
  EXPECT_EQ(Render("{% with a = 2 %}{{ a }}{% endwith %}{{ a }}"), "2");
  EXPECT_EQ(Render("x{% generation %}gen {{ 1 }}{% endgeneration %}y"), "xgen 1y");
}

TEST(JinjaStatements, RaiseException) {
  auto tmpl = Template::Parse("a{{ raise_exception('bad ' ~ 'input') }}");
  ASSERT_TRUE(tmpl.has_value());
  bool raised = false;
  auto out = tmpl->Render(nlohmann::ordered_json::object(), {}, &raised);
  ASSERT_FALSE(out.has_value());
  EXPECT_TRUE(raised);
  EXPECT_EQ(out.status().message(), "bad input");
}

TEST(JinjaStatements, StrftimeNow) {
  std::string year = Render("{{ strftime_now('%Y') }}");
  ASSERT_EQ(year.size(), 4u) << year;
  EXPECT_GE(std::stoi(year), 2024);
}

}  // namespace
}  // namespace tessera::jinja::test
