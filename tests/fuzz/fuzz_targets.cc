#include "tests/fuzz/fuzz_targets.h"

#include <cstdio>
#include <cstdlib>

#include "checkpoint/checkpoint_index.h"
#include "checkpoint/safetensors.h"
#include "estimator/job_config.h"
#include "estimator/run_config.h"
#include "framework/core/env.h"
#include "framework/core/record_io.h"
#include "framework/data/csv.h"
#include "framework/data/example_parser.h"
#include "framework/data/readers.h"
#include "framework/distributed/worker.h"
#include "framework/graph/graph.h"
#include "framework/ops/standard_ops.h"
#include "framework/protos/graph.pb.h"
#include "framework/runtime/session.h"
#include "framework/tensor/tensor_codec.h"
#include "google/protobuf/stubs/logging.h"
#include "nlohmann/json.hpp"
#include "serving/rest_json.h"
#include "serving/rest_json_reader.h"
#include "serving/rest_response.h"
#include "serving/signature.h"

namespace tandem::fuzz {

int FuzzGraphDef(const uint8_t* data, size_t size) {
  ops::EnsureStandardOps();
  google::protobuf::LogSilencer quiet;
  proto::GraphDef def;
  if (!def.ParseFromArray(data, static_cast<int>(size))) return 0;
  auto graph = Graph::FromGraphDef(def, OpRegistry::Global());
  if (!graph.ok()) return 1;
  auto session = NewDirectSession(def);
  return session.ok() ? 3 : 2;
}

int FuzzTensorProto(const uint8_t* data, size_t size) {
  google::protobuf::LogSilencer quiet;
  proto::TensorProto p;
  if (!p.ParseFromArray(data, static_cast<int>(size))) return 0;
  auto t = TensorFromProto(p);
  if (!t.ok()) return 1;
  if (t->dtype() == DType::kString && t->NumElements() > 0) {
    (void)t->StringAt(t->NumElements() - 1).size();  // Touch the last element.
  } else if (t->dtype() != DType::kResource && t->NumElements() > 0) {
    (void)t->ValueAsDouble(t->NumElements() - 1);
  }
  return 2;
}

namespace {

// A per-process scratch file holding `data`, for parsers that read files.
std::string ScratchFile(const uint8_t* data, size_t size, absl::string_view suffix) {
  // In memory (/dev/shm) when available: rewriting a disk file thousands of times is slow.
  static const std::string dir = [] {
    if (env::IsDirectory("/dev/shm")) setenv("TMPDIR", "/dev/shm", 0);
    auto d = env::MakeTempDir("tandem_fuzz");
    return d.ok() ? *d : std::string("/tmp");
  }();
  std::string path = env::JoinPath(dir, absl::StrCat("input", suffix));
  // A plain write: scratch input needs no fsync, and fuzzing needs speed.
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    if (size > 0) std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  return path;
}

}  // namespace

int FuzzRecordFile(const uint8_t* data, size_t size) {
  auto reader = io::RecordReader::Open(ScratchFile(data, size, ".tfrecord"));
  if (!reader.ok()) return 0;
  for (int records = 0;; ++records) {
    auto rec = (*reader)->ReadRecord();
    if (!rec.ok()) return 1;
    if (!rec->has_value()) return 2;
  }
}

int FuzzCsv(const uint8_t* data, size_t size) {
  data::CsvReadOptions o;
  o.header = true;
  o.na_value = "?";
  auto table = data::ReadCsv({ScratchFile(data, size, ".csv")},
                             {{"x", DType::kFloat, "0"},
                              {"n", DType::kInt64, "-1", "|"},
                              {"flag", DType::kString, ""}},
                             o);
  if (!table.ok()) return 1;
  if (table->rows == 0) return 2;
  auto ds = data::CsvDataset(*std::move(table));
  if (!ds.ok()) return 1;
  auto batches = data::CollectAll(*(*ds)->Batch(2));
  return batches.ok() ? 2 : 1;
}

int FuzzExamples(const uint8_t* data, size_t size) {
  google::protobuf::LogSilencer quiet;
  auto columns = data::ReadExampleFiles({ScratchFile(data, size, ".tfrecord")},
                                        {{"age", DType::kFloat, false, {1}, {0}},
                                         {"tags", DType::kString, true, {}, {}},
                                         {"ids", DType::kInt64, true, {}, {}}},
                                        data::Compression::kNone);
  return columns.ok() ? 2 : 1;
}

int FuzzJobConfig(const uint8_t* data, size_t size) {
  absl::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = JobConfig::Parse(text, "fuzz.toml");
  if (!config.ok()) return 0;
  auto again = JobConfig::Parse(config->ToToml(), "printed.toml");
  return again.ok() ? 2 : 1;
}

int FuzzTfConfig(const uint8_t* data, size_t size) {
  absl::string_view text(reinterpret_cast<const char*>(data), size);
  auto tf = ParseTfConfig(text);
  if (!tf.ok()) return 0;
  auto rc = RunConfig::Create({}, *tf);
  return rc.ok() ? 2 : 1;
}

int FuzzSignature(const uint8_t* data, size_t size) {
  absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<serving::Signature> sig = serving::ParseSignatureJson(text, "signature.json");
  if (!sig.ok()) return 0;
  absl::StatusOr<serving::Signature> again =
      serving::ParseSignatureJson(serving::SignatureToJson(*sig), "again");
  return again.ok() && *again == *sig ? 2 : 1;
}

int FuzzSafetensors(const uint8_t* data, size_t size) {
  auto file = checkpoint::SafetensorsFile::Parse(
      "fuzz.safetensors", std::string(reinterpret_cast<const char*>(data), size));
  if (!file.ok()) return 0;
  for (const std::string& name : file->TensorNames()) {
    if (!file->Read(name).ok()) return 1;
  }
  return 2;
}

int FuzzCheckpointIndex(const uint8_t* data, size_t size) {
  auto index = checkpoint::ParseIndex("fuzz.index.json",
                                      absl::string_view(reinterpret_cast<const char*>(data), size));
  return index.ok() ? 2 : 0;
}

namespace {

class NoRemoteTasks : public WorkerCacheInterface {
 public:
  absl::StatusOr<WorkerInterface*> GetWorker(const std::string& task) override {
    return absl::NotFoundError("fuzz worker has no peers");
  }
  std::vector<std::string> ListTasks() const override { return {}; }
};

// One Worker for the whole process, with session "fuzz" and graph "graph_1".
Worker* FuzzWorker() {
  static Worker* worker = [] {
    static auto* devices = DeviceMgr::CreateLocal("worker", 0, 0)->release();
    static auto* cache = new NoRemoteTasks();
    WorkerEnv env;
    env.task_name = "/job:worker/replica:0/task:0";
    env.devices = devices;
    env.worker_cache = cache;
    auto* w = new Worker(env);
    WireMessage<proto::CreateWorkerSessionRequest> cs;
    WireMessage<proto::CreateWorkerSessionResponse> csr;
    cs.proto.set_session_handle("fuzz");
    CHECK(
        CallAndWait<WorkerInterface>(w, &WorkerInterface::CreateWorkerSessionAsync, cs, &csr).ok());
    WireMessage<proto::RegisterGraphRequest> rg;
    WireMessage<proto::RegisterGraphResponse> rgr;
    rg.proto.set_session_handle("fuzz");
    const std::string dev = "/job:worker/replica:0/task:0/device:CPU:0";
    auto* arg = rg.proto.mutable_graph()->add_node();
    arg->set_name("x");
    arg->set_op("_Arg");
    arg->set_device(dev);
    (*arg->mutable_attr())["T"].set_type(proto::DT_FLOAT);
    (*arg->mutable_attr())["index"].set_i(0);
    auto* sq = rg.proto.mutable_graph()->add_node();
    sq->set_name("sq");
    sq->set_op("Square");
    sq->set_device(dev);
    sq->add_input("x");
    (*sq->mutable_attr())["T"].set_type(proto::DT_FLOAT);
    auto* ret = rg.proto.mutable_graph()->add_node();
    ret->set_name("ret");
    ret->set_op("_Retval");
    ret->set_device(dev);
    ret->add_input("sq");
    (*ret->mutable_attr())["T"].set_type(proto::DT_FLOAT);
    (*ret->mutable_attr())["index"].set_i(0);
    CHECK(CallAndWait<WorkerInterface>(w, &WorkerInterface::RegisterGraphAsync, rg, &rgr).ok());
    CHECK_EQ(rgr.proto.graph_handle(), "graph_1");
    return w;
  }();
  return worker;
}

template <typename Req, typename Resp>
int Call(absl::string_view bytes,
         void (WorkerInterface::*method)(CallOptions*, const WireMessage<Req>*, WireMessage<Resp>*,
                                         StatusCallback),
         const std::function<void(WireMessage<Req>*)>& adjust) {
  WireMessage<Req> req;
  if (!DecodeWireFlat(bytes, &req).ok()) return 0;
  adjust(&req);
  WireMessage<Resp> resp;
  return CallAndWait<WorkerInterface>(FuzzWorker(), method, req, &resp).ok() ? 2 : 1;
}

}  // namespace

std::string WorkerRequestSeed(int method, const std::string& wire) {
  return std::string(1, static_cast<char>(method)) + wire;
}

int FuzzWorkerRequest(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  google::protobuf::LogSilencer quiet;
  absl::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  Worker* w = FuzzWorker();
  switch (data[0] % 4) {
    case 0:
      return Call<proto::RegisterGraphRequest, proto::RegisterGraphResponse>(
          bytes, &WorkerInterface::RegisterGraphAsync,
          [](auto* r) { r->proto.set_session_handle("fuzz"); });
    case 1:
      return Call<proto::RunGraphRequest, proto::RunGraphResponse>(
          bytes, &WorkerInterface::RunGraphAsync, [](auto* r) {
            r->proto.set_session_handle("fuzz");
            r->proto.set_graph_handle("graph_1");
          });
    case 2: {
      // A receive of a value nobody sends waits; abort its step so the call returns.
      WireMessage<proto::RecvTensorRequest> req;
      if (!DecodeWireFlat(bytes, &req).ok()) return 0;
      WireMessage<proto::RecvTensorResponse> resp;
      absl::Notification done;
      w->RecvTensorAsync(nullptr, &req, &resp, [&](const absl::Status&) { done.Notify(); });
      WireMessage<proto::CleanupGraphRequest> cleanup;
      WireMessage<proto::CleanupGraphResponse> cleanup_resp;
      cleanup.proto.set_step_id(req.proto.step_id());
      cleanup.proto.set_abort_code(static_cast<int>(absl::StatusCode::kCancelled));
      (void)CallAndWait<WorkerInterface>(w, &WorkerInterface::CleanupGraphAsync, cleanup,
                                         &cleanup_resp);
      done.WaitForNotification();
      return 1;
    }
    default:
      return Call<proto::CleanupGraphRequest, proto::CleanupGraphResponse>(
          bytes, &WorkerInterface::CleanupGraphAsync, [](auto* r) {
            // Aborts only: cleaning up steps without aborting leaves nothing to check.
            r->proto.set_abort_code(1 + (r->proto.abort_code() & 15));
          });
  }
}

namespace {

// A value of tandem's JSON reader as nlohmann::json, for the differential check.
nlohmann::json ToNlohmann(const serving::JsonValue& v) {
  switch (v.kind()) {
    case serving::JsonKind::kNull:
      return nullptr;
    case serving::JsonKind::kBool:
      return v.bool_value();
    case serving::JsonKind::kInt:
      return v.int_value();
    case serving::JsonKind::kUint:
      return v.uint_value();
    case serving::JsonKind::kDouble:
      return v.number();
    case serving::JsonKind::kString:
      return std::string(v.string());
    case serving::JsonKind::kArray: {
      nlohmann::json a = nlohmann::json::array();
      if (v.empty()) return a;
      serving::JsonValue e = v.first();
      for (size_t i = 0; i < v.size(); ++i) {
        if (i > 0) e = e.next();
        a.push_back(ToNlohmann(e));
      }
      return a;
    }
    case serving::JsonKind::kObject: {
      nlohmann::json o = nlohmann::json::object();
      v.ForEachMember([&](absl::string_view key, const serving::JsonValue& value) {
        o[std::string(key)] = ToNlohmann(value);
      });
      return o;
    }
  }
  return nullptr;
}

}  // namespace

namespace {

int FuzzPredict(const uint8_t* data, size_t size, const serving::Signature* signature) {
  const absl::string_view body(reinterpret_cast<const char*>(data), size);
  serving::RestLimits limits;
  limits.max_instances = 64;
  // The reader must agree with nlohmann::json on what is JSON and on its value.
  bool is_json = false;
  if (serving::CheckJsonDepth(body, limits.max_json_depth).ok()) {
    absl::StatusOr<serving::JsonDocument> mine =
        serving::JsonDocument::Parse(body, limits.max_json_depth);
    const nlohmann::json theirs = nlohmann::json::parse(body.begin(), body.end(), nullptr,
                                                        /*allow_exceptions=*/false);
    is_json = !theirs.is_discarded();
    if (mine.ok() != is_json) return 3;
    if (mine.ok() && ToNlohmann(mine->root()) != theirs) return 3;
  }
  auto request = serving::ParsePredictRequest(body, *signature, limits);
  if (!is_json) return request.ok() ? 3 : 0;
  if (!request.ok()) return 1;
  auto response = serving::PredictResponseJson(request->inputs, request->format);
  if (!response.ok()) return 1;
  // The response must parse back (NaN and Infinity cannot occur: inputs are finite).
  return nlohmann::json::accept(*response) ? 2 : 3;
}

}  // namespace

int FuzzPredictRequest(const uint8_t* data, size_t size) {
  static const serving::Signature* signature = [] {
    auto* s = new serving::Signature();
    s->inputs["x"] = {"input/x:0", DType::kFloat, PartialShape({-1, 3})};
    s->inputs["n"] = {"input/n:0", DType::kInt64, PartialShape({-1})};
    return s;
  }();
  return FuzzPredict(data, size, signature);
}

int FuzzPredictStrings(const uint8_t* data, size_t size) {
  static const serving::Signature* signature = [] {
    auto* s = new serving::Signature();
    s->inputs["s"] = {"input/s:0", DType::kString, PartialShape({-1})};
    s->inputs["tags"] = {"input/tags:0", DType::kString, PartialShape({-1, -1})};
    s->inputs["ids"] = {"input/ids:0", DType::kInt64, PartialShape({-1, -1})};
    return s;
  }();
  return FuzzPredict(data, size, signature);
}

}  // namespace tandem::fuzz
