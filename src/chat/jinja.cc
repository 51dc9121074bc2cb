#include "chat/jinja.h"

#include <new>
#include <nlohmann/json.hpp>

#include "chat/interpreter.h"
#include "chat/parser.h"

namespace tessera::jinja {

Expected<Template> Template::Parse(std::string_view source, const Limits& limits) {
  TS_ASSIGN_OR_RETURN(std::unique_ptr<Program> program, ParseTemplate(source, limits.max_depth));
  Template t;
  t.program_ = std::shared_ptr<const Program>(std::move(program));
  return t;
}

Expected<std::string> Template::Render(const nlohmann::ordered_json& context,
                                       const Limits& limits) const {
  return Render(context, limits, nullptr);
}

Expected<std::string> Template::Render(const nlohmann::ordered_json& context, const Limits& limits,
                                       bool* raised_by_template) const {
  if (raised_by_template) *raised_by_template = false;
  if (!program_) return InvalidArgument("template was not parsed");
  if (!context.is_object()) return InvalidArgument("template context must be a JSON object");
  try {
    Value ctx = Value::FromJson(context);
    Interpreter interpreter(*program_, limits);
    return interpreter.Run(ctx);
  } catch (const TemplateError& e) {
    if (e.raised_by_template) {
      if (raised_by_template) *raised_by_template = true;
      return InvalidArgument(e.message);
    }
    std::string where = e.line > 0 ? "template line " + std::to_string(e.line) + ", column " +
                                         std::to_string(e.column) + ": "
                                   : std::string("template context: ");
    return InvalidArgument(where + e.message);
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("template rendering ran out of memory");
  } catch (const std::exception& e) {
    return Internal(std::string("template rendering failed: ") + e.what());
  }
}

}  // namespace tessera::jinja
