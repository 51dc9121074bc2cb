// Expressions: literals, operators with Python semantics, attribute/subscript access, slicing,
// tests, undefined handling and method calls.
#include <gtest/gtest.h>

#include "jinja_test_util.h"

namespace tessera::jinja::test {
namespace {

TEST(JinjaExpressions, Literals) {
  EXPECT_EQ(Render("{{ 'a\\tb\\n' }}|{{ \"q\\\"\" }}|{{ '\\u00e9' }}"), "a\tb\n|q\"|\xc3\xa9");
  EXPECT_EQ(Render("{{ 42 }} {{ 1_000 }} {{ 2.5 }} {{ 1e3 }}"), "42 1000 2.5 1000.0");
  EXPECT_EQ(Render("{{ true }} {{ False }} {{ none }} {{ None }}"), "True False None None");
  EXPECT_EQ(Render("{{ [1, 'a', none, true] }}"), "[1, 'a', None, True]");
  EXPECT_EQ(Render("{{ {'k': 'v', 'n': 1} }}"), "{'k': 'v', 'n': 1}");
  EXPECT_EQ(Render("{{ (1, 2) }} {{ (1,) }} {{ () }}"), "(1, 2) (1,) ()");
  EXPECT_EQ(Render("{{ \"it's\" }}|{{ [\"it's\"] }}"), "it's|[\"it's\"]");
}

TEST(JinjaExpressions, ArithmeticLikePython) {
  EXPECT_EQ(Render("{{ 7 / 2 }} {{ 6 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }}"),
            "3.5 3.0 3 -4 1 2");
  EXPECT_EQ(Render("{{ 2 ** 10 }} {{ 2 ** -1 }} {{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }}"),
            "1024 0.5 7 9");
  EXPECT_EQ(Render("{{ 0.1 + 0.2 }} {{ 1.0 }} {{ 1e16 }} {{ 1.5e-05 }} {{ 0.0001 }}"),
            "0.30000000000000004 1.0 1e+16 1.5e-05 0.0001");
  EXPECT_EQ(Render("{{ 'ab' * 3 }} {{ [1] * 2 }} {{ 'a' + 'b' }} {{ [1] + [2] }}"),
            "ababab [1, 1] ab [1, 2]");
  EXPECT_EQ(Render("{{ 1 ~ 'x' ~ none ~ undefined_var }}"), "1xNone");
  EXPECT_EQ(Render("{{ true + 1 }} {{ -(3) }} {{ - 2.5 }}"), "2 -3 -2.5");
}

TEST(JinjaExpressions, ArithmeticErrors) {
  EXPECT_TRUE(StartsWith(Render("{{ 1 / 0 }}"), "ERROR: template line 1, column"));
  EXPECT_NE(Render("{{ 'a' + 1 }}").find("unsupported operand"), std::string::npos);
  EXPECT_NE(Render("{{ 9223372036854775807 + 1 }}").find("overflow"), std::string::npos);
}

TEST(JinjaExpressions, ComparisonsAndLogic) {
  EXPECT_EQ(Render("{{ 1 < 2 < 3 }} {{ 1 < 2 > 3 }} {{ 1 == 1.0 }} {{ 'a' != 'b' }}"),
            "True False True True");
  EXPECT_EQ(Render("{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [3] }}"),
            "True True True False");
  EXPECT_EQ(Render("{{ 0 or 'x' }} {{ 1 and 'y' }} {{ '' and 'z' }} {{ not 0 }}"), "x y  True");
  EXPECT_EQ(Render("{{ 'yes' if 1 > 0 else 'no' }} {{ 'yes' if 0 else 'no' }} [{{ 'x' if 0 }}]"),
            "yes no []");
  EXPECT_EQ(Render("{{ [1, 2] == [1, 2] }} {{ (1, 2) < (1, 3) }}"), "True True");
}

TEST(JinjaExpressions, AttributesSubscriptsAndSlices) {
  const char* ctx = R"({"m": {"role": "user", "content": "hello"}, "xs": [10, 20, 30, 40]})";
  EXPECT_EQ(Render("{{ m.role }} {{ m['content'] }} {{ xs[0] }} {{ xs[-1] }} {{ xs.1 }}", ctx),
            "user hello 10 40 20");
  EXPECT_EQ(Render("{{ xs[1:3] }} {{ xs[::-1] }} {{ xs[:-1] }} {{ xs[::2] }} {{ xs[5:] }}", ctx),
            "[20, 30] [40, 30, 20, 10] [10, 20, 30] [10, 30] []");
  EXPECT_EQ(Render("{{ m.content[1:3] }} {{ m.content[::-1] }} {{ 'h\xc3\xa9llo'[1] }}", ctx),
            "el olleh \xc3\xa9");
  // Missing keys and indexes are undefined, which prints as nothing.
  EXPECT_EQ(Render("[{{ m.missing }}][{{ xs[10] }}]", ctx), "[][]");
}

TEST(JinjaExpressions, UndefinedSemantics) {
  EXPECT_EQ(Render("[{{ nope }}]{% if nope %}t{% else %}f{% endif %}"
                   "{% for x in nope %}x{% endfor %}{{ nope is defined }}"),
            "[]fFalse");
  // Attribute access on an undefined value raises, like Jinja2's default Undefined.
  std::string err = Render("{{ nope.attr }}");
  EXPECT_TRUE(StartsWith(err, "ERROR: template line 1, column")) << err;
  EXPECT_NE(err.find("'nope' is undefined"), std::string::npos) << err;
  // Missing attribute of a dict is undefined; its attribute raises.
  EXPECT_NE(Render("{{ d.a.b }}", R"({"d": {}})").find("ERROR"), std::string::npos);
  // Comparisons with undefined: equality is allowed, ordering raises.
  EXPECT_EQ(Render("{{ nope == none }} {{ nope != 1 }}"), "False True");
  EXPECT_NE(Render("{{ nope < 1 }}").find("ERROR"), std::string::npos);
}

TEST(JinjaExpressions, Tests) {
  EXPECT_EQ(Render("{{ 1 is number }} {{ 1.5 is float }} {{ 1 is integer }} {{ 'a' is string }}"
                   " {{ none is none }} {{ true is boolean }} {{ {} is mapping }}"
                   " {{ [] is iterable }} {{ 'a' is sequence }} {{ 1 is iterable }}"),
            "True True True True True True True True True False");
  EXPECT_EQ(Render("{{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }}"
                   " {{ 2 is equalto 2 }} {{ 2 is eq(3) }} {{ true is true }} {{ 0 is false }}"
                   " {{ 2 is in [1, 2] }} {{ x is not defined }} {{ x is undefined }}"),
            "True True True True False True False True True True");
}

TEST(JinjaExpressions, StringMethods) {
  EXPECT_EQ(Render("{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'c')) }}"
                   " {{ '  x  '.strip() }}| {{ 'xxhixx'.strip('x') }} {{ '\\nhi'.lstrip('\\n') }}"
                   " {{ 'hi  '.rstrip() }}|"),
            "True True x| hi hi hi|");
  EXPECT_EQ(Render("{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a,b,c'.split(',', 1) }}"),
            "['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b,c']");
  EXPECT_EQ(Render("{{ 'aaa'.replace('a', 'b', 2) }} {{ 'Hi'.upper() }} {{ 'Hi'.lower() }}"
                   " {{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }}"),
            "bba HI hi Hello World Hello");
  EXPECT_EQ(Render("{{ 'hello'.find('l') }} {{ 'hello'.find('z') }} {{ 'hello'.count('l') }}"
                   " {{ '-'.join(['a', 'b']) }} {{ '{} and {name}'.format(1, name='x') }}"),
            "2 -1 2 a-b 1 and x");
  const char* ctx = R"({"s": "<think>\nr\n</think>\n\nanswer"})";
  EXPECT_EQ(Render("{{ s.split('</think>')[-1].lstrip('\\n') }}|"
                   "{{ s.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}",
                   ctx),
            "answer|r");
}

TEST(JinjaExpressions, DictAndListMethods) {
  const char* ctx = R"({"d": {"a": 1, "b": 2}})";
  EXPECT_EQ(Render("{{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 5) }} {{ d.keys() }}"
                   " {{ d.values() }} {{ d.items() }}",
                   ctx),
            "1 None 5 ['a', 'b'] [1, 2] [('a', 1), ('b', 2)]");
  EXPECT_EQ(Render("{% set l = [1] %}{% set _ = l.append(2) %}{{ l }} {{ l.index(2) }}"
                   " {{ l.pop() }} {{ l }}"),
            "[1, 2] 1 2 [1]");
}

TEST(JinjaExpressions, GlobalFunctions) {
  EXPECT_EQ(Render("{{ range(3) }} {{ range(1, 7, 2) }} {{ range(3, 0, -1) }}"),
            "[0, 1, 2] [1, 3, 5] [3, 2, 1]");
  EXPECT_EQ(Render("{{ dict(a=1, b='x') }}"), "{'a': 1, 'b': 'x'}");
  EXPECT_EQ(Render("{% set ns = namespace(a=1) %}{{ ns.a }}"), "1");
}

}  // namespace
}  // namespace tessera::jinja::test
