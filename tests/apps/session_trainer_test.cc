// The session trainer on real Fashion-MNIST, briefly: identical seeds give identical
// losses step by step, different seeds differ, and the loss goes down.
#include "apps/examples/session_trainer.h"

#include <cmath>

#include "gtest/gtest.h"

namespace tandem::examples {
namespace {

class SessionTrainerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto d = data::LoadFashionMnist();
    ASSERT_TRUE(d.ok()) << d.status();
    data_ = new data::FashionMnist(std::move(d).value());
  }
  static data::FashionMnist* data_;
};
data::FashionMnist* SessionTrainerTest::data_ = nullptr;

TEST_F(SessionTrainerTest, SameSeedSameLossesAndLossDecreases) {
  SessionTrainOptions o;
  o.max_steps = 60;
  o.evaluate = false;
  o.log_every = 0;
  auto a = TrainFashionModel(*data_, o);
  auto b = TrainFashionModel(*data_, o);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->losses, b->losses);
  double first = 0, last = 0;
  for (int i = 0; i < 10; ++i) first += a->losses[i], last += a->losses[50 + i];
  EXPECT_LT(last, 0.6 * first);
  o.seed = 2;
  auto c = TrainFashionModel(*data_, o);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->losses, c->losses);
}

TEST_F(SessionTrainerTest, CnnTrainsAFewStepsAndEvaluates) {
  SessionTrainOptions o;
  o.model = "cnn";
  o.max_steps = 5;
  o.batch_size = 32;
  o.log_every = 0;
  auto r = TrainFashionModel(*data_, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->losses.size(), 5u);
  // Every test image was scored: the accuracy is a whole count over the test set.
  const double n = static_cast<double>(data_->test.images.dim(0));
  ASSERT_GE(r->test_accuracy, 0.0);
  ASSERT_LE(r->test_accuracy, 1.0);
  EXPECT_NEAR(r->test_accuracy * n, std::round(r->test_accuracy * n), 1e-6);
  // And with the trained weights: four steps fewer score differently.
  o.max_steps = 1;
  auto early = TrainFashionModel(*data_, o);
  ASSERT_TRUE(early.ok()) << early.status();
  EXPECT_NE(early->test_accuracy, r->test_accuracy);
}

TEST_F(SessionTrainerTest, UnknownModelIsAnError) {
  SessionTrainOptions o;
  o.model = "resnet";
  auto r = TrainFashionModel(*data_, o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::examples
