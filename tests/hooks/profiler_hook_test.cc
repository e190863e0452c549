// ProfilerHook and StepStatsToChromeTrace: traced steps chosen as TensorFlow does and
// written as Chrome trace JSON that a JSON parser reads back.
#include "hooks/profiler_hook.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hooks/monitored_session.h"
#include "hooks/stop_hooks.h"
#include "nlohmann/json.hpp"
#include "tests/hooks/hooks_test_util.h"

namespace tandem {
namespace {

using ::testing::ElementsAre;
using json = nlohmann::json;
using testing_util::TempDir;
using testing_util::TrainGraph;
using testing_util::TrainRequest;

TEST(StepStatsToChromeTraceTest, OneProcessPerDeviceOneEventPerNode) {
  StepStats stats;
  stats.nodes.push_back(
      {"dense/MatMul", "MatMul", "/job:worker/task:0/device:CPU:0", 1000, 1250, 77});
  stats.nodes.push_back({"save/read", "ReadVariableOp", "/job:ps/task:0/device:CPU:0", 1100, 1105,
                         12345678901234ull});
  stats.nodes.push_back({"dense/Add", "AddV2", "/job:worker/task:0/device:CPU:0", 1260, 1270, 77});
  json trace = json::parse(StepStatsToChromeTrace(stats));
  ASSERT_TRUE(trace.contains("traceEvents"));
  std::map<int, std::string> process_names;
  std::vector<json> ops;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") {
      process_names[e["pid"].get<int>()] = e["args"]["name"].get<std::string>();
    } else if (e["ph"] == "X") {
      ops.push_back(e);
    }
  }
  // Devices in sorted order.
  EXPECT_THAT(process_names, ElementsAre(std::make_pair(0, "/job:ps/task:0/device:CPU:0"),
                                         std::make_pair(1, "/job:worker/task:0/device:CPU:0")));
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops[0]["name"], "MatMul");
  EXPECT_EQ(ops[0]["ts"], 1000);
  EXPECT_EQ(ops[0]["dur"], 250);
  EXPECT_EQ(ops[0]["pid"], 1);
  EXPECT_EQ(ops[0]["args"]["name"], "dense/MatMul");
  EXPECT_EQ(ops[0]["args"]["op"], "MatMul");
  EXPECT_EQ(ops[1]["pid"], 0);
  EXPECT_EQ(ops[1]["tid"], 0);  // Thread ids become small rows per device.
  EXPECT_EQ(ops[2]["tid"], ops[0]["tid"]);
}

TEST(ProfilerHookTest, WritesTimelinesOfTracedSteps) {
  TempDir dir;
  const std::string out = dir.File("profile");  // Created by the hook.
  TrainGraph g;
  auto ms = MonitoredSession::Create(g.graph(),
                                     std::make_unique<ChiefSessionCreator>(SessionCreatorOptions{}),
                                     {std::make_shared<ProfilerHook>(Every::Steps(2), out),
                                      std::make_shared<StopAtStepHook>(5, std::nullopt)});
  ASSERT_TRUE(ms.ok()) << ms.status();
  const int64_t start = env::NowMicros();
  while (!(*ms)->ShouldStop()) ASSERT_TRUE((*ms)->Run(TrainRequest(g)).ok());
  const int64_t end = env::NowMicros();
  ASSERT_TRUE((*ms)->Close().ok());

  // Step 1 only starts the timer; then every 2 steps.
  auto files = env::ListDir(out);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_THAT(*files, ElementsAre("timeline-2.json", "timeline-4.json"));
  auto text = env::ReadFile(env::JoinPath(out, "timeline-4.json"));
  ASSERT_TRUE(text.ok()) << text.status();
  json trace = json::parse(*text);
  bool saw_train = false, saw_process = false;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") saw_process = true;
    if (e["ph"] == "X") {
      // Each op ran inside the training loop: its interval lies within the loop's.
      const int64_t ts = e["ts"].get<int64_t>(), dur = e["dur"].get<int64_t>();
      EXPECT_GE(dur, 0);
      EXPECT_GE(ts, start);
      EXPECT_LE(ts + dur, end);
      if (e["args"]["name"] == "train") saw_train = true;
    }
  }
  EXPECT_TRUE(saw_train);
  EXPECT_TRUE(saw_process);
}

}  // namespace
}  // namespace tandem
