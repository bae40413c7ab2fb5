#include "runtime/config/schema.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>

namespace asyncrl {

namespace {

std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::string unquote(const std::string& s) {
  if (s.size() >= 2 &&
      ((s.front() == '"' && s.back() == '"') || (s.front() == '\'' && s.back() == '\'')))
    return s.substr(1, s.size() - 2);
  return s;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

[[noreturn]] void fail(const std::string& where, const std::string& key, const std::string& what) {
  throw config_error(where + ": key '" + key + "': " + what);
}

// The shortest text that reads back as exactly `v` (0.0002, not 0.00020000000000000001): the
// dumped config and the console's answers stay readable and still round-trip bit for bit.
std::string format_double(double v) {
  std::string s;
  for (int precision = 1; precision <= 17; ++precision) {
    std::ostringstream os;
    os.precision(precision);
    os << v;
    s = os.str();
    if (std::strtod(s.c_str(), nullptr) == v) break;
  }
  return s;
}

}  // namespace

void config_schema::add_entry(const std::string& key, entry e) {
  if (entries_.count(key) != 0) throw std::logic_error("config key registered twice: " + key);
  entries_.emplace(key, std::move(e));
}

void config_schema::add(const std::string& key, int64_t* field, const std::string& help,
                        check_fn<int64_t> check) {
  entry e;
  e.type_name = "integer";
  e.help = help;
  e.set = [=](const std::string& text, const std::string& where) {
    int64_t v = 0;
    auto t = trim(text);
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (t.empty() || ec != std::errc() || p != t.data() + t.size())
      fail(where, key, "expected an integer, got '" + text + "'");
    if (check) {
      auto msg = check(v);
      if (!msg.empty()) fail(where, key, msg + " (got " + t + ")");
    }
    *field = v;
  };
  e.get = [=] { return std::to_string(*field); };
  add_entry(key, std::move(e));
}

void config_schema::add(const std::string& key, double* field, const std::string& help,
                        check_fn<double> check) {
  entry e;
  e.type_name = "number";
  e.help = help;
  e.set = [=](const std::string& text, const std::string& where) {
    auto t = trim(text);
    char* end = nullptr;
    errno = 0;
    double v = t.empty() ? 0.0 : std::strtod(t.c_str(), &end);
    if (t.empty() || end != t.c_str() + t.size() || errno == ERANGE || !std::isfinite(v))
      fail(where, key, "expected a finite number, got '" + text + "'");
    if (check) {
      auto msg = check(v);
      if (!msg.empty()) fail(where, key, msg + " (got " + t + ")");
    }
    *field = v;
  };
  e.get = [=] { return format_double(*field); };
  add_entry(key, std::move(e));
}

void config_schema::add(const std::string& key, bool* field, const std::string& help) {
  entry e;
  e.type_name = "boolean";
  e.help = help;
  e.set = [=](const std::string& text, const std::string& where) {
    auto t = trim(text);
    std::string lower(t);
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    if (lower == "true" || lower == "yes" || lower == "on" || lower == "1")
      *field = true;
    else if (lower == "false" || lower == "no" || lower == "off" || lower == "0")
      *field = false;
    else
      fail(where, key, "expected true or false, got '" + text + "'");
  };
  e.get = [=] { return std::string(*field ? "true" : "false"); };
  add_entry(key, std::move(e));
}

void config_schema::add(const std::string& key, std::string* field, const std::string& help,
                        check_fn<std::string> check) {
  entry e;
  e.type_name = "string";
  e.help = help;
  e.quoted = true;
  e.set = [=](const std::string& text, const std::string& where) {
    if (check) {
      auto msg = check(text);
      if (!msg.empty()) fail(where, key, msg + " (got '" + text + "')");
    }
    *field = text;
  };
  e.get = [=] { return *field; };
  add_entry(key, std::move(e));
}

void config_schema::add(const std::string& key, std::vector<std::string>* field,
                        const std::string& help, check_fn<std::string> item_check) {
  entry e;
  e.type_name = "list of strings";
  e.help = help;
  e.set = [=](const std::string& text, const std::string& where) {
    auto t = trim(text);
    if (t.size() >= 2 && t.front() == '[' && t.back() == ']') t = t.substr(1, t.size() - 2);
    std::vector<std::string> items;
    std::stringstream ss(t);
    for (std::string item; std::getline(ss, item, ',');) {
      item = unquote(trim(item));
      if (item.empty()) continue;
      if (item_check) {
        auto msg = item_check(item);
        if (!msg.empty()) fail(where, key, msg + " (item '" + item + "')");
      }
      items.push_back(item);
    }
    *field = std::move(items);
  };
  e.get = [=] {
    std::string out = "[";
    for (size_t i = 0; i < field->size(); ++i)
      out += (i ? ", " : "") + (*field)[i];
    return out + "]";
  };
  e.items = [=] { return *field; };
  add_entry(key, std::move(e));
}

void config_schema::add_named(const std::string& key, std::vector<std::string> names,
                              std::function<std::string()> get, std::function<void(size_t)> set,
                              const std::string& help) {
  std::string list;
  for (auto& c : names)
    list += (list.empty() ? "" : ", ") + c;
  entry e;
  e.type_name = "one of {" + list + "}";
  e.help = help;
  e.quoted = true;
  e.set = [=](const std::string& text, const std::string& where) {
    auto t = trim(text);
    auto it = std::find(names.begin(), names.end(), t);
    if (it == names.end()) fail(where, key, "expected one of {" + list + "}, got '" + text + "'");
    set(static_cast<size_t>(it - names.begin()));
  };
  e.get = std::move(get);
  add_entry(key, std::move(e));
}

void config_schema::add_choice(const std::string& key, std::string* field,
                               std::vector<std::string> choices, const std::string& help) {
  add_named(
      key, choices, [field] { return *field; }, [field, choices](size_t i) { *field = choices[i]; },
      help);
}

void config_schema::alias(const std::string& other_name, const std::string& key) {
  if (entries_.count(key) == 0 || entries_.count(other_name) != 0)
    throw std::logic_error("bad config alias " + other_name + " -> " + key);
  aliases_[other_name] = key;
  entries_[key].help += " (also " + other_name + ")";
}

config_schema::entry& config_schema::lookup(const std::string& key, const std::string& where) {
  auto it = entries_.find(key);
  if (it != entries_.end()) return it->second;
  if (auto a = aliases_.find(key); a != aliases_.end()) return entries_.at(a->second);
  // Suggest the closest known key, so that a typo is a one-glance fix.
  std::string best;
  size_t best_d = 4;
  for (auto& [k, _] : entries_) {
    auto d = edit_distance(k, key);
    if (d < best_d) best_d = d, best = k;
  }
  std::string msg = where + ": unknown key '" + key + "'";
  if (!best.empty()) msg += " (did you mean '" + best + "'?)";
  throw config_error(msg);
}

namespace {

void walk(
    const YAML::Node& node, const std::string& prefix, const std::string& file,
    const std::function<void(const std::string&, const YAML::Node&, const std::string&)>& leaf) {
  auto where = [&](const YAML::Node& n) { return file + ":" + std::to_string(n.Mark().line + 1); };
  if (node.IsMap()) {
    for (auto it = node.begin(); it != node.end(); ++it) {
      // Copies: yaml-cpp's iterator yields a temporary pair of node handles.
      YAML::Node name_node = it->first;
      YAML::Node value = it->second;
      auto name = name_node.as<std::string>();
      auto key = prefix.empty() ? name : prefix + "." + name;
      if (value.IsMap()) {
        walk(value, key, file, leaf);
      } else {  // a scalar, or a sequence for a list key (the leaf checks which)
        leaf(key, value, where(name_node));
      }
    }
  } else if (!node.IsNull()) {
    throw config_error(file + ": the top level must be a map of sections (e.g. 'trainer:')");
  }
}

}  // namespace

void config_schema::load_yaml_text(const std::string& text, const std::string& name) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw config_error(name + ":" + std::to_string(e.mark.line + 1) + ": invalid YAML: " + e.msg);
  }
  // `base: other.yaml` (relative to this file) loads another config first; this file's keys
  // then override it. Lets each mode's config be a short overlay of configs/demo.yaml.
  if (root.IsMap() && root["base"]) {
    YAML::Node base = root["base"];
    auto where = name + ":" + std::to_string(base.Mark().line + 1);
    if (!base.IsScalar() || base.Scalar().empty())
      throw config_error(where + ": key 'base': expected the path of another config file");
    auto path = std::filesystem::path(name).parent_path() / base.Scalar();
    if (std::find(loading_.begin(), loading_.end(), path.lexically_normal().string()) !=
            loading_.end() ||
        loading_.size() > 8)
      throw config_error(where + ": key 'base': '" + base.Scalar() + "' includes itself");
    loading_.push_back(std::filesystem::path(name).lexically_normal().string());
    load_yaml_file(path.string());
    loading_.pop_back();
    root.remove("base");
  }
  walk(root, "", name, [&](const std::string& key, const YAML::Node& v, const std::string& where) {
    auto& e = lookup(key, where);
    if (v.IsSequence()) {
      if (!e.items) fail(where, key, "lists are not supported here; give a single value");
      std::string joined;
      for (const auto& item : v) {
        if (!item.IsScalar()) fail(where, key, "expected a list of plain values");
        joined += (joined.empty() ? "" : ",") + item.Scalar();
      }
      e.set(joined, where);
      e.origin.where = where;
      return;
    }
    std::string scalar = v.IsNull() ? "" : v.Scalar();
    if (v.IsNull() && e.type_name != "string")
      fail(where, key, "has no value; expected " + e.type_name);
    e.set(scalar, where);
    e.origin.where = where;
  });
}

void config_schema::load_yaml_file(const std::string& path) {
  std::string text;
  {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) throw config_error(path + ": cannot open config file");
    char buf[4096];
    size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
      text.append(buf, n);
    std::fclose(f);
  }
  load_yaml_text(text, path);
}

void config_schema::apply_override(const std::string& assignment) {
  std::string where = "command line argument '" + assignment + "'";
  auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) throw config_error(where + ": expected dotted.key=value");
  auto key = trim(assignment.substr(0, eq));
  auto value = unquote(trim(assignment.substr(eq + 1)));
  auto& e = lookup(key, where);
  e.set(value, where);
  e.origin.where = where;
}

const value_origin& config_schema::origin(const std::string& key) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) throw std::logic_error("no config key " + key);
  return it->second.origin;
}

bool config_schema::has(const std::string& key) const {
  return entries_.count(key) != 0;
}

std::string config_schema::value(const std::string& key) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) throw config_error("unknown key '" + key + "'");
  return it->second.get();
}

std::vector<std::string> config_schema::keys() const {
  std::vector<std::string> out;
  for (auto& [key, e] : entries_)
    out.push_back(key);
  return out;
}

std::string config_schema::dump_yaml() const {
  // Keys are sorted, so sections come out grouped; emit them as nested YAML.
  YAML::Emitter out;
  out << YAML::BeginMap;
  std::vector<std::string> open;
  for (auto& [key, e] : entries_) {
    std::vector<std::string> parts;
    std::stringstream ss(key);
    std::string p;
    while (std::getline(ss, p, '.'))
      parts.push_back(p);
    size_t common = 0;
    while (common < open.size() && common + 1 < parts.size() && open[common] == parts[common])
      ++common;
    while (open.size() > common) {
      out << YAML::EndMap;
      open.pop_back();
    }
    for (size_t i = common; i + 1 < parts.size(); ++i) {
      out << YAML::Key << parts[i] << YAML::Value << YAML::BeginMap;
      open.push_back(parts[i]);
    }
    out << YAML::Key << parts.back() << YAML::Value;
    if (e.items) {
      out << YAML::Flow << YAML::BeginSeq;
      for (const auto& item : e.items())
        out << YAML::DoubleQuoted << item;
      out << YAML::EndSeq;
    } else if (e.quoted)
      out << YAML::DoubleQuoted << e.get();
    else
      out << e.get();
  }
  while (!open.empty()) {
    out << YAML::EndMap;
    open.pop_back();
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

std::string config_schema::describe() const {
  std::ostringstream os;
  for (auto& [key, e] : entries_)
    os << key << " (" << e.type_name << ", " << (e.quoted ? "'" + e.get() + "'" : e.get())
       << "): " << e.help << "\n";
  return os.str();
}

namespace checks {

std::function<std::string(const int64_t&)> positive_int() {
  return [](const int64_t& v) { return v > 0 ? std::string() : std::string("must be > 0"); };
}
std::function<std::string(const int64_t&)> non_negative_int() {
  return [](const int64_t& v) { return v >= 0 ? std::string() : std::string("must be >= 0"); };
}
std::function<std::string(const int64_t&)> int_at_least(int64_t lo) {
  return [lo](const int64_t& v) {
    return v >= lo ? std::string() : "must be >= " + std::to_string(lo);
  };
}
std::function<std::string(const double&)> positive() {
  return [](const double& v) { return v > 0 ? std::string() : std::string("must be > 0"); };
}
std::function<std::string(const double&)> non_negative() {
  return [](const double& v) { return v >= 0 ? std::string() : std::string("must be >= 0"); };
}
std::function<std::string(const double&)> in_range(double lo, double hi) {
  return [lo, hi](const double& v) {
    return (v >= lo && v <= hi)
               ? std::string()
               : "must be in [" + format_double(lo) + ", " + format_double(hi) + "]";
  };
}

std::function<std::string(const std::string&)> device_or_empty() {
  return [](const std::string& v) {
    if (v.empty() || v == "cpu" || v == "cuda") return std::string();
    const auto n = v.rfind("cuda:", 0) == 0 ? v.substr(5) : std::string();
    if (!n.empty() && n.size() < 4 && n.find_first_not_of("0123456789") == std::string::npos)
      return std::string();
    return std::string("expected cpu, cuda or cuda:N");
  };
}

}  // namespace checks

}  // namespace asyncrl
