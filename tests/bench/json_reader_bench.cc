// json_reader_bench: how fast a REST :predict body becomes a float tensor with
// tandem's JSON reader (serving/rest_json_reader.h, simdjson's DOM parser behind
// JsonDocument), against simdjson used directly and nlohmann::json.
//
// Bodies are what a client of the Fashion-MNIST models sends (as serving_bench's):
// inputs "image" float32 [-1, 784], pixel / 255 written as JSON doubles by nlohmann
// (17 significant digits), 1, 32 and 256 examples, in the row form
// {"instances": [[784 numbers], ...]} and the columnar form {"inputs": [[...], ...]};
// --short_numbers writes the pixels as integers 0..255 instead.
//
// Rows per body, each the median time of one body over --rounds rounds (in each
// round the readers take turns, so a busy spell of a shared machine hits them all):
//   predict request        serving::ParsePredictRequest, what the server runs (depth
//                          scan, parse, generic decode with positions for errors)
//   JsonDocument           JsonDocument::Parse + the decode below
//   simdjson DOM           dom::parser::parse with one parser reused for every body
//                          + the same decode over dom::element: what JsonDocument
//                          costs over simdjson itself
//   simdjson On-Demand     ondemand::parser::iterate, floats stored as they are read
//                          (validates only what it visits; without -mavx2 its inline
//                          code is simdjson's scalar fallback kernel)
//   parse only: JsonDocument / simdjson DOM / nlohmann   the parse without a decode
// The decode is what ParsePredictRequest does for this signature, without its
// generality: find the last "instances" (or "inputs") member, check every list has
// 784 numbers, refuse numbers beyond float32's range, store floats. Every reader's
// tensor is checked equal to ParsePredictRequest's before timing.
//
// Before simdjson, JsonDocument was a hand-written tokenizer. Commit dfc535c, which
// added this bench, still has it: its message gives the figures (the tokenizer took
// about twice simdjson's time on every body), and building it reruns them.
#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "glog/logging.h"
#include "nlohmann/json.hpp"
#include "serving/rest_json.h"
#include "serving/rest_json_reader.h"
#include "simdjson.h"

namespace tandem {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kPixels = 784;

std::string MakeBody(const char* key, int batch, bool short_numbers, std::mt19937* rng) {
  nlohmann::json rows = nlohmann::json::array();
  for (int r = 0; r < batch; ++r) {
    nlohmann::json row = nlohmann::json::array();
    for (int64_t k = 0; k < kPixels; ++k) {
      const int pixel = static_cast<int>((*rng)() % 256);
      if (short_numbers) {
        row.push_back(pixel);
      } else {
        row.push_back(static_cast<double>(static_cast<float>(pixel) / 255.0f));
      }
    }
    rows.push_back(row);
  }
  return nlohmann::json({{key, rows}}).dump();
}

// The decode shared by the JsonDocument and simdjson DOM rows: `rows` must be a list of
// lists of kPixels numbers each within float32's range.
bool StoreFloat(double d, float* out) {
  if (std::isfinite(d) && std::fabs(d) > FLT_MAX) return false;
  *out = static_cast<float>(d);
  return true;
}

bool DecodeJsonDocument(absl::string_view body, const char* key, std::vector<float>* out) {
  absl::StatusOr<serving::JsonDocument> doc = serving::JsonDocument::Parse(body, 64);
  if (!doc.ok()) return false;
  const std::optional<serving::JsonValue> rows = doc->root().Find(key);
  if (!rows || !rows->is_array() || rows->empty()) return false;
  out->resize(rows->size() * kPixels);
  float* dst = out->data();
  serving::JsonValue row = rows->first();
  for (size_t r = 0; r < rows->size(); ++r) {
    if (r > 0) row = row.next();
    if (!row.is_array() || static_cast<int64_t>(row.size()) != kPixels) return false;
    serving::JsonValue v = row.first();
    for (int64_t k = 0; k < kPixels; ++k) {
      if (k > 0) v = v.next();
      if (!v.is_number() || !StoreFloat(v.number(), dst++)) return false;
    }
  }
  return true;
}

bool DecodeSimdjsonDom(simdjson::dom::parser& parser, absl::string_view body, const char* key,
                       std::vector<float>* out) {
  simdjson::dom::element root;
  if (parser.parse(body.data(), body.size()).get(root)) return false;
  simdjson::dom::object object;
  if (root.get_object().get(object)) return false;
  simdjson::dom::element found;
  bool has = false;
  for (simdjson::dom::key_value_pair member : object) {  // The last of a name, as nlohmann.
    if (member.key == key) {
      found = member.value;
      has = true;
    }
  }
  simdjson::dom::array rows;
  if (!has || found.get_array().get(rows) || rows.size() == 0) return false;
  out->resize(rows.size() * kPixels);
  float* dst = out->data();
  for (simdjson::dom::element row_value : rows) {
    simdjson::dom::array row;
    if (row_value.get_array().get(row) || static_cast<int64_t>(row.size()) != kPixels) {
      return false;
    }
    for (simdjson::dom::element v : row) {
      double d;
      if (v.get_double().get(d) || !StoreFloat(d, dst++)) return false;
    }
  }
  return true;
}

bool DecodeSimdjsonOnDemand(simdjson::ondemand::parser& parser, const simdjson::padded_string& body,
                            const char* key, std::vector<float>* out) {
  simdjson::ondemand::document doc;
  if (parser.iterate(body).get(doc)) return false;
  simdjson::ondemand::object object;
  if (doc.get_object().get(object)) return false;
  out->clear();
  bool has = false;
  for (auto field : object) {
    std::string_view name;
    if (field.unescaped_key().get(name)) return false;
    if (name != key) continue;
    simdjson::ondemand::array rows;
    if (field.value().get_array().get(rows)) return false;
    has = true;
    out->clear();
    for (auto row_value : rows) {
      simdjson::ondemand::array row;
      if (row_value.get_array().get(row)) return false;
      int64_t k = 0;
      for (auto v : row) {
        double d;
        float f;
        if (v.get_double().get(d) || !StoreFloat(d, &f)) return false;
        out->push_back(f);
        ++k;
      }
      if (k != kPixels) return false;
    }
  }
  return has && !out->empty();
}

struct Reader {
  const char* name;
  std::function<bool()> fn;
};

// Median seconds per call of each reader over `rounds` rounds; in each round every
// reader runs for about `round_seconds` in turn, so that a slow spell of a shared
// machine falls on all of them.
std::vector<double> TimeAll(const std::vector<Reader>& readers, int rounds, double round_seconds) {
  std::vector<int> iters;
  for (const Reader& r : readers) {  // Size a round.
    int n = 1;
    for (;;) {
      const Clock::time_point t0 = Clock::now();
      for (int i = 0; i < n; ++i) CHECK(r.fn()) << r.name;
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      if (s >= round_seconds / 4) {
        iters.push_back(std::max(1, static_cast<int>(n * round_seconds / s)));
        break;
      }
      n *= 2;
    }
  }
  std::vector<std::vector<double>> per_call(readers.size());
  for (int round = 0; round < rounds; ++round) {
    for (size_t r = 0; r < readers.size(); ++r) {
      const Clock::time_point t0 = Clock::now();
      for (int i = 0; i < iters[r]; ++i) readers[r].fn();
      per_call[r].push_back(std::chrono::duration<double>(Clock::now() - t0).count() / iters[r]);
    }
  }
  std::vector<double> medians;
  for (std::vector<double>& v : per_call) {
    std::sort(v.begin(), v.end());
    medians.push_back(v[v.size() / 2]);
  }
  return medians;
}

int Main(int argc, char** argv) {
  CLI::App app{"tandem's JSON reader (JsonDocument) vs simdjson and nlohmann on :predict bodies."};
  int rounds = 7;
  double round_seconds = 0.2;
  bool short_numbers = false;
  app.add_option("--rounds", rounds, "timed rounds per row (the median is printed)")
      ->capture_default_str();
  app.add_option("--round_seconds", round_seconds, "seconds per round")->capture_default_str();
  app.add_flag("--short_numbers", short_numbers, "pixels as integers 0..255, not x / 255");
  CLI11_PARSE(app, argc, argv);

  serving::Signature signature;
  signature.inputs["image"] = {"input/image:0", DType::kFloat, PartialShape({-1, kPixels})};
  const serving::RestLimits limits;
  simdjson::dom::parser dom_parser;
  simdjson::ondemand::parser ondemand_parser;

  std::printf(
      "json_reader_bench: simdjson %d.%d.%d (DOM: %s kernel, On-Demand: %s), %s numbers, median of "
      "%d rounds\n",
      static_cast<int>(simdjson::SIMDJSON_VERSION_MAJOR),
      static_cast<int>(simdjson::SIMDJSON_VERSION_MINOR),
      static_cast<int>(simdjson::SIMDJSON_VERSION_REVISION),
      simdjson::get_active_implementation()->name().c_str(),
      simdjson::builtin_implementation()->name().c_str(),
      short_numbers ? "integer 0..255" : "x/255 double", rounds);
  std::printf("%-26s %-26s %9s %9s %14s\n", "body", "reader", "us/body", "MB/s", "vs JsonDocument");
  std::mt19937 rng(1);
  for (const char* key : {"instances", "inputs"}) {
    for (int batch : {1, 32, 256}) {
      const std::string body = MakeBody(key, batch, short_numbers, &rng);
      const simdjson::padded_string padded(body);
      absl::StatusOr<serving::PredictRequest> want =
          serving::ParsePredictRequest(body, signature, limits);
      CHECK(want.ok());
      const Tensor& t = want->inputs.at("image");
      const std::vector<float> expected(t.data<float>(), t.data<float>() + t.NumElements());
      std::vector<float> out;
      CHECK(DecodeJsonDocument(body, key, &out) && out == expected);
      CHECK(DecodeSimdjsonDom(dom_parser, body, key, &out) && out == expected);
      CHECK(DecodeSimdjsonOnDemand(ondemand_parser, padded, key, &out) && out == expected);

      const std::vector<Reader> readers = {
          {"predict request",
           [&] { return serving::ParsePredictRequest(body, signature, limits).ok(); }},
          {"JsonDocument", [&] { return DecodeJsonDocument(body, key, &out); }},
          {"simdjson DOM", [&] { return DecodeSimdjsonDom(dom_parser, body, key, &out); }},
          {"simdjson On-Demand",
           [&] { return DecodeSimdjsonOnDemand(ondemand_parser, padded, key, &out); }},
          {"parse only: JsonDocument", [&] { return serving::JsonDocument::Parse(body, 64).ok(); }},
          {"parse only: simdjson DOM",
           [&] { return dom_parser.parse(body.data(), body.size()).error() == simdjson::SUCCESS; }},
          {"parse only: nlohmann",
           [&] { return !nlohmann::json::parse(body, nullptr, false).is_discarded(); }},
      };
      const std::string name = absl::StrCat(key, " x", batch, " (", body.size() / 1024, " KiB)");
      const std::vector<double> seconds = TimeAll(readers, rounds, round_seconds);
      for (size_t r = 0; r < readers.size(); ++r) {
        // The ratio to the JsonDocument row of its kind (full read or parse only).
        const bool parse_only = std::strncmp(readers[r].name, "parse only", 10) == 0;
        const double base = r == 0 ? 0 : parse_only ? seconds[4] : seconds[1];
        std::printf("%-26s %-26s %9.1f %9.0f %s\n", name.c_str(), readers[r].name, seconds[r] * 1e6,
                    static_cast<double>(body.size()) / seconds[r] / 1e6,
                    base > 0 ? absl::StrFormat("%14.2f", seconds[r] / base).c_str() : "");
      }
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) { return tandem::Main(argc, argv); }
