// Runs the fuzz targets without libFuzzer: on valid seeds, on thousands of
// deterministic byte mutations of them, and on structured random GraphDefs that mix
// every registered op with hostile attrs (negative and huge dimensions, wrong types,
// out-of-range axes). Passing means nothing crashed; ASan/UBSan builds
// (-DTANDEM_SANITIZE=ON) also catch memory errors here.
#include <cstdio>
#include <random>

#include "checkpoint/saver.h"
#include "framework/core/env.h"
#include "framework/core/record_io.h"
#include "framework/distributed/tensor_wire.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/layers.h"
#include "framework/ops/losses.h"
#include "framework/ops/optimizers.h"
#include "framework/ops/standard_ops.h"
#include "framework/ops/state_ops.h"
#include "framework/protos/example.pb.h"
#include "framework/protos/worker.pb.h"
#include "framework/tensor/tensor_codec.h"
#include "gtest/gtest.h"
#include "serving/signature.h"
#include "tests/fuzz/fuzz_targets.h"

namespace tandem::fuzz {
namespace {

std::string SeedGraph() {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DType::kFloat, PartialShape({-1, 8}));
  Output y = ops::Placeholder(root.WithOpName("y"), DType::kInt32, PartialShape({-1}));
  Output h = ops::Dense(root, x, 4);
  Output loss = ops::SparseSoftmaxCrossEntropy(root, y, h);
  ops::AdamOptimizer adam;
  EXPECT_TRUE(adam.Minimize(root, loss).ok());
  EXPECT_TRUE(root.ok()) << root.status();
  proto::GraphDef def;
  root.graph()->ToGraphDef(&def);
  return def.SerializeAsString();
}

std::string Mutate(std::string s, std::mt19937_64& rng) {
  int edits = 1 + static_cast<int>(rng() % 3);
  for (int e = 0; e < edits && !s.empty(); ++e) {
    size_t pos = rng() % s.size();
    switch (rng() % 5) {
      case 0:
        s[pos] = static_cast<char>(rng());
        break;
      case 1:
        s[pos] ^= static_cast<char>(1 << (rng() % 8));
        break;
      case 2:
        s.insert(pos, 1, static_cast<char>(rng()));
        break;
      case 3:
        s.erase(pos, 1 + rng() % 4);
        break;
      default:
        s.resize(pos);
    }
  }
  return s;
}

int Feed(int (*target)(const uint8_t*, size_t), const std::string& bytes) {
  return target(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

TEST(FuzzReplayTest, GraphDefByteMutations) {
  std::string seed = SeedGraph();
  EXPECT_EQ(Feed(FuzzGraphDef, seed), 3);
  std::mt19937_64 rng(1);
  int depth[4] = {0};
  for (int i = 0; i < 6000; ++i) ++depth[Feed(FuzzGraphDef, Mutate(seed, rng))];
  // The mutations must reach graph building and session creation, not just the parser.
  EXPECT_GT(depth[1] + depth[2] + depth[3], 400);
  EXPECT_GT(depth[3], 60);
}

proto::AttrValue RandomAttr(std::mt19937_64& rng) {
  static const int64_t kInts[] = {0, 1, 2, 3, -1, -2, 4, 7, 1LL << 31, -(1LL << 40), 1LL << 62};
  proto::AttrValue a;
  auto pick = [&] { return kInts[rng() % (sizeof(kInts) / sizeof(kInts[0]))]; };
  switch (rng() % 9) {
    case 0:
      a.set_i(pick());
      break;
    case 1:
      a.set_f(static_cast<float>(pick()) * 0.5f);
      break;
    case 2:
      a.set_b(rng() % 2);
      break;
    case 3:
      a.set_s(rng() % 2 ? "SAME" : "VALID");
      break;
    case 4:
      a.set_type(static_cast<proto::DataType>(rng() % 22));
      break;
    case 5: {
      auto* s = a.mutable_shape();
      for (int d = static_cast<int>(rng() % 5); d > 0; --d) s->add_dim(pick());
      break;
    }
    case 6: {
      Tensor t = Tensor::Filled(rng() % 2 ? DType::kInt32 : DType::kFloat,
                                TensorShape({static_cast<int64_t>(rng() % 5)}),
                                static_cast<double>(pick() % 1000));
      TensorToProto(t, a.mutable_tensor());
      break;
    }
    case 7: {
      auto* l = a.mutable_list();
      for (int d = static_cast<int>(rng() % 5); d > 0; --d) l->add_i(pick());
      break;
    }
    default: {
      auto* l = a.mutable_list();
      l->add_s("loc:@n0");
    }
  }
  return a;
}

TEST(FuzzReplayTest, StructuredRandomGraphsOverEveryOp) {
  ops::EnsureStandardOps();
  std::vector<std::string> op_names = OpRegistry::Global()->ListOps();
  static const char* kAttrNames[] = {"T",
                                     "dtype",
                                     "shape",
                                     "value",
                                     "axis",
                                     "keep_dims",
                                     "transpose_a",
                                     "transpose_b",
                                     "strides",
                                     "padding",
                                     "ksize",
                                     "N",
                                     "num_split",
                                     "perm",
                                     "squeeze_dims",
                                     "seed",
                                     "seed2",
                                     "rate",
                                     "epsilon",
                                     "is_training",
                                     "index",
                                     "out_type",
                                     "SrcT",
                                     "DstT",
                                     "dilations",
                                     "begin_mask",
                                     "end_mask",
                                     "shrink_axis_mask",
                                     "new_axis_mask",
                                     "ellipsis_mask",
                                     "use_nesterov",
                                     "shared_name",
                                     "_class",
                                     "output_type"};
  std::mt19937_64 rng(7);
  int depth[4] = {0};
  for (int iter = 0; iter < 3000; ++iter) {
    proto::GraphDef def;
    // A few well-formed sources so later nodes have typed inputs.
    auto* c = def.add_node();
    c->set_name("n0");
    c->set_op("Const");
    TensorToProto(Tensor::FromVector<int32_t>({2, -1, 3}, TensorShape({3})),
                  (*c->mutable_attr())["value"].mutable_tensor());
    (*c->mutable_attr())["dtype"].set_type(proto::DT_INT32);
    auto* f = def.add_node();
    f->set_name("n1");
    f->set_op("Const");
    TensorToProto(Tensor::Filled(DType::kFloat, TensorShape({2, 3}), 1.5),
                  (*f->mutable_attr())["value"].mutable_tensor());
    (*f->mutable_attr())["dtype"].set_type(proto::DT_FLOAT);
    int nodes = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < nodes; ++k) {
      auto* n = def.add_node();
      n->set_name("n" + std::to_string(k + 2));
      const OpDef* op = *OpRegistry::Global()->Lookup(op_names[rng() % op_names.size()]);
      n->set_op(op->name);
      // Mostly the right number of inputs, so that inference and kernels get exercised.
      int max_in = op->max_inputs < 0 ? op->min_inputs + 3 : op->max_inputs;
      int inputs = rng() % 8 == 0
                       ? static_cast<int>(rng() % 5)
                       : op->min_inputs + static_cast<int>(rng() % (max_in - op->min_inputs + 1));
      for (int i = 0; i < inputs; ++i) {
        int src = static_cast<int>(rng() % (k + 2));
        n->add_input("n" + std::to_string(src) + (src < 2 || rng() % 4 ? "" : ":1"));
      }
      // Defaults are kept (Graph fills them); some are overridden with hostile values.
      for (const auto& [key, value] : op->default_attrs) {
        if (rng() % 3 == 0) (*n->mutable_attr())[key] = RandomAttr(rng);
      }
      for (int a = static_cast<int>(rng() % 3); a > 0; --a) {
        (*n->mutable_attr())[kAttrNames[rng() % (sizeof(kAttrNames) / sizeof(char*))]] =
            RandomAttr(rng);
      }
    }
    ++depth[Feed(FuzzGraphDef, def.SerializeAsString())];
  }
  EXPECT_GT(depth[3], 100) << "random graphs rarely got past inference";
}

TEST(FuzzReplayTest, TensorProtoMutations) {
  proto::TensorProto p;
  TensorToProto(Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, TensorShape({2, 3})), &p);
  std::string seed = p.SerializeAsString();
  std::mt19937_64 rng(3);
  int depth[3] = {0};
  for (int i = 0; i < 5000; ++i) ++depth[Feed(FuzzTensorProto, Mutate(seed, rng))];
  EXPECT_GT(depth[2], 100);
  for (int i = 0; i < 2000; ++i) {
    std::string random(rng() % 64, '\0');
    for (char& ch : random) ch = static_cast<char>(rng());
    Feed(FuzzTensorProto, random);
  }
}

// Mutates `seed` `n` times through `target`; returns how many inputs reached each depth.
std::vector<int> Campaign(int (*target)(const uint8_t*, size_t), const std::string& seed, int n,
                          uint64_t rng_seed) {
  std::vector<int> depth(4, 0);
  ++depth[Feed(target, seed)];
  std::mt19937_64 rng(rng_seed);
  for (int i = 0; i < n; ++i) ++depth[Feed(target, Mutate(seed, rng))];
  return depth;
}

TEST(FuzzReplayTest, RecordFileMutations) {
  std::string seed =
      io::EncodeRecord("hello") + io::EncodeRecord(std::string(300, 'x')) + io::EncodeRecord("");
  EXPECT_EQ(Feed(FuzzRecordFile, seed), 2);
  auto depth = Campaign(FuzzRecordFile, seed, 1500, 11);
  EXPECT_GT(depth[1], 500);  // Corruption detected (DATA_LOSS), never a crash.
}

TEST(FuzzReplayTest, CsvMutations) {
  std::string seed = "x,n,flag\n1.5,3|4,true\n-2e3,,\n\"4\",0,\"a,b\"\n?,?,?\n";
  EXPECT_EQ(Feed(FuzzCsv, seed), 2);
  auto depth = Campaign(FuzzCsv, seed, 1500, 12);
  EXPECT_GT(depth[1], 200);  // Refused with an error naming the line.
  EXPECT_GT(depth[2], 50);
}

TEST(FuzzReplayTest, ExampleMutations) {
  std::string seed;
  for (int i = 0; i < 4; ++i) {
    proto::Example e;
    auto& f = *e.mutable_features()->mutable_feature();
    f["age"].mutable_float_list()->add_value(30.f + i);
    for (int j = 0; j < i; ++j) f["tags"].mutable_bytes_list()->add_value("t" + std::to_string(j));
    f["ids"].mutable_int64_list()->add_value(i);
    seed += io::EncodeRecord(e.SerializeAsString());
  }
  EXPECT_EQ(Feed(FuzzExamples, seed), 2);
  auto depth = Campaign(FuzzExamples, seed, 1500, 14);
  EXPECT_GT(depth[1], 500);  // Corrupt records and examples refused, never a crash.
}

TEST(FuzzReplayTest, StringPredictRequests) {
  const std::vector<std::string> seeds = {
      R"({"instances": [{"s": "a", "tags": ["x", "y"], "ids": [1]},
                        {"s": {"b64": "AP8="}, "tags": [], "ids": 3}]})",
      R"({"inputs": {"s": ["a", "b"], "tags": [["x"], ["y", "z"]], "ids": [[], [4, 5]]}})"};
  for (size_t i = 0; i < seeds.size(); ++i) {
    EXPECT_EQ(Feed(FuzzPredictStrings, seeds[i]), 2) << "seed " << i;
    auto depth = Campaign(FuzzPredictStrings, seeds[i], 400, 70 + i);
    EXPECT_EQ(depth[3], 0) << "seed " << i;  // The reader and nlohmann never disagree.
    EXPECT_GT(depth[1] + depth[2], 10) << "seed " << i;  // Mutants still JSON reach the decoder.
  }
}

TEST(FuzzReplayTest, JobConfigMutations) {
  for (const char* name :
       {"fashion_mlp.toml", "fashion_cnn.toml", "linear_regression.toml", "census_wide_deep.toml"}) {
    auto text = env::ReadFile(std::string(TANDEM_SOURCE_DIR "/configs/") + name);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(Feed(FuzzJobConfig, *text), 2) << name;
    auto depth = Campaign(FuzzJobConfig, *text, 400, 13);
    EXPECT_GT(depth[0], 50) << name;  // Rejected with an error.
    EXPECT_GT(depth[2], 20) << name;  // Still valid, and printed config re-parses.
    EXPECT_EQ(depth[1], 0) << name << ": a parsed config printed TOML that does not re-parse";
  }
}

// The classes of hostile job configs found by fuzzing, each refused with an error
// (FuzzJobConfig returns 0) instead of a crash: dotted keys and table headers deep
// enough to overflow toml++'s recursion, nested arrays and inline tables, batch sizes
// and thread counts beyond the machine. Each seed also goes through mutations.
TEST(FuzzReplayTest, HostileJobConfigSeeds) {
  const std::string head = "[model]\nname = \"m\"\n";
  std::string dotted = head + "[model.params]\n", header = head + "[model.params", nested,
              inline_tables;
  for (int i = 0; i < 50000; ++i) {
    dotted += "k.";
    header += ".k";
  }
  dotted += "k = 1\n";
  header += "]\nz = 1\n";
  nested = head + "[model.params]\nx = " + std::string(50000, '[') + std::string(50000, ']') + "\n";
  inline_tables = head + "[model.params]\nx = ";
  for (int i = 0; i < 20000; ++i) inline_tables += "{a=";
  inline_tables += "1" + std::string(20000, '}') + "\n";
  const std::vector<std::string> seeds = {dotted,
                                          header,
                                          nested,
                                          inline_tables,
                                          head + "[train]\nbatch_size = 1000000000000\n",
                                          head + "[data]\neval_batch_size = 9223372036854775807\n",
                                          head + "[run]\nintra_op_threads = 100000\n",
                                          head + "[run]\ninter_op_threads = 100000\n"};
  for (size_t i = 0; i < seeds.size(); ++i) {
    EXPECT_EQ(Feed(FuzzJobConfig, seeds[i]), 0) << "seed " << i;
    Campaign(FuzzJobConfig, seeds[i], 20, 40 + static_cast<int>(i));
  }
}

TEST(FuzzReplayTest, TfConfigMutations) {
  std::string seed = R"({"cluster": {"chief": ["host0:2222"], "worker": ["host1:2222", )"
                     R"("host2:2222"], "ps": ["host3:2222"]}, "task": {"type": "worker", )"
                     R"("index": 1}, "environment": "cloud"})";
  EXPECT_EQ(Feed(FuzzTfConfig, seed), 2);
  auto depth = Campaign(FuzzTfConfig, seed, 3000, 14);
  EXPECT_GT(depth[0] + depth[1], 500);
  EXPECT_GT(depth[2], 50);
}

TEST(FuzzReplayTest, SignatureMutations) {
  serving::Signature sig;
  sig.model_name = "m";
  sig.global_step = 3;
  sig.inputs["x"] = {"input/x:0", DType::kFloat, PartialShape({-1, 3})};
  sig.outputs["y"] = {"y:0", DType::kInt64, PartialShape({-1})};
  sig.restore_op = "save/restore_all";
  sig.restore_feeds["w"] = "save/restore_value:0";
  sig.metrics["loss"] = 0.5;
  const std::string seed = serving::SignatureToJson(sig);
  EXPECT_EQ(Feed(FuzzSignature, seed), 2);
  auto depth = Campaign(FuzzSignature, seed, 3000, 15);
  EXPECT_GT(depth[0], 500);
  EXPECT_GT(depth[2], 50);  // Many mutations still parse, and every one round-trips.
  EXPECT_EQ(depth[1], 0);
}

TEST(FuzzReplayTest, CheckpointShardAndIndexMutations) {
  // A real checkpoint of a small model is the seed.
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DType::kFloat, PartialShape({-1, 3}));
  ops::Dense(root, x, 2);
  auto saver = checkpoint::Saver::Create(root.graph());
  ASSERT_TRUE(saver.ok()) << saver.status();
  Node* init = ops::GlobalVariablesInitializer(root);
  proto::GraphDef def;
  root.graph()->ToGraphDef(&def);
  auto session = NewDirectSession(def);
  ASSERT_TRUE(session.ok());
  ASSERT_TRUE((*session)->Run({}, {}, {init->name()}).ok());
  auto dir = env::MakeTempDir("fuzz_ckpt");
  ASSERT_TRUE(dir.ok());
  auto prefix = (*saver)->Save(session->get(), *dir, 7);
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  auto shard = env::ReadFile(*prefix + "-00000-of-00001.safetensors");
  auto index = env::ReadFile(*prefix + ".index.json");
  ASSERT_TRUE(shard.ok() && index.ok());
  EXPECT_EQ(Feed(FuzzSafetensors, *shard), 2);
  EXPECT_EQ(Feed(FuzzCheckpointIndex, *index), 2);
  auto sd = Campaign(FuzzSafetensors, *shard, 3000, 15);
  EXPECT_GT(sd[0] + sd[1], 1000);  // Corruption is detected...
  auto id = Campaign(FuzzCheckpointIndex, *index, 2000, 16);
  EXPECT_GT(id[0], 500);
  env::DeleteRecursively(*dir).IgnoreError();
}

TEST(FuzzReplayTest, WorkerRequestMutations) {
  // RunGraph of the fuzz worker's graph with a float argument: runs and succeeds.
  WireMessage<proto::RunGraphRequest> run;
  run.proto.set_step_id(5);
  run.tensors.push_back(Tensor::FromVector<float>({1, 2, 3, 4}, TensorShape({2, 2})));
  std::string run_seed = WorkerRequestSeed(1, EncodeWireFlat(run));
  EXPECT_EQ(Feed(FuzzWorkerRequest, run_seed), 2);
  auto depth = Campaign(FuzzWorkerRequest, run_seed, 1500, 17);
  EXPECT_GT(depth[0], 100);  // Malformed bytes rejected.
  EXPECT_GT(depth[2], 20);   // Mutations that still run the graph.
  // RegisterGraph of a small graph.
  WireMessage<proto::RegisterGraphRequest> reg;
  auto* n = reg.proto.mutable_graph()->add_node();
  n->set_name("c");
  n->set_op("Const");
  n->set_device("/job:worker/replica:0/task:0/device:CPU:0");
  TensorToProto(Tensor::Scalar<float>(1.0f), (*n->mutable_attr())["value"].mutable_tensor());
  (*n->mutable_attr())["dtype"].set_type(proto::DT_FLOAT);
  std::string reg_seed = WorkerRequestSeed(0, EncodeWireFlat(reg));
  EXPECT_EQ(Feed(FuzzWorkerRequest, reg_seed), 2);
  auto reg_depth = Campaign(FuzzWorkerRequest, reg_seed, 800, 18);
  EXPECT_GT(reg_depth[1] + reg_depth[2], 30);  // Envelope intact, graph mutated.
  // RecvTensor and CleanupGraph.
  WireMessage<proto::RecvTensorRequest> recv;
  recv.proto.set_step_id(9);
  recv.proto.set_rendezvous_key(
      "/job:worker/replica:0/task:0/device:CPU:0;0000000000000001;"
      "/job:worker/replica:0/task:0/device:CPU:0;edge_1_x;0:0");
  Campaign(FuzzWorkerRequest, WorkerRequestSeed(2, EncodeWireFlat(recv)), 500, 19);
  WireMessage<proto::CleanupGraphRequest> cleanup;
  cleanup.proto.set_step_id(9);
  Campaign(FuzzWorkerRequest, WorkerRequestSeed(3, EncodeWireFlat(cleanup)), 300, 20);
}

TEST(FuzzReplayTest, PredictRequestMutations) {
  const std::vector<std::string> seeds = {
      R"({"instances": [{"x": [1, 2.5, -3], "n": 4}, {"x": [0, 0, 1e-3], "n": -9}]})",
      R"({"signature_name": "serving_default", "inputs": {"x": [[1, 2, 3], [4, 5, 6]],
          "n": [7, 9223372036854775807]}})"};
  for (size_t i = 0; i < seeds.size(); ++i) {
    EXPECT_EQ(Feed(FuzzPredictRequest, seeds[i]), 2) << seeds[i];
    auto depth = Campaign(FuzzPredictRequest, seeds[i], 3000, 21 + i);
    EXPECT_GT(depth[0], 300) << seeds[i];  // Not JSON any more.
    EXPECT_GT(depth[1], 50) << seeds[i];   // JSON, refused by the decoder.
    EXPECT_GT(depth[2], 20) << seeds[i];   // Still a valid request.
    EXPECT_EQ(depth[3], 0) << seeds[i] << ": a response that is not JSON";
  }
}

// Hostile bodies of the kinds a client could send to make the server crash or
// allocate without bound; each is refused.
TEST(FuzzReplayTest, HostilePredictRequests) {
  std::string ragged = R"({"instances": [{"n": 1, "x": [)";
  for (int i = 0; i < 200000; ++i) ragged += i == 0 ? "0" : ",0";
  ragged += "]}";
  for (int i = 0; i < 60; ++i) ragged += R"(, {"n": 1, "x": []})";
  ragged += "]}";
  std::string many = R"({"inputs": {"n": [)";
  for (int i = 0; i < 100000; ++i) many += i == 0 ? "1" : ",1";
  many += R"(], "x": []}})";
  const std::vector<std::string> seeds = {
      std::string(1 << 20, '['),
      R"({"instances": )" + std::string(100000, '[') + std::string(100000, ']') + "}",
      R"({"instances": [{"x": {"b64": "AAAA"}, "n": 1}]})",
      R"({"instances": [{"x": [1e400, 0, 0], "n": 1}]})",
      R"({"instances": [{"x": [1, 2, 3], "n": 18446744073709551616}]})",
      R"({"instances": [{"x": [1, 2, 3], "n": 1.5}]})",
      R"({"inputs": {"x": [[1, 2, 3]], "n": [1, 2]}})",
      R"({"instances": [{"x": [1, 2, 3], "n": 1, "x\u0000": 2}]})",
      std::string("{\"instances\": [{\"x\": [1, 2, 3], \"n\": 1, \"\xff\": 0}]}"),
      ragged,
      many};
  for (size_t i = 0; i < seeds.size(); ++i) {
    EXPECT_LT(Feed(FuzzPredictRequest, seeds[i]), 2) << "seed " << i;
    Campaign(FuzzPredictRequest, seeds[i].substr(0, 4096), 50, 60 + i);
  }
}

}  // namespace
}  // namespace tandem::fuzz
