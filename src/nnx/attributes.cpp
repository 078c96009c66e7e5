// Static attributes of modules: Flax's set_attributes, train() and eval(), and the values that
// key nnx::jit's cache (a mode is part of the graphdef in Flax, so it retraces there too).
#include <cstdio>
#include <set>

#include "cujax/nnx/module.h"

namespace cujax::nnx {

namespace {

std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

const char* type_name(const AttributeValue& v) {
  switch (v.index()) {
    case 0:
      return "bool";
    case 1:
      return "int";
    case 2:
      return "float";
    default:
      return "str";
  }
}

}  // namespace

std::string attribute_str(const AttributeValue& v) {
  if (const bool* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (const int64_t* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const double* d = std::get_if<double>(&v)) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", *d);  // exact: 0.5 and 0.5000001 key differently
    return buf;
  }
  return std::get<std::string>(v);
}

void Module::attribute(const std::string& name, bool& member) {
  attributes_.push_back({name, &member});
}
void Module::attribute(const std::string& name, int64_t& member) {
  attributes_.push_back({name, &member});
}
void Module::attribute(const std::string& name, double& member) {
  attributes_.push_back({name, &member});
}
void Module::attribute(const std::string& name, std::string& member) {
  attributes_.push_back({name, &member});
}

void Module::for_each_module(const std::function<void(const std::string&, Module&)>& fn,
                             const std::string& prefix) {
  fn(prefix, *this);
  for (auto& e : entries_)
    if (e.module) e.module->for_each_module(fn, join(prefix, e.name));
}

void Module::set_attributes(const std::vector<std::pair<std::string, AttributeValue>>& attributes,
                            bool raise_if_not_found, const ModulePredicate& select) {
  std::set<std::string> found;
  for_each_module([&](const std::string& path, Module& m) {
    if (select && !select(path, m)) return;
    for (const auto& [name, value] : attributes)
      for (auto& a : m.attributes_) {
        if (a.name != name) continue;
        found.insert(name);
        const std::string where = join(path, name);
        auto mismatch = [&](const char* want) {
          return Error("nnx.set_attributes: " + where + " is " + want + ", got " +
                       type_name(value) + " " + attribute_str(value));
        };
        std::visit(
            [&](auto* member) {
              using T = std::remove_pointer_t<decltype(member)>;
              if constexpr (std::is_same_v<T, double>) {
                if (const int64_t* i = std::get_if<int64_t>(&value))
                  *member = static_cast<double>(*i);
                else if (const double* d = std::get_if<double>(&value))
                  *member = *d;
                else
                  throw mismatch("float");
              } else {
                const T* v = std::get_if<T>(&value);
                if (!v)
                  throw mismatch(std::is_same_v<T, bool>      ? "bool"
                                 : std::is_same_v<T, int64_t> ? "int"
                                                              : "str");
                *member = *v;
              }
            },
            a.member);
      }
  });
  if (!raise_if_not_found) return;
  std::string missing;
  for (const auto& [name, value] : attributes)
    if (!found.count(name)) missing += (missing.empty() ? "" : ", ") + name;
  if (!missing.empty())
    throw Error(
        "nnx.set_attributes: could not find at least one instance of the following "
        "attributes: " +
        missing);
}

void Module::train(const std::vector<std::pair<std::string, AttributeValue>>& extra) {
  auto attrs = extra;
  attrs.emplace_back("deterministic", false);
  attrs.emplace_back("use_running_average", false);
  set_attributes(attrs, false);
}

void Module::eval(const std::vector<std::pair<std::string, AttributeValue>>& extra) {
  auto attrs = extra;
  attrs.emplace_back("deterministic", true);
  attrs.emplace_back("use_running_average", true);
  set_attributes(attrs, false);
}

std::vector<std::pair<std::string, std::string>> Module::static_attributes() {
  std::vector<std::pair<std::string, std::string>> out;
  for_each_module([&](const std::string& path, Module& m) {
    for (const auto& a : m.attributes_)
      out.emplace_back(
          join(path, a.name),
          std::visit([](auto* member) { return attribute_str(AttributeValue(*member)); },
                     a.member));
  });
  return out;
}

std::string static_attributes_str(Module& module) {
  std::string s;
  for (const auto& [path, value] : module.static_attributes())
    s += (s.empty() ? "" : ";") + path + "=" + value;
  return s;
}

}  // namespace cujax::nnx
