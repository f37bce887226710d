// Strict configuration reading (style: lbann's proto factories, yaml-cpp marks): parse, validate,
// freeze. A ConfigNode is a view of one YAML mapping with its key path; getters return typed
// values with defaults and record a problem (never throw) for a wrong type, an out-of-range value
// or an unknown key, with file:line:column, the key path, the value and what is allowed. All
// problems of a document are reported together by ConfigDocument::finish(), as one ConfigError.
//
//   ConfigDocument doc = ConfigDocument::load("exp.yaml", {"training.batch=32"});
//   ConfigNode t = doc.root().section("training");
//   int64_t batch = t.get_int("batch", 16, 1, 1 << 20);
//   t.reject_unknown();
//   doc.finish();  // throws ConfigError listing every problem
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace mpigan {

class ConfigNode;

class ConfigDocument {
 public:
  /// Parse @p path (a YAML syntax error is a ConfigError with its line), then apply the overrides
  /// "key.path=value" (value parsed as YAML; creates missing maps).
  static ConfigDocument load(const std::string& path, const std::vector<std::string>& overrides = {});
  static ConfigDocument parse(const std::string& text, const std::string& name,
                              const std::vector<std::string>& overrides = {});

  ConfigNode root();
  /// Record a problem not tied to one key (cross-field invariants), e.g. at a section.
  void problem(const std::string& message);
  bool ok() const;
  /// Throws ConfigError with every recorded problem, if any.
  void finish() const;
  const std::string& file() const;
  /// The document (with overrides applied), for printing the resolved configuration.
  YAML::Node yaml() const;

  struct State;

 private:
  explicit ConfigDocument(std::shared_ptr<State> s) : m_state(std::move(s)) {}
  std::shared_ptr<State> m_state;
};

class ConfigNode {
 public:
  ConfigNode(YAML::Node node, std::string path, std::shared_ptr<ConfigDocument::State> state);

  const std::string& path() const { return m_path; }
  bool has(const std::string& key) const;
  /// A child mapping (an empty one if absent); a non-mapping value is a problem.
  ConfigNode section(const std::string& key);
  /// A list of mappings (e.g. search-space dimensions).
  std::vector<ConfigNode> sections(const std::string& key);

  std::int64_t get_int(const std::string& key, std::int64_t fallback,
                       std::int64_t min = std::numeric_limits<std::int64_t>::min(),
                       std::int64_t max = std::numeric_limits<std::int64_t>::max());
  /// Real in [min, max] (or (min, max] with @p min_exclusive).
  double get_real(const std::string& key, double fallback, double min = -std::numeric_limits<double>::infinity(),
                  double max = std::numeric_limits<double>::infinity(), bool min_exclusive = false);
  bool get_bool(const std::string& key, bool fallback);
  std::string get_string(const std::string& key, const std::string& fallback);
  std::string get_choice(const std::string& key, const std::string& fallback, const std::vector<std::string>& allowed);
  /// A number, or a keyword standing for a value the caller works out ('auto', 'workers'): nullopt
  /// when the key is absent or holds @p keyword. Anything else is a problem naming both, e.g.
  /// "'x': expected a learning rate in (0, 100], or 'auto' (1e-3 / (N + 4))", @p what being the
  /// noun ("a learning rate") and @p means what the keyword stands for (may be empty).
  std::optional<double> get_real_or(const std::string& key, const std::string& keyword, const std::string& what,
                                    double min, double max, bool min_exclusive = false, const std::string& means = "");
  std::optional<std::int64_t> get_int_or(const std::string& key, const std::string& keyword, const std::string& what,
                                         std::int64_t min, std::int64_t max, const std::string& means = "");
  /// A string or a list of strings.
  std::vector<std::string> get_strings(const std::string& key, const std::vector<std::string>& fallback);
  /// A list of exactly @p count reals (count 0: any length).
  std::vector<double> get_reals(const std::string& key, const std::vector<double>& fallback, std::size_t count = 0);

  /// Record a problem at @p key (its line) or at this section when @p key is empty.
  void problem(const std::string& key, const std::string& message);
  /// Mark @p key as known without reading it (read by someone else, e.g. a plugin).
  void accept(const std::string& key);
  /// Record every key of this mapping that no getter asked for ("unknown key ... ; known: ...").
  void reject_unknown();
  /// The keys present in this mapping.
  std::vector<std::string> keys() const;

 private:
  std::optional<YAML::Node> lookup(const std::string& key);
  std::string where(const YAML::Node& n) const;
  std::string key_path(const std::string& key) const { return m_path.empty() ? key : m_path + "." + key; }

  YAML::Node m_node;
  std::string m_path;
  std::shared_ptr<ConfigDocument::State> m_state;
  std::set<std::string> m_known;
};

}  // namespace mpigan
