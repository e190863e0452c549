// fashion_train: trains a Fashion-MNIST example model (mlp or cnn) with a plain
// DirectSession loop and prints its test accuracy: the models without the Estimator
// (`trainer` is the config-driven way). Run with --help for the options.
#include <cstdio>

#include "CLI/CLI.hpp"
#include "apps/examples/session_trainer.h"
#include "glog/logging.h"

int main(int argc, char** argv) {
  CLI::App app{"Train a Fashion-MNIST model with tandem and report test accuracy."};
  tandem::examples::SessionTrainOptions o;
  std::string data_dir;
  app.add_option("--model", o.model, "mlp (784-256-128-10) or cnn")
      ->check(CLI::IsMember({"mlp", "cnn"}))
      ->capture_default_str();
  app.add_option("--epochs", o.epochs, "passes over the 60k training images")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--max_steps", o.max_steps, "stop after this many steps (overrides --epochs)");
  app.add_option("--batch_size", o.batch_size, "examples per step")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--learning_rate", o.learning_rate, "Adam learning rate")->capture_default_str();
  app.add_option("--seed", o.seed, "graph seed (weights, shuffling, dropout)")
      ->capture_default_str();
  app.add_option("--threads", o.threads, "threads per pool (0 = one per core)")
      ->capture_default_str();
  app.add_option("--log_every", o.log_every, "log the loss every N steps (0 = never)")
      ->capture_default_str();
  app.add_option("--data_dir", data_dir,
                 "directory with the IDX files (default $TANDEM_DATA_DIR or "
                 "/usr/share/datasets/fashion-mnist)");
  CLI11_PARSE(app, argc, argv);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);

  auto data = tandem::data::LoadFashionMnist(data_dir);
  if (!data.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(data.status().message()).c_str());
    return 1;
  }
  auto result = tandem::examples::TrainFashionModel(*data, o);
  if (!result.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(result.status().message()).c_str());
    return 1;
  }
  std::printf(
      "model=%s steps=%lld train_seconds=%.1f examples_per_second=%.0f "
      "final_loss=%.4f test_accuracy=%.4f\n",
      o.model.c_str(), static_cast<long long>(result->steps), result->train_seconds,
      result->examples_per_second, result->final_loss, result->test_accuracy);
  return 0;
}
