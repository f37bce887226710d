// Strict YAML configuration: overrides, typed getters that record problems, and the final report (config.hpp).
#include "mpigan/core/config.hpp"

#include "mpigan/core/error.hpp"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <type_traits>

namespace mpigan {

struct ConfigDocument::State {
  std::string file;
  YAML::Node root;
  std::set<std::string> overridden;
  std::vector<std::string> problems;
};

namespace {

std::string show(const YAML::Node& n) {
  if (n.IsScalar()) return "'" + n.Scalar() + "'";
  std::ostringstream os;
  os << YAML::Dump(n);
  std::string s = os.str();
  for (auto& c : s)
    if (c == '\n') c = ' ';
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

/// ">= 0" or "in [1, 8]" for an integer range.
std::string int_range(std::int64_t min, std::int64_t max) {
  return max == std::numeric_limits<std::int64_t>::max() ? fmt::format(">= {}", min)
                                                         : fmt::format("in [{}, {}]", min, max);
}

/// "> 0", ">= 0" or "in (0, 100]" for a real range.
std::string real_range(double min, double max, bool min_exclusive) {
  if (std::isinf(max)) return fmt::format("{} {}", min_exclusive ? ">" : ">=", min);
  return fmt::format("in {}{}, {}]", min_exclusive ? "(" : "[", min, max);
}

/// A whole scalar as a number of type T, or nullopt.
template <class T>
std::optional<T> parse_number(const std::string& s) {
  if constexpr (std::is_integral_v<T>) {
    T x = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
    if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
    return x;
  } else {
    char* end = nullptr;
    const double x = s.empty() ? 0.0 : std::strtod(s.c_str(), &end);
    if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(x)) return std::nullopt;
    return x;
  }
}

/// Experiment files are a few kB; a larger one is not an experiment (or a wrong path).
constexpr std::uintmax_t kMaxFileBytes = 1 << 20;
/// Nodes a document may reach through its aliases: experiments hold a few hundred. yaml-cpp shares an
/// aliased node, but every walk of the tree visits it once per alias, so aliases of aliases grow
/// exponentially ("billion laughs": 11 levels kept a process busy for 14 minutes).
constexpr std::size_t kMaxNodes = 100000;

/// Walks @p n as every reader of the tree does (an alias once per appearance), counting down @p left;
/// false once it runs out.
bool within_budget(const YAML::Node& n, std::size_t& left) {
  if (left == 0) return false;
  --left;
  if (n.IsSequence()) {
    for (const auto& c : n)
      if (!within_budget(c, left)) return false;
  } else if (n.IsMap()) {
    for (const auto& kv : n)
      if (!within_budget(kv.first, left) || !within_budget(kv.second, left)) return false;
  }
  return true;
}

/// The problem of a document reaching more than kMaxNodes nodes, or nothing.
std::optional<std::string> too_large(const YAML::Node& n, const std::string& what) {
  std::size_t left = kMaxNodes;
  if (within_budget(n, left)) return std::nullopt;
  return fmt::format(
      "{}: expands to more than {} YAML nodes through its aliases (anchors '&' used by '*' "
      "nested in one another); an experiment holds a few hundred",
      what, kMaxNodes);
}

void apply_override(ConfigDocument::State& st, const std::string& item) {
  const auto eq = item.find('=');
  if (eq == std::string::npos || eq == 0) {
    st.problems.push_back(fmt::format("--set '{}': expected key.path=value", item));
    return;
  }
  const std::string path = item.substr(0, eq), value = item.substr(eq + 1);
  if (value.find_first_not_of(" \t") == std::string::npos) {
    // YAML would read an empty value as null, which every key takes as "use the default".
    st.problems.push_back(
        fmt::format("--set {}=: empty value (give a value, or leave the --set out for the default)", path));
    return;
  }
  YAML::Node parsed;
  try {
    const std::vector<YAML::Node> docs = YAML::LoadAll(value);
    if (docs.size() > 1) {
      st.problems.push_back(
          fmt::format("--set {}: the value holds {} YAML documents ('---'); expected one value", path, docs.size()));
      return;
    }
    if (!docs.empty()) parsed = docs.front();
  } catch (const YAML::Exception& e) {
    st.problems.push_back(fmt::format("--set {}: value '{}' is not valid YAML: {}", path, value, e.msg));
    return;
  }
  if (const auto p = too_large(parsed, "--set " + path)) {
    st.problems.push_back(*p);
    return;
  }
  if (!st.root.IsDefined() || st.root.IsNull()) st.root = YAML::Node(YAML::NodeType::Map);
  YAML::Node n;
  n.reset(st.root);
  std::size_t start = 0;
  std::string done;
  while (true) {
    const auto dot = path.find('.', start);
    const std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (key.empty()) {
      st.problems.push_back(fmt::format("--set {}: empty key in the path", path));
      return;
    }
    if (!n.IsMap() && !n.IsNull()) {
      st.problems.push_back(fmt::format("--set {}: '{}' is not a mapping", path, done.empty() ? "(root)" : done));
      return;
    }
    done += (done.empty() ? "" : ".") + key;
    if (dot == std::string::npos) {
      n[key] = parsed;
      st.overridden.insert(path);
      return;
    }
    if (!n[key].IsDefined() || n[key].IsNull()) n[key] = YAML::Node(YAML::NodeType::Map);
    YAML::Node next = n[key];
    n.reset(next);
    start = dot + 1;
  }
}

/// Duplicate keys of every mapping in @p n (yaml-cpp keeps both and lookups see the first): one
/// problem per repeat, with both lines.
void find_duplicate_keys(const YAML::Node& n, const std::string& path, const std::string& file,
                         std::vector<std::string>& problems) {
  if (n.IsSequence()) {
    for (std::size_t i = 0; i < n.size(); ++i)
      find_duplicate_keys(n[i], fmt::format("{}[{}]", path, i), file, problems);
    return;
  }
  if (!n.IsMap()) return;
  std::map<std::string, YAML::Mark> seen;
  for (const auto& kv : n) {
    if (!kv.first.IsScalar()) continue;
    const std::string key = kv.first.Scalar();
    const std::string full = path.empty() ? key : path + "." + key;
    const YAML::Mark m = kv.first.Mark();
    const auto [it, fresh] = seen.emplace(key, m);
    if (!fresh)
      problems.push_back(fmt::format("{}:{}:{}: {}: duplicate key (first at line {}); each key may appear once", file,
                                     m.line + 1, m.column + 1, full, it->second.line + 1));
    find_duplicate_keys(kv.second, full, file, problems);
  }
}

std::shared_ptr<ConfigDocument::State> make_state(const std::string& name) {
  auto st = std::make_shared<ConfigDocument::State>();
  st->file = name;
  return st;
}

}  // namespace

ConfigDocument ConfigDocument::parse(const std::string& text, const std::string& name,
                                     const std::vector<std::string>& overrides) {
  auto st = make_state(name);
  try {
    const std::vector<YAML::Node> docs = YAML::LoadAll(text);
    if (docs.size() > 1)
      throw ConfigError(name, {fmt::format("{}:{}: a second YAML document ('---'); an experiment file holds one", name,
                                           docs[1].Mark().line + 1)});
    st->root = docs.empty() ? YAML::Node() : docs.front();
  } catch (const YAML::ParserException& e) {
    throw ConfigError(
        name, {fmt::format("{}:{}:{}: YAML syntax error: {}", name, e.mark.line + 1, e.mark.column + 1, e.msg)});
  }
  if (st->root.IsNull() || !st->root.IsDefined()) st->root = YAML::Node(YAML::NodeType::Map);
  if (const auto p = too_large(st->root, name)) throw ConfigError(name, {*p});
  if (!st->root.IsMap())
    throw ConfigError(name,
                      {fmt::format("{}: the document must be a mapping of sections, found {}", name, show(st->root))});
  find_duplicate_keys(st->root, "", name, st->problems);
  for (const auto& o : overrides) apply_override(*st, o);
  return ConfigDocument(st);
}

ConfigDocument ConfigDocument::load(const std::string& path, const std::vector<std::string>& overrides) {
  namespace fs = std::filesystem;
  std::error_code ec;
  // A FIFO or a device (/dev/zero) would block or be read forever.
  if (fs::exists(path, ec) && !fs::is_regular_file(path, ec))
    throw ConfigError(path, {fmt::format("experiment file '{}' is not a regular file ({}); expected a YAML file", path,
                                         fs::is_directory(path, ec) ? "a directory" : "a FIFO, socket or device")});
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path, {fmt::format("cannot open experiment file '{}': {}", path, std::strerror(errno))});
  const std::uintmax_t bytes = fs::file_size(path, ec);
  if (!ec && bytes > kMaxFileBytes)
    throw ConfigError(path, {fmt::format("experiment file '{}' has {} bytes; an experiment is a few kB (at most {})",
                                         path, bytes, kMaxFileBytes)});
  std::string text(kMaxFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > kMaxFileBytes)  // grew while read
    throw ConfigError(path, {fmt::format("experiment file '{}' has more than {} bytes", path, kMaxFileBytes)});
  return parse(text, path, overrides);
}

ConfigNode ConfigDocument::root() {
  return ConfigNode(m_state->root, "", m_state);
}
void ConfigDocument::problem(const std::string& message) {
  m_state->problems.push_back(m_state->file + ": " + message);
}
bool ConfigDocument::ok() const {
  return m_state->problems.empty();
}
const std::string& ConfigDocument::file() const {
  return m_state->file;
}
YAML::Node ConfigDocument::yaml() const {
  return m_state->root;
}

void ConfigDocument::finish() const {
  if (!m_state->problems.empty()) throw ConfigError(m_state->file, m_state->problems);
}

ConfigNode::ConfigNode(YAML::Node node, std::string path, std::shared_ptr<ConfigDocument::State> state)
    : m_node(std::move(node)), m_path(std::move(path)), m_state(std::move(state)) {}

std::string ConfigNode::where(const YAML::Node& n) const {
  const auto m = n.Mark();
  // No position: a section the file does not have (empty file, or created by a --set, whose own
  // keys are labelled "(--set)" by problem()).
  if (m.is_null()) return m_state->file;
  return fmt::format("{}:{}:{}", m_state->file, m.line + 1, m.column + 1);
}

bool ConfigNode::has(const std::string& key) const {
  return m_node.IsMap() && m_node[key].IsDefined();
}

std::optional<YAML::Node> ConfigNode::lookup(const std::string& key) {
  m_known.insert(key);
  if (!m_node.IsMap()) return std::nullopt;
  YAML::Node v = m_node[key];
  if (!v.IsDefined() || v.IsNull()) return std::nullopt;
  return v;
}

void ConfigNode::problem(const std::string& key, const std::string& message) {
  if (!key.empty() && m_state->overridden.count(key_path(key))) {
    m_state->problems.push_back(fmt::format("{} (--set): {}: {}", m_state->file, key_path(key), message));
  } else if (!key.empty() && m_node.IsMap() && m_node[key].IsDefined()) {
    m_state->problems.push_back(fmt::format("{}: {}: {}", where(m_node[key]), key_path(key), message));
  } else {
    m_state->problems.push_back(fmt::format(
        "{}: {}: {}", where(m_node), key.empty() ? (m_path.empty() ? "(root)" : m_path) : key_path(key), message));
  }
}

void ConfigNode::accept(const std::string& key) {
  m_known.insert(key);
}

ConfigNode ConfigNode::section(const std::string& key) {
  auto v = lookup(key);
  if (!v) return ConfigNode(YAML::Node(YAML::NodeType::Map), key_path(key), m_state);
  if (!v->IsMap()) {
    problem(key, fmt::format("expected a mapping of keys, got {}", show(*v)));
    return ConfigNode(YAML::Node(YAML::NodeType::Map), key_path(key), m_state);
  }
  return ConfigNode(*v, key_path(key), m_state);
}

std::vector<ConfigNode> ConfigNode::sections(const std::string& key) {
  std::vector<ConfigNode> out;
  auto v = lookup(key);
  if (!v) return out;
  if (!v->IsSequence()) {
    problem(key, fmt::format("expected a list of mappings, got {}", show(*v)));
    return out;
  }
  for (std::size_t i = 0; i < v->size(); ++i) {
    const std::string p = fmt::format("{}[{}]", key_path(key), i);
    if (!(*v)[i].IsMap()) {
      m_state->problems.push_back(fmt::format("{}: {}: expected a mapping, got {}", where((*v)[i]), p, show((*v)[i])));
      continue;
    }
    out.emplace_back((*v)[i], p, m_state);
  }
  return out;
}

std::int64_t ConfigNode::get_int(const std::string& key, std::int64_t fallback, std::int64_t min, std::int64_t max) {
  auto v = lookup(key);
  if (!v) return fallback;
  const auto x = v->IsScalar() ? parse_number<std::int64_t>(v->Scalar()) : std::nullopt;
  if (!x) {
    problem(key, fmt::format("expected an integer, got {}", show(*v)));
    return fallback;
  }
  if (*x < min || *x > max) {
    problem(key, fmt::format("value {} is out of range: expected an integer {}", *x, int_range(min, max)));
    return fallback;
  }
  return *x;
}

double ConfigNode::get_real(const std::string& key, double fallback, double min, double max, bool min_exclusive) {
  auto v = lookup(key);
  if (!v) return fallback;
  const auto x = v->IsScalar() ? parse_number<double>(v->Scalar()) : std::nullopt;
  if (!x) {
    problem(key, fmt::format("expected a finite number, got {}", show(*v)));
    return fallback;
  }
  const bool below = min_exclusive ? *x <= min : *x < min;
  if (below || *x > max) {
    problem(key, fmt::format("value {} is out of range: expected a number {}", v->Scalar(),
                             real_range(min, max, min_exclusive)));
    return fallback;
  }
  return *x;
}

std::optional<double> ConfigNode::get_real_or(const std::string& key, const std::string& keyword,
                                              const std::string& what, double min, double max, bool min_exclusive,
                                              const std::string& means) {
  auto v = lookup(key);
  if (!v || (v->IsScalar() && v->Scalar() == keyword)) return std::nullopt;
  const auto x = v->IsScalar() ? parse_number<double>(v->Scalar()) : std::nullopt;
  if (x && !(min_exclusive ? *x <= min : *x < min) && *x <= max) return x;
  problem(key, fmt::format("{}: expected {} {}, or '{}'{}", show(*v), what, real_range(min, max, min_exclusive),
                           keyword, means.empty() ? "" : " (" + means + ")"));
  return std::nullopt;
}

std::optional<std::int64_t> ConfigNode::get_int_or(const std::string& key, const std::string& keyword,
                                                   const std::string& what, std::int64_t min, std::int64_t max,
                                                   const std::string& means) {
  auto v = lookup(key);
  if (!v || (v->IsScalar() && v->Scalar() == keyword)) return std::nullopt;
  const auto x = v->IsScalar() ? parse_number<std::int64_t>(v->Scalar()) : std::nullopt;
  if (x && *x >= min && *x <= max) return x;
  problem(key, fmt::format("{}: expected {} {}, or '{}'{}", show(*v), what, int_range(min, max), keyword,
                           means.empty() ? "" : " (" + means + ")"));
  return std::nullopt;
}

bool ConfigNode::get_bool(const std::string& key, bool fallback) {
  auto v = lookup(key);
  if (!v) return fallback;
  bool b = fallback;
  if (!v->IsScalar() || !YAML::convert<bool>::decode(*v, b)) {
    problem(key, fmt::format("expected true or false, got {}", show(*v)));
    return fallback;
  }
  return b;
}

std::string ConfigNode::get_string(const std::string& key, const std::string& fallback) {
  auto v = lookup(key);
  if (!v) return fallback;
  if (!v->IsScalar()) {
    problem(key, fmt::format("expected a string, got {}", show(*v)));
    return fallback;
  }
  return v->Scalar();
}

std::string ConfigNode::get_choice(const std::string& key, const std::string& fallback,
                                   const std::vector<std::string>& allowed) {
  const std::string s = get_string(key, fallback);
  for (const auto& a : allowed)
    if (a == s) return s;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  problem(key, fmt::format("value '{}' is not allowed: expected one of {}", s, list));
  return fallback;
}

std::vector<std::string> ConfigNode::get_strings(const std::string& key, const std::vector<std::string>& fallback) {
  auto v = lookup(key);
  if (!v) return fallback;
  if (v->IsScalar()) return {v->Scalar()};
  std::vector<std::string> out;
  if (!v->IsSequence()) {
    problem(key, fmt::format("expected a string or a list of strings, got {}", show(*v)));
    return fallback;
  }
  for (std::size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].IsScalar()) {
      problem(key, fmt::format("item {} must be a string, got {}", i, show((*v)[i])));
      return fallback;
    }
    out.push_back((*v)[i].Scalar());
  }
  return out;
}

std::vector<double> ConfigNode::get_reals(const std::string& key, const std::vector<double>& fallback,
                                          std::size_t count) {
  auto v = lookup(key);
  if (!v) return fallback;
  if (!v->IsSequence() || (count > 0 && v->size() != count)) {
    problem(key, count ? fmt::format("expected a list of {} numbers, got {}", count, show(*v))
                       : fmt::format("expected a list of numbers, got {}", show(*v)));
    return fallback;
  }
  std::vector<double> out;
  for (std::size_t i = 0; i < v->size(); ++i) {
    const YAML::Node item = (*v)[i];
    const std::string s = item.IsScalar() ? item.Scalar() : "";
    char* end = nullptr;
    const double x = s.empty() ? 0.0 : std::strtod(s.c_str(), &end);
    if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(x)) {
      problem(key, fmt::format("item {} must be a finite number, got {}", i, show(item)));
      return fallback;
    }
    out.push_back(x);
  }
  return out;
}

std::vector<std::string> ConfigNode::keys() const {
  std::vector<std::string> k;
  if (!m_node.IsMap()) return k;
  for (const auto& kv : m_node) k.push_back(kv.first.Scalar());
  return k;
}

void ConfigNode::reject_unknown() {
  if (!m_node.IsMap()) return;
  for (const auto& kv : m_node) {
    const std::string k = kv.first.Scalar();
    if (m_known.count(k)) continue;
    std::string known;
    for (const auto& a : m_known) known += (known.empty() ? "" : ", ") + a;
    const std::string at = m_state->overridden.count(key_path(k)) ? m_state->file + " (--set)" : where(kv.first);
    m_state->problems.push_back(
        fmt::format("{}: {}: unknown key{}", at, key_path(k), known.empty() ? "" : " (known here: " + known + ")"));
  }
}

}  // namespace mpigan
