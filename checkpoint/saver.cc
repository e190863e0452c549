#include "checkpoint/saver.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/load_variables.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/shard_ops.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "framework/core/thread_pool.h"
#include "framework/graph/device_spec.h"
#include "framework/graph/scope.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/partitioned_variables.h"
#include "glog/logging.h"

namespace tandem::checkpoint {
namespace {

// The device a variable's handle will be placed on, as far as the graph says: its
// requested device, else that of the first node of its colocation group that
// requests one (optimizer slots and beta powers follow their variable this way).
std::string HandleDevice(Graph* graph, const Node* handle) {
  if (!handle->requested_device().empty()) return handle->requested_device();
  for (const std::string& name : handle->ColocationGroups()) {
    const Node* target = graph->FindNode(name);
    if (target != nullptr && !target->requested_device().empty()) {
      return target->requested_device();
    }
  }
  return "";
}

// The CPU of the task of `device` (a SaveShard's place: it has only a CPU kernel, and a
// variable on a GPU is read into its task's memory); "" stays "".
std::string CpuOfTask(const std::string& device) {
  if (device.empty()) return device;
  absl::StatusOr<DeviceSpec> spec = DeviceSpec::Parse(device);
  if (!spec.ok()) return device;
  spec->type = "CPU";
  spec->id = 0;
  return spec->ToString();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Saver>> Saver::Create(Graph* graph, SaverOptions options) {
  EnsureCheckpointOps();
  std::vector<ops::Variable> vars = options.var_list;
  if (vars.empty()) {
    TANDEM_ASSIGN_OR_RETURN(vars, ops::VariablesInCollection(graph, ops::kGlobalVariables));
  }
  std::set<std::string> names;
  std::set<std::string> devices;
  for (const ops::Variable& v : vars) {
    if (!v.valid()) return absl::InvalidArgumentError("Saver: invalid variable in var_list");
    if (!names.insert(v.name()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("Saver: variable ", v.name(), " is listed twice"));
    }
    absl::StatusOr<std::string> dtype = SafetensorsDTypeName(v.dtype());
    if (!dtype.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Saver: variable ", v.name(), ": ", dtype.status().message()));
    }
    devices.insert(HandleDevice(graph, v.handle().node));
  }
  // Parts of partitioned variables say so on their handles (ops::PartitionedVariable).
  for (const ops::Variable& v : vars) {
    std::optional<ops::SaveSliceInfo> info = ops::GetSaveSliceInfo(*v.handle().node);
    if (info) {
      options.partitions.try_emplace(v.name(),
                                     PartitionInfo{info->full_name, info->full_shape, info->offset});
    }
  }
  std::map<std::string, SlicedTensor> slices;
  for (const auto& [part, info] : options.partitions) {
    if (!names.contains(part)) {
      return absl::InvalidArgumentError(
          absl::StrCat("Saver: partition info names ", part, ", which is not a saved variable"));
    }
    if (names.contains(info.full_name)) {
      return absl::InvalidArgumentError(absl::StrCat("Saver: partitioned tensor name ",
                                                     info.full_name, " is also a variable's name"));
    }
    SlicedTensor& t = slices[info.full_name];
    t.full_shape = info.full_shape;
    for (const ops::Variable& v : vars) {
      if (v.name() != part) continue;
      if (!v.shape().IsFullyDefined()) {
        return absl::InvalidArgumentError(absl::StrCat("Saver: partition ", part, " has shape ",
                                                       v.shape().DebugString(),
                                                       "; parts need a fully defined shape"));
      }
      t.parts.push_back({part, info.offset, v.shape().dims()});
    }
  }
  for (const auto& [full, t] : slices) {
    absl::Status s = ValidateSlicedTensor(full, t);
    if (!s.ok()) return AnnotateStatus(s, "Saver");
  }
  std::vector<std::string> shard_devices(devices.begin(), devices.end());

  Scope save = Scope::ForGraph(graph).NewSubScope("save");
  std::vector<SavedVariable> saved;
  std::vector<Node*> assigns;
  std::vector<std::vector<Output>> shard_values(shard_devices.size());
  std::vector<std::vector<std::string>> shard_names(shard_devices.size());
  std::vector<std::vector<int>> shard_vars(shard_devices.size());  // Indices into `saved`.
  for (const ops::Variable& v : vars) {
    Scope s = save.ColocateWith(v.handle().node);
    SavedVariable sv;
    sv.name = v.name();
    sv.dtype = v.dtype();
    sv.shape = v.shape();
    sv.shard = static_cast<int>(std::lower_bound(shard_devices.begin(), shard_devices.end(),
                                                 HandleDevice(graph, v.handle().node)) -
                                shard_devices.begin());
    Output read = ops::ReadVariableOp(s.WithOpName("read"), v.handle(), v.dtype());
    Output feed = ops::Placeholder(s.WithOpName("restore_value"), v.dtype(), v.shape());
    Output assign = ops::AssignVariableOp(s.WithOpName("restore"), v.handle(), feed);
    if (!save.ok()) break;
    shard_values[sv.shard].push_back(read);
    shard_names[sv.shard].push_back(sv.name);
    shard_vars[sv.shard].push_back(static_cast<int>(saved.size()));
    sv.restore_feed = feed.name();
    assigns.push_back(assign.node);
    saved.push_back(std::move(sv));
  }
  // One SaveShard and one RestoreShard per device, on that device's task: values are
  // written and read where they live.
  Output prefix = ops::Placeholder(save.WithOpName("prefix"), DType::kString, PartialShape({}));
  Output step = ops::Placeholder(save.WithOpName("global_step"), DType::kInt64, PartialShape({}));
  SaveOps save_ops{prefix.name(), step.name(), {}, ""};
  std::vector<Node*> readers;  // RestoreShard by shard.
  const int64_t num_shards = static_cast<int64_t>(shard_devices.size());
  for (int64_t k = 0; k < num_shards && save.ok(); ++k) {
    Scope on_task = save.WithDevice(CpuOfTask(shard_devices[k]));
    std::vector<Output> inputs = {prefix, step};
    inputs.insert(inputs.end(), shard_values[k].begin(), shard_values[k].end());
    Node* n = on_task.AddNode(kSaveShardOp, absl::StrCat("save_shard_", k), inputs,
                              {{"names", shard_names[k]},
                               {"shard", k},
                               {"num_shards", num_shards},
                               {"device", shard_devices[k]}});
    if (n != nullptr) save_ops.shards.push_back(absl::StrCat(n->name(), ":0"));
    std::vector<DType> dtypes;
    std::vector<PartialShape> shapes, full_shapes;
    std::vector<std::string> full_names;
    std::vector<int64_t> offsets;
    for (int i : shard_vars[k]) {
      dtypes.push_back(saved[i].dtype);
      shapes.push_back(saved[i].shape);
      auto part = options.partitions.find(saved[i].name);
      if (part == options.partitions.end()) {
        full_names.emplace_back();
        full_shapes.push_back(PartialShape::UnknownRank());
        continue;
      }
      full_names.push_back(part->second.full_name);
      full_shapes.emplace_back(absl::MakeConstSpan(part->second.full_shape));
      offsets.insert(offsets.end(), part->second.offset.begin(), part->second.offset.end());
    }
    readers.push_back(on_task.AddNode(
        kRestoreShardOp, absl::StrCat("restore_shard_", k), {prefix},
        {{"names", shard_names[k]},
         {"dtypes", dtypes},
         {"shapes", shapes},
         {"full_names", full_names},
         {"full_shapes", full_shapes},
         {"offsets", offsets},
         {"max_parallel_reads", static_cast<int64_t>(options.max_parallel_writes)}}));
  }
  // Each variable assigned from its shard's reader once every reader succeeded.
  std::vector<Node*> shard_assigns;
  for (int64_t k = 0; k < num_shards && save.ok(); ++k) {
    for (size_t j = 0; j < shard_vars[k].size(); ++j) {
      const ops::Variable& v = vars[shard_vars[k][j]];
      Output a = ops::AssignVariableOp(save.ColocateWith(v.handle().node)
                                           .WithControlDependencies(readers)
                                           .WithOpName("restore_from_shard"),
                                       v.handle(), Output(readers[k], static_cast<int>(j)));
      shard_assigns.push_back(a.node);
    }
  }
  Node* from_shards =
      ops::NoOp(save.WithControlDependencies(shard_assigns).WithOpName("restore_all_from_shards"));
  Node* restore_all = ops::NoOp(save.WithControlDependencies(assigns).WithOpName("restore_all"));
  if (!save.ok()) return AnnotateStatus(save.status(), "Saver: adding save/restore ops");
  save_ops.restore_all = from_shards->name();
  return std::unique_ptr<Saver>(new Saver(std::move(options), std::move(saved),
                                          std::move(shard_devices), restore_all->name(),
                                          std::move(save_ops)));
}

Saver::Saver(SaverOptions options, std::vector<SavedVariable> vars,
             std::vector<std::string> shard_devices, std::string restore_op, SaveOps save_ops)
    : options_(std::move(options)),
      vars_(std::move(vars)),
      shard_devices_(std::move(shard_devices)),
      restore_op_(std::move(restore_op)),
      save_ops_(std::move(save_ops)),
      retention_(options_.max_to_keep, options_.keep_checkpoint_every_n_hours) {}

std::map<std::string, std::string> Saver::RestoreFeeds() const {
  std::map<std::string, std::string> feeds;
  for (const SavedVariable& v : vars_) feeds[v.name] = v.restore_feed;
  return feeds;
}

std::vector<std::string> Saver::VariableNames() const {
  std::vector<std::string> names;
  for (const SavedVariable& v : vars_) names.push_back(v.name);
  return names;
}

absl::StatusOr<std::string> Saver::Save(Session* session, const std::string& model_dir,
                                        int64_t global_step) {
  TANDEM_RETURN_IF_ERROR(env::MakeDirs(model_dir));
  const std::string prefix = env::JoinPath(model_dir, CheckpointBaseName(global_step));
  Tensor prefix_value(DType::kString, TensorShape({}));
  prefix_value.data<std::string>()[0] = prefix;

  CheckpointIndex index;
  index.global_step = global_step;
  index.num_shards = NumShards();
  for (const SavedVariable& v : vars_) {
    index.weight_map[v.name] = ShardFileName(prefix, v.shard, NumShards());
    auto it = options_.partitions.find(v.name);
    if (it == options_.partitions.end()) continue;
    SlicedTensor& t = index.slices[it->second.full_name];
    t.full_shape = it->second.full_shape;
    t.parts.push_back({v.name, it->second.offset, v.shape.dims()});  // Parts' shapes are defined.
  }

  absl::MutexLock lock(&save_mu_);
  // One step: every shard reads its values at the same point between training steps
  // and writes them on its own device.
  absl::StatusOr<std::vector<Tensor>> written =
      session->Run({{save_ops_.prefix, prefix_value},
                    {save_ops_.global_step, Tensor::Scalar<int64_t>(global_step)}},
                   save_ops_.shards);
  if (!written.ok()) return AnnotateStatus(written.status(), "Saver: writing the shards");
  for (const Tensor& bytes : *written) index.total_size += bytes.data<int64_t>()[0];
  TANDEM_RETURN_IF_ERROR(WriteIndex(IndexPath(prefix), index));
  TANDEM_RETURN_IF_ERROR(
      retention_.RecordSave(model_dir, prefix, static_cast<double>(env::NowMicros()) / 1e6));
  return prefix;
}

absl::Status Saver::RestoreImpl(Session* session, const std::string& prefix, LoadFailure* kind) {
  *kind = LoadFailure::kUnreadable;
  const std::string index_path = IndexPath(prefix);
  TANDEM_ASSIGN_OR_RETURN(CheckpointIndex index, ReadIndex(index_path));
  // What the model lacks is told here, before any task reads a shard.
  if (absl::Status present = CheckVariablesPresent(index, index_path, LoadSpecs()); !present.ok()) {
    *kind = LoadFailure::kMismatch;
    return present;
  }
  Tensor prefix_value(DType::kString, TensorShape({}));
  prefix_value.data<std::string>()[0] = prefix;
  // Every task reads and checks its own variables; no assignment runs before all did.
  absl::StatusOr<std::vector<Tensor>> out =
      session->Run({{save_ops_.prefix, prefix_value}}, {}, {save_ops_.restore_all});
  if (!out.ok()) {
    // A file that is corrupt or missing makes the checkpoint unreadable; anything else
    // (a mismatch, a task that failed) is an error to report, not a reason to fall back.
    *kind = absl::IsDataLoss(out.status()) || absl::IsNotFound(out.status())
                ? LoadFailure::kUnreadable
                : LoadFailure::kMismatch;
    return out.status();
  }
  *kind = LoadFailure::kNone;
  return absl::OkStatus();
}

std::vector<VariableToLoad> Saver::LoadSpecs() const {
  std::vector<VariableToLoad> specs;
  for (const SavedVariable& v : vars_) {
    VariableToLoad spec{v.name, v.dtype, v.shape, std::nullopt};
    auto part = options_.partitions.find(v.name);
    if (part != options_.partitions.end()) spec.part = part->second;
    specs.push_back(std::move(spec));
  }
  return specs;
}

absl::Status Saver::Restore(Session* session, const std::string& prefix) {
  LoadFailure kind;
  return RestoreImpl(session, prefix, &kind);
}

namespace {
constexpr char kNoCheckpointIn[] = "no checkpoint in ";
}  // namespace

bool IsNoCheckpoint(const absl::Status& status) {
  return absl::IsNotFound(status) && absl::StartsWith(status.message(), kNoCheckpointIn);
}

absl::StatusOr<std::string> Saver::RestoreLatest(Session* session, const std::string& model_dir,
                                                 bool set_aside_unreadable) {
  // A missing, empty or unreadable state file is rebuilt from the index files there.
  absl::StatusOr<CheckpointState> state = ReadOrRebuildCheckpointState(model_dir);
  if (absl::IsNotFound(state.status())) {
    return absl::NotFoundError(absl::StrCat(kNoCheckpointIn, model_dir));
  }
  TANDEM_RETURN_IF_ERROR(state.status());
  // model_checkpoint_path, then the list from its end.
  std::vector<std::string> candidates = {state->model_checkpoint_path};
  for (auto it = state->all_model_checkpoint_paths.rbegin();
       it != state->all_model_checkpoint_paths.rend(); ++it) {
    if (std::find(candidates.begin(), candidates.end(), *it) == candidates.end()) {
      candidates.push_back(*it);
    }
  }
  std::vector<std::string> unreadable;
  for (const std::string& prefix : candidates) {
    LoadFailure kind = LoadFailure::kNone;
    absl::Status s = RestoreImpl(session, prefix, &kind);
    if (s.ok()) {
      if (!set_aside_unreadable) return prefix;
      // Training goes on from `prefix`: set the newer, unreadable ones aside so that
      // no save at their steps overwrites them.
      for (const std::string& bad : unreadable) {
        absl::StatusOr<int> moved = SetAsideUnreadableCheckpoint(model_dir, bad);
        if (moved.ok()) {
          LOG(WARNING) << "Unreadable checkpoint " << bad << " set aside (" << *moved
                       << " files renamed to *.unreadable); training resumes from " << prefix;
        } else {
          LOG(WARNING) << "Could not set the unreadable checkpoint " << bad
                       << " aside: " << moved.status();
        }
      }
      return prefix;
    }
    if (kind != LoadFailure::kUnreadable) return s;
    LOG(WARNING) << "Checkpoint " << prefix << " cannot be read, trying an older one: " << s;
    unreadable.push_back(prefix);
  }
  if (candidates.empty()) return absl::NotFoundError(absl::StrCat(kNoCheckpointIn, model_dir));
  // Checkpoints exist but none can be read: an error, never a reason to start over.
  return absl::DataLossError(absl::StrCat("no readable checkpoint in ", model_dir, ": all ",
                                          candidates.size(), " listed checkpoints are unreadable"));
}

}  // namespace tandem::checkpoint
