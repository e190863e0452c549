// ckpt: inspects, verifies, dumps and exports tandem checkpoints (apps/ckpt/ckpt_tool.h).
//
//   ckpt ls PATH
//   ckpt verify PATH
//   ckpt dump PATH NAME [--limit N]
//   ckpt export PATH OUT.safetensors
//
// PATH is a model directory or a checkpoint prefix "<dir>/model.ckpt-<step>".
// Exit status: 0 on success, 1 on an error (printed on stderr), 2 on a usage error.
#include <cstdint>
#include <iostream>
#include <string>

#include "CLI/CLI.hpp"
#include "apps/ckpt/ckpt_tool.h"

int main(int argc, char** argv) {
  CLI::App app{
      "Inspect tandem checkpoints. PATH is a model directory (with a `checkpoint` state "
      "file) or a checkpoint prefix such as /m/model.ckpt-100."};
  app.require_subcommand(1);
  std::string path;
  std::string name;
  std::string out_path;
  int64_t limit = 20;

  CLI::App* ls = app.add_subcommand(
      "ls", "List the checkpoints of a model directory, or the tensors of a checkpoint");
  ls->add_option("PATH", path, "model directory or checkpoint prefix")->required();

  CLI::App* verify =
      app.add_subcommand("verify",
                         "Check every shard and tensor CRC of a checkpoint (or of every checkpoint "
                         "listed in a model directory)");
  verify->add_option("PATH", path, "model directory or checkpoint prefix")->required();

  CLI::App* dump = app.add_subcommand(
      "dump", "Print a tensor's dtype, shape and values (latest checkpoint of a directory)");
  dump->add_option("PATH", path, "model directory or checkpoint prefix")->required();
  dump->add_option("NAME", name, "tensor name (a partitioned tensor is assembled)")->required();
  dump->add_option("--limit", limit, "print the first N values (-1: all)")
      ->check(CLI::Validator(
          [](std::string& value) -> std::string {
            int64_t n = 0;
            if (!CLI::detail::lexical_cast(value, n) || n < -1) return "must be -1 or more";
            return "";
          },
          "-1 or more"))
      ->capture_default_str();

  CLI::App* exp = app.add_subcommand(
      "export", "Write every tensor into one safetensors file (partitioned tensors assembled)");
  exp->add_option("PATH", path, "model directory or checkpoint prefix")->required();
  exp->add_option("OUT", out_path, "output .safetensors file (written atomically)")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  absl::Status status;
  if (ls->parsed()) {
    status = tandem::ckpt::List(path, std::cout);
  } else if (verify->parsed()) {
    status = tandem::ckpt::Verify(path, std::cout);
  } else if (dump->parsed()) {
    status = tandem::ckpt::Dump(path, name, limit, std::cout);
  } else if (exp->parsed()) {
    status = tandem::ckpt::Export(path, out_path, std::cout);
  }
  std::cout.flush();
  if (!status.ok()) {
    std::cerr << "ckpt: error: " << status.message() << "\n";
    return 1;
  }
  return 0;
}
