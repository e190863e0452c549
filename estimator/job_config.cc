// estimator/job_config.cc
#include "estimator/job_config.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>
#include <thread>
#include <utility>
#include <variant>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "estimator/feature_config.h"
#include "estimator/internal/data_config.h"
#include "estimator/internal/did_you_mean.h"
#include "estimator/internal/distribute_config.h"
#include "estimator/internal/export_config.h"
#include "estimator/internal/job_keys.h"
#include "estimator/internal/partition_config.h"
#include "estimator/internal/security_config.h"
#include "estimator/internal/toml_limits.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "toml++/toml.h"

namespace tandem {
namespace {

using internal::Field;
using internal::kMaxBatchSize;
using internal::kNoMax;
using internal::kNoMin;
using internal::Section;
using internal::Sections;

using internal::DidYouMean;

const char* TypeName(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table:
      return "table";
    case toml::node_type::array:
      return "array";
    case toml::node_type::string:
      return "string";
    case toml::node_type::integer:
      return "integer";
    case toml::node_type::floating_point:
      return "float";
    case toml::node_type::boolean:
      return "boolean";
    default:
      return "date/time";
  }
}

// Decodes a merged TOML document into a JobConfig, naming where each bad value came from.
class Decoder {
 public:
  Decoder(std::string source_name, std::map<std::string, std::string> origins)
      : source_name_(std::move(source_name)), origins_(std::move(origins)) {}

  // Where the value at dotted `path` came from: an override, TF_CONFIG, or file:line:col.
  std::string Where(const std::string& path, const toml::source_region& src) const {
    for (std::string p = path;;) {
      if (auto it = origins_.find(p); it != origins_.end()) return it->second;
      size_t dot = p.rfind('.');
      if (dot == std::string::npos) break;
      p.resize(dot);
    }
    if (src.begin.line == 0) {
      // A table that only an override or TF_CONFIG created: name the first one.
      auto it = origins_.lower_bound(path + ".");
      if (it != origins_.end() && absl::StartsWith(it->first, path + ".")) return it->second;
      return source_name_;
    }
    return absl::StrCat(source_name_, ":", src.begin.line, ":", src.begin.column);
  }

  absl::Status Error(const std::string& path, const toml::source_region& src,
                     absl::string_view message) const {
    return absl::InvalidArgumentError(absl::StrCat(Where(path, src), ": ", message));
  }

  absl::Status Decode(const toml::table& root, JobConfig& c) const {
    std::vector<Section> sections = Sections(c);
    std::vector<std::string> names = {"cluster", "task", "features"};
    for (const Section& s : sections) names.push_back(s.name);
    for (auto&& [key, node] : root) {
      const std::string name(key.str());
      if (std::find(names.begin(), names.end(), name) == names.end()) {
        return Error(name, key.source(),
                     absl::StrCat("unknown section [", name, "]", DidYouMean(name, names),
                                  "; known sections: [", absl::StrJoin(names, "], ["), "]"));
      }
      if (!node.is_table()) {
        return Error(name, node.source(),
                     absl::StrCat("[", name, "] must be a table, got ", TypeName(node)));
      }
      const toml::table& table = *node.as_table();
      if (name == "features") {
        TANDEM_RETURN_IF_ERROR(DecodeFeatures(table, c.features));
      } else if (name == "cluster") {
        TANDEM_RETURN_IF_ERROR(DecodeCluster(table, c.cluster));
      } else if (name == "task") {
        TANDEM_RETURN_IF_ERROR(DecodeTask(table, c.task));
      } else {
        const Section& s = *std::find_if(sections.begin(), sections.end(),
                                         [&](const Section& x) { return x.name == name; });
        TANDEM_RETURN_IF_ERROR(DecodeSection(s, table, c));
      }
    }
    return absl::OkStatus();
  }

  // Only [cluster] and [task] of `root`; other sections are ignored.
  absl::Status DecodeClusterAndTask(const toml::table& root, ClusterSpec& cluster,
                                    TaskSection& task) const {
    for (const char* name : {"cluster", "task"}) {
      const toml::node* node = root.get(name);
      if (node == nullptr) continue;
      if (!node->is_table()) {
        return Error(name, node->source(),
                     absl::StrCat("[", name, "] must be a table, got ", TypeName(*node)));
      }
      TANDEM_RETURN_IF_ERROR(std::string(name) == "cluster"
                                 ? DecodeCluster(*node->as_table(), cluster)
                                 : DecodeTask(*node->as_table(), task));
    }
    return absl::OkStatus();
  }

 private:
  absl::Status DecodeSection(const Section& s, const toml::table& table, JobConfig& c) const {
    for (auto&& [key, node] : table) {
      const std::string k(key.str());
      const std::string path = absl::StrCat(s.name, ".", k);
      if (std::string(s.name) == "model" && k == "params") {
        if (!node.is_table()) {
          return Error(path, node.source(),
                       absl::StrCat("[model] params must be a table, got ", TypeName(node)));
        }
        for (auto&& [pkey, pnode] : *node.as_table()) {
          const std::string pname(pkey.str());
          TANDEM_ASSIGN_OR_RETURN(
              c.model.params[pname],
              DecodeParam(absl::StrCat(path, ".", pname), "[model.params] " + pname, pnode));
        }
        continue;
      }
      auto f = std::find_if(s.fields.begin(), s.fields.end(),
                            [&](const Field& x) { return k == x.key; });
      if (f == s.fields.end()) {
        std::vector<std::string> known;
        for (const Field& x : s.fields) known.push_back(x.key);
        if (std::string(s.name) == "model") known.push_back("params");
        return Error(path, key.source(),
                     absl::StrCat("[", s.name, "] unknown key '", k, "'", DidYouMean(k, known),
                                  "; known keys: ", absl::StrJoin(known, ", ")));
      }
      TANDEM_RETURN_IF_ERROR(DecodeField(s.name, *f, path, node));
    }
    return absl::OkStatus();
  }

  absl::Status DecodeField(const char* section, const Field& f, const std::string& path,
                           const toml::node& node) const {
    auto wrong_type = [&](absl::string_view want) {
      return Error(
          path, node.source(),
          absl::StrCat("[", section, "] ", f.key, " must be ", want, ", got ", TypeName(node)));
    };
    auto check_min = [&](int64_t v) -> absl::Status {
      if (v < f.min) {
        return Error(path, node.source(),
                     absl::StrCat("[", section, "] ", f.key, " must be >= ", f.min, ", got ", v));
      }
      if (v > f.max) {
        return Error(path, node.source(),
                     absl::StrCat("[", section, "] ", f.key, " must be <= ", f.max, ", got ", v));
      }
      return absl::OkStatus();
    };
    if (auto* p = std::get_if<int64_t*>(&f.target)) {
      if (!node.is_integer()) return wrong_type("an integer");
      **p = node.as_integer()->get();
      return check_min(**p);
    }
    if (auto* p = std::get_if<std::optional<int64_t>*>(&f.target)) {
      if (!node.is_integer()) return wrong_type("an integer");
      **p = node.as_integer()->get();
      return check_min(***p);
    }
    if (auto* p = std::get_if<double*>(&f.target)) {
      if (node.is_integer()) {
        **p = static_cast<double>(node.as_integer()->get());
      } else if (node.is_floating_point()) {
        **p = node.as_floating_point()->get();
      } else {
        return wrong_type("a number");
      }
      if (!(**p > 0) || **p == std::numeric_limits<double>::infinity()) {
        return Error(path, node.source(),
                     absl::StrCat("[", section, "] ", f.key, " must be a finite number > 0"));
      }
      return absl::OkStatus();
    }
    if (auto* p = std::get_if<bool*>(&f.target)) {
      if (!node.is_boolean()) return wrong_type("a boolean (true or false)");
      **p = node.as_boolean()->get();
      return absl::OkStatus();
    }
    if (auto* p = std::get_if<std::vector<std::string>*>(&f.target)) {
      if (!node.is_array()) return wrong_type("an array of strings");
      (*p)->clear();
      for (const toml::node& item : *node.as_array()) {
        if (!item.is_string()) {
          return Error(
              path, item.source(),
              absl::StrCat("[", section, "] ", f.key, " must hold strings, got ", TypeName(item)));
        }
        (*p)->push_back(item.as_string()->get());
      }
      return absl::OkStatus();
    }
    if (auto* p = std::get_if<std::vector<ParamValue>*>(&f.target)) {
      if (!node.is_array()) return wrong_type("an array");
      const std::string what = absl::StrCat("[", section, "] ", f.key, " entry");
      (*p)->clear();
      for (const toml::node& item : *node.as_array()) {
        TANDEM_ASSIGN_OR_RETURN(ParamValue v, DecodeParam(path, what, item));
        (*p)->push_back(std::move(v));
      }
      return absl::OkStatus();
    }
    if (auto* p = std::get_if<std::map<std::string, std::string>*>(&f.target)) {
      if (!node.is_table()) return wrong_type("a table of strings");
      for (auto&& [key, value] : *node.as_table()) {
        if (!value.is_string()) {
          return Error(path, value.source(),
                       absl::StrCat("[", section, "] ", f.key, ".", std::string(key.str()),
                                    " must be a string, got ", TypeName(value)));
        }
        (**p)[std::string(key.str())] = value.as_string()->get();
      }
      return absl::OkStatus();
    }
    std::string* p = std::get<std::string*>(f.target);
    if (!node.is_string()) return wrong_type("a string");
    *p = node.as_string()->get();
    if (!f.choices.empty() && std::find_if(f.choices.begin(), f.choices.end(), [&](const char* c) {
                                return *p == c;
                              }) == f.choices.end()) {
      return Error(path, node.source(),
                   absl::StrCat("[", section, "] ", f.key, " must be one of \"",
                                absl::StrJoin(f.choices, "\", \""), "\", got \"", *p, "\""));
    }
    return absl::OkStatus();
  }

  // A free-form value at dotted `path`; `what` names it in errors ("[model.params] lr").
  absl::StatusOr<ParamValue> DecodeParam(const std::string& path, const std::string& what,
                                         const toml::node& node) const {
    if (node.is_boolean()) return ParamValue::Bool(node.as_boolean()->get());
    if (node.is_integer()) return ParamValue::Int(node.as_integer()->get());
    if (node.is_floating_point()) return ParamValue::Double(node.as_floating_point()->get());
    if (node.is_string()) return ParamValue::String(node.as_string()->get());
    if (node.is_array()) {
      std::vector<ParamValue> items;
      for (const toml::node& item : *node.as_array()) {
        TANDEM_ASSIGN_OR_RETURN(ParamValue v, DecodeParam(path, what, item));
        items.push_back(std::move(v));
      }
      return ParamValue::Array(std::move(items));
    }
    return Error(
        path, node.source(),
        absl::StrCat(what, " must be a number, string, boolean or array, got ", TypeName(node)));
  }

  // [features.<name>] tables: each key kept as written, with where it came from.
  absl::Status DecodeFeatures(const toml::table& table,
                              std::map<std::string, FeatureTable>& features) const {
    for (auto&& [key, node] : table) {
      const std::string name(key.str());
      const std::string path = absl::StrCat("features.", name);
      if (!node.is_table()) {
        return Error(path, node.source(),
                     absl::StrCat("[features] ", name, " must be a table (a feature column: ", name,
                                  " = { type = \"numeric\" }), got ", TypeName(node)));
      }
      FeatureTable& f = features[name];
      f.where["" /* the table */] = Where(path, node.source());
      for (auto&& [fkey, fnode] : *node.as_table()) {
        const std::string k(fkey.str());
        const std::string fpath = absl::StrCat(path, ".", k);
        TANDEM_ASSIGN_OR_RETURN(
            f.keys[k], DecodeParam(fpath, absl::StrCat("[features.", name, "] ", k), fnode));
        f.where[k] = Where(fpath, fnode.source());
      }
    }
    return absl::OkStatus();
  }

  absl::Status DecodeCluster(const toml::table& table, ClusterSpec& cluster) const {
    for (auto&& [key, node] : table) {
      const std::string job(key.str());
      const std::string path = absl::StrCat("cluster.", job);
      absl::Status s;
      if (node.is_array()) {
        std::vector<std::string> addresses;
        for (const toml::node& item : *node.as_array()) {
          if (!item.is_string()) {
            return Error(path, item.source(),
                         absl::StrCat("[cluster] ", job, " addresses must be strings, got ",
                                      TypeName(item)));
          }
          addresses.push_back(item.as_string()->get());
        }
        s = cluster.AddJob(job, addresses);
      } else if (node.is_table()) {
        if (node.as_table()->empty()) s = cluster.AddJob(job, {});
        for (auto&& [id, address] : *node.as_table()) {
          int index = -1;
          if (!absl::SimpleAtoi(std::string(id.str()), &index) || index < 0) {
            return Error(path, id.source(),
                         absl::StrCat("[cluster] ", job, ": task id '", std::string(id.str()),
                                      "' must be a non-negative integer"));
          }
          if (!address.is_string()) {
            return Error(path, address.source(),
                         absl::StrCat("[cluster] ", job, ".", index,
                                      " must be a \"host:port\" string, got ", TypeName(address)));
          }
          s = cluster.AddTask(job, index, address.as_string()->get());
          if (!s.ok()) break;
        }
      } else {
        return Error(path, node.source(),
                     absl::StrCat("[cluster] ", job,
                                  " must be an array of \"host:port\" "
                                  "strings or a table from task id to address, got ",
                                  TypeName(node)));
      }
      if (!s.ok()) return Error(path, node.source(), absl::StrCat("[cluster] ", s.message()));
    }
    return absl::OkStatus();
  }

  absl::Status DecodeTask(const toml::table& table, TaskSection& task) const {
    for (auto&& [key, node] : table) {
      const std::string k(key.str());
      const std::string path = absl::StrCat("task.", k);
      if (k == "type") {
        if (!node.is_string()) {
          return Error(path, node.source(),
                       absl::StrCat("[task] type must be a string, got ", TypeName(node)));
        }
        task.type = node.as_string()->get();
      } else if (k == "index") {
        if (!node.is_integer() || node.as_integer()->get() < 0 ||
            node.as_integer()->get() > std::numeric_limits<int>::max()) {
          return Error(path, node.source(), "[task] index must be a non-negative integer");
        }
        task.index = node.as_integer()->get();
      } else {
        return Error(path, key.source(),
                     absl::StrCat("[task] unknown key '", k, "'", DidYouMean(k, {"type", "index"}),
                                  "; known keys: type, index"));
      }
    }
    return absl::OkStatus();
  }

  std::string source_name_;
  std::map<std::string, std::string> origins_;  // dotted path -> "--set ..." / "TF_CONFIG"
};

toml::table ClusterToToml(const ClusterSpec& cluster) {
  toml::table out;
  for (const auto& [job, tasks] : cluster.job_tasks()) {
    bool dense = tasks.empty() || tasks.rbegin()->first == static_cast<int>(tasks.size()) - 1;
    if (dense && !tasks.empty()) {
      toml::array addresses;
      for (const auto& [index, address] : tasks) addresses.push_back(address);
      out.insert_or_assign(job, std::move(addresses));
    } else {
      toml::table sparse;
      for (const auto& [index, address] : tasks) {
        sparse.insert_or_assign(absl::StrCat(index), address);
      }
      out.insert_or_assign(job, std::move(sparse));
    }
  }
  return out;
}

// Sets root[a][b]...[last] = value, creating tables on the way.
absl::Status SetPath(toml::table& root, const std::vector<std::string>& path, toml::node&& value,
                     absl::string_view origin) {
  toml::table* table = &root;
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    toml::node* next = table->get(path[i]);
    if (next == nullptr) {
      table->insert_or_assign(path[i], toml::table());
      next = table->get(path[i]);
    }
    if (!next->is_table()) {
      return absl::InvalidArgumentError(
          absl::StrCat(origin, ": '", absl::StrJoin(path.begin(), path.begin() + i + 1, "."),
                       "' is a ", TypeName(*next), ", not a table"));
    }
    table = next->as_table();
  }
  table->insert_or_assign(path.back(), std::move(value));
  return absl::OkStatus();
}

absl::Status ApplyOverride(toml::table& root, const std::string& arg,
                           std::map<std::string, std::string>& origins) {
  const std::string origin = absl::StrCat("--set ", arg);
  size_t eq = arg.find('=');
  std::vector<std::string> path;
  if (eq != std::string::npos) path = absl::StrSplit(arg.substr(0, eq), '.');
  if (path.size() > internal::kMaxTomlKeySegments) {
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": the key has more than ", internal::kMaxTomlKeySegments, " dotted segments"));
  }
  bool ok = eq != std::string::npos && path.size() >= 2;
  for (std::string& p : path) {
    p = std::string(absl::StripAsciiWhitespace(p));
    if (p.empty()) ok = false;
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": expected section.key=value, e.g. --set train.max_steps=1000"));
  }
  const std::string text(absl::StripAsciiWhitespace(arg.substr(eq + 1)));
  const std::string document = absl::StrCat("v = ", text);
  const std::string name = "--set";
  TANDEM_RETURN_IF_ERROR(AnnotateStatus(internal::CheckTomlKeyDepth(document, name), origin));
  try {
    toml::table parsed = toml::parse(document, name);
    toml::node* v = parsed.get("v");
    if (v == nullptr || parsed.size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(origin, ": expected a single value"));
    }
    TANDEM_RETURN_IF_ERROR(SetPath(root, path, std::move(*v), origin));
  } catch (const toml::parse_error& e) {
    // A bare word ("--set run.model_dir=/tmp/m") is a string; something that looks like
    // TOML but does not parse is an error.
    if (text.empty() || absl::StrContains("[{\"'", text.front())) {
      return absl::InvalidArgumentError(
          absl::StrCat(origin, ": malformed TOML value: ", std::string(e.description())));
    }
    TANDEM_RETURN_IF_ERROR(SetPath(root, path, toml::value<std::string>(text), origin));
  }
  origins[absl::StrJoin(path, ".")] = origin;
  return absl::OkStatus();
}

}  // namespace

namespace {

toml::array ParamArrayToToml(const std::vector<ParamValue>& items);

void InsertParam(toml::table& table, const std::string& key, const ParamValue& v) {
  switch (v.type) {
    case ParamValue::Type::kBool:
      table.insert_or_assign(key, v.bool_value);
      break;
    case ParamValue::Type::kInt:
      table.insert_or_assign(key, v.int_value);
      break;
    case ParamValue::Type::kDouble:
      table.insert_or_assign(key, v.double_value);
      break;
    case ParamValue::Type::kString:
      table.insert_or_assign(key, v.string_value);
      break;
    case ParamValue::Type::kArray:
      table.insert_or_assign(key, ParamArrayToToml(v.array));
      break;
  }
}

toml::array ParamArrayToToml(const std::vector<ParamValue>& items) {
  toml::array out;
  for (const ParamValue& v : items) {
    switch (v.type) {
      case ParamValue::Type::kBool:
        out.push_back(v.bool_value);
        break;
      case ParamValue::Type::kInt:
        out.push_back(v.int_value);
        break;
      case ParamValue::Type::kDouble:
        out.push_back(v.double_value);
        break;
      case ParamValue::Type::kString:
        out.push_back(v.string_value);
        break;
      case ParamValue::Type::kArray:
        out.push_back(ParamArrayToToml(v.array));
        break;
    }
  }
  return out;
}

// TOML text as a table; a syntax error is INVALID_ARGUMENT "name:line:col: ...".
absl::StatusOr<toml::table> ParseTomlDocument(absl::string_view toml_text,
                                              const std::string& name) {
  TANDEM_RETURN_IF_ERROR(internal::CheckTomlKeyDepth(toml_text, name));
  const std::string text(toml_text);
  try {
    return toml::parse(text, name);
  } catch (const toml::parse_error& e) {
    return absl::InvalidArgumentError(absl::StrCat(name, ":", e.source().begin.line, ":",
                                                   e.source().begin.column, ": ",
                                                   std::string(e.description())));
  }
}

}  // namespace

absl::Status ParseClusterToml(absl::string_view toml_text, absl::string_view source_name,
                              ClusterSpec* cluster, TaskSection* task) {
  const std::string name(source_name.empty() ? "<cluster>" : source_name);
  TANDEM_ASSIGN_OR_RETURN(toml::table root, ParseTomlDocument(toml_text, name));
  return Decoder(name, {}).DecodeClusterAndTask(root, *cluster, *task);
}

absl::StatusOr<JobConfig> JobConfig::Parse(absl::string_view toml_text,
                                           absl::string_view source_name,
                                           absl::Span<const std::string> overrides,
                                           absl::string_view tf_config_json) {
  const std::string name(source_name.empty() ? "<config>" : source_name);
  TANDEM_ASSIGN_OR_RETURN(toml::table root, ParseTomlDocument(toml_text, name));

  // TF_CONFIG beats the file.
  std::map<std::string, std::string> origins;
  TANDEM_ASSIGN_OR_RETURN(TfConfig tf_config, ParseTfConfig(tf_config_json));
  if (!tf_config.cluster.empty()) {
    root.insert_or_assign("cluster", ClusterToToml(tf_config.cluster));
    origins["cluster"] = "TF_CONFIG cluster";
  }
  if (!tf_config.task_type.empty() || tf_config.task_index) {
    toml::table task;
    if (!tf_config.task_type.empty()) task.insert_or_assign("type", tf_config.task_type);
    if (tf_config.task_index) task.insert_or_assign("index", int64_t{*tf_config.task_index});
    root.insert_or_assign("task", std::move(task));
    origins["task"] = "TF_CONFIG task";
  }
  if (tf_config.model_dir) {
    TANDEM_RETURN_IF_ERROR(SetPath(root, {"run", "model_dir"},
                                   toml::value<std::string>(*tf_config.model_dir), "TF_CONFIG"));
    origins["run.model_dir"] = "TF_CONFIG model_dir";
  }
  // --set beats everything.
  for (const std::string& arg : overrides) {
    TANDEM_RETURN_IF_ERROR(ApplyOverride(root, arg, origins));
  }

  JobConfig c;
  Decoder decoder(name, origins);
  TANDEM_RETURN_IF_ERROR(decoder.Decode(root, c));

  auto where = [&](const std::string& path) {
    const toml::node* node = root.at_path(path).node();
    return decoder.Where(path, node == nullptr ? toml::source_region{} : node->source());
  };
  if (c.model.name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where("model"), ": [model] name is required (a registered model name)"));
  }
  if (c.run.save_checkpoints_steps && c.run.save_checkpoints_secs) {
    return absl::InvalidArgumentError(absl::StrCat(where("run.save_checkpoints_secs"),
                                                   ": [run] save_checkpoints_steps and "
                                                   "save_checkpoints_secs cannot both be set (",
                                                   where("run.save_checkpoints_steps"),
                                                   " sets save_checkpoints_steps)"));
  }

  RunConfigOptions options;
  options.model_dir = c.run.model_dir;
  options.tf_random_seed = c.run.random_seed;
  options.save_summary_steps = c.run.save_summary_steps;
  options.save_checkpoints_steps = c.run.save_checkpoints_steps;
  options.save_checkpoints_secs = c.run.save_checkpoints_secs;
  options.keep_checkpoint_max = static_cast<int>(
      std::min<int64_t>(c.run.keep_checkpoint_max, std::numeric_limits<int>::max()));
  options.keep_checkpoint_every_n_hours = c.run.keep_checkpoint_every_n_hours;
  options.log_step_count_steps = c.run.log_step_count_steps;
  options.trace_every_steps = c.run.trace_every_steps;
  options.operation_timeout_secs = c.run.operation_timeout_secs;
  options.num_gpus = static_cast<int>(c.run.num_gpus);
  options.gpu_memory_fraction = c.run.gpu_memory_fraction;
  absl::StatusOr<Precision> precision = ParsePrecision(c.run.precision);
  if (!precision.ok()) return AnnotateStatus(precision.status(), "[run] precision");
  options.precision = *precision;
  if (c.run.inter_op_threads > 0 || c.run.intra_op_threads > 0) {
    SessionConfig session;
    auto clamp = [](int64_t n) { return static_cast<int>(std::min<int64_t>(n, 1 << 16)); };
    session.inter_op_parallelism_threads = clamp(c.run.inter_op_threads);
    session.intra_op_parallelism_threads = clamp(c.run.intra_op_threads);
    if (!c.cluster.empty()) {
      session.device_filters = DefaultDeviceFilters(c.task.type, clamp(c.task.index.value_or(0)));
    }
    options.session_config = session;
  }
  TfConfig resolved;
  resolved.cluster = c.cluster;
  resolved.task_type = c.task.type;
  if (c.task.index) resolved.task_index = static_cast<int>(*c.task.index);
  resolved.environment = tf_config.environment;
  resolved.session_master = tf_config.session_master;
  resolved.eval_session_master = tf_config.eval_session_master;
  absl::StatusOr<RunConfig> run_config = RunConfig::Create(options, resolved);
  if (!run_config.ok()) {
    // RunConfig names TF_CONFIG; say where the cluster or task really came from.
    absl::string_view message = run_config.status().message();
    absl::ConsumePrefix(&message, "TF_CONFIG: ");
    return absl::Status(run_config.status().code(),
                        absl::StrCat(where(c.cluster.empty() ? "task" : "cluster"), ": ", message));
  }
  c.run_config_ = *std::move(run_config);
  // The resolved checkpoint cadence (both unset: every 600 seconds).
  c.run.save_checkpoints_steps = c.run_config_.save_checkpoints_steps();
  c.run.save_checkpoints_secs = c.run_config_.save_checkpoints_secs();
  TANDEM_RETURN_IF_ERROR(internal::CheckDistribute(c, where));
  TANDEM_RETURN_IF_ERROR(internal::CheckExportAndWarmStart(c, where));
  TANDEM_RETURN_IF_ERROR(internal::CheckSecurity(c, where));
  TANDEM_RETURN_IF_ERROR(internal::CheckData(c, where));
  TANDEM_RETURN_IF_ERROR(internal::CheckFeatureColumns(c));
  return c;
}

absl::StatusOr<JobConfig> JobConfig::Load(const std::string& path,
                                          absl::Span<const std::string> overrides,
                                          absl::string_view tf_config_json) {
  TANDEM_ASSIGN_OR_RETURN(std::string text, env::ReadFile(path));
  return Parse(text, path, overrides, tf_config_json);
}

absl::StatusOr<JobConfig> JobConfig::LoadWithEnvironment(const std::string& path,
                                                         absl::Span<const std::string> overrides) {
  const char* tf_config = std::getenv("TF_CONFIG");
  return Load(path, overrides, tf_config == nullptr ? "" : tf_config);
}

std::string JobConfig::ToToml() const {
  JobConfig copy = *this;
  toml::table root;
  for (const Section& s : Sections(copy)) {
    toml::table table;
    for (const Field& f : s.fields) {
      std::visit(
          [&](auto* p) {
            using T = std::remove_pointer_t<decltype(p)>;
            if constexpr (std::is_same_v<T, std::optional<int64_t>>) {
              if (p->has_value()) table.insert_or_assign(f.key, **p);
            } else if constexpr (std::is_same_v<T, std::map<std::string, std::string>>) {
              toml::table map;
              for (const auto& [key, value] : *p) map.insert_or_assign(key, value);
              table.insert_or_assign(f.key, std::move(map));
            } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
              toml::array items;
              for (const std::string& v : *p) items.push_back(v);
              table.insert_or_assign(f.key, std::move(items));
            } else if constexpr (std::is_same_v<T, std::vector<ParamValue>>) {
              table.insert_or_assign(f.key, ParamArrayToToml(*p));
            } else {
              table.insert_or_assign(f.key, *p);
            }
          },
          f.target);
    }
    if (std::string(s.name) == "model") {
      toml::table params;
      for (const auto& [key, value] : model.params) InsertParam(params, key, value);
      table.insert_or_assign("params", std::move(params));
    }
    root.insert_or_assign(s.name, std::move(table));
  }
  if (!features.empty()) {
    toml::table all;
    for (const auto& [name, f] : features) {
      toml::table t;
      for (const auto& [key, value] : f.keys) InsertParam(t, key, value);
      all.insert_or_assign(name, std::move(t));
    }
    root.insert_or_assign("features", std::move(all));
  }
  if (!cluster.empty()) root.insert_or_assign("cluster", ClusterToToml(cluster));
  if (!task.type.empty() || task.index) {
    toml::table t;
    if (!task.type.empty()) t.insert_or_assign("type", task.type);
    if (task.index) t.insert_or_assign("index", *task.index);
    root.insert_or_assign("task", std::move(t));
  }
  std::ostringstream out;
  out << "# Resolved tandem job configuration.\n# Role: " << DescribeRole() << "\n"
      << toml::toml_formatter(root) << "\n";
  return out.str();
}

}  // namespace tandem
