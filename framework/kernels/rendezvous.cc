// framework/kernels/rendezvous.cc: rendezvous keys (rendezvous.h).
#include "framework/kernels/rendezvous.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "framework/core/status.h"

namespace tandem {
namespace {

absl::Status BadKey(absl::string_view key, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("malformed rendezvous key '", key, "': ", why,
                   " (expected <src_device>;<src_incarnation hex>;<dst_device>;<tensor_name>;"
                   "<frame_id>:<iter_id>)"));
}

absl::Status ParseFullDevice(absl::string_view key, absl::string_view what, absl::string_view name,
                             DeviceSpec* out) {
  auto spec = DeviceSpec::Parse(name);
  if (!spec.ok()) return BadKey(key, absl::StrCat(what, ": ", spec.status().message()));
  if (!spec->job || !spec->replica || !spec->task || !spec->type || !spec->id) {
    return BadKey(key, absl::StrCat(what, " '", name, "' is not a full device name"));
  }
  *out = *spec;
  return absl::OkStatus();
}

}  // namespace

std::string CreateRendezvousKey(absl::string_view src_device, uint64_t src_incarnation,
                                absl::string_view dst_device, absl::string_view tensor_name,
                                int64_t frame_id, int64_t iter_id) {
  return absl::StrCat(src_device, ";", absl::StrFormat("%016x", src_incarnation), ";", dst_device,
                      ";", tensor_name, ";", frame_id, ":", iter_id);
}

absl::StatusOr<ParsedKey> ParseRendezvousKey(absl::string_view key) {
  std::vector<absl::string_view> parts = absl::StrSplit(key, ';');
  if (parts.size() != 5) {
    return BadKey(key, absl::StrCat("has ", parts.size(), " ';'-separated parts, not 5"));
  }
  ParsedKey out;
  out.full_key = std::string(key);
  TANDEM_RETURN_IF_ERROR(ParseFullDevice(key, "source device", parts[0], &out.src));
  out.src_device = std::string(parts[0]);
  absl::string_view inc = parts[1];
  if (inc.empty() || inc.size() > 16 || !absl::SimpleHexAtoi(inc, &out.src_incarnation) ||
      inc.find_first_not_of("0123456789abcdefABCDEF") != absl::string_view::npos) {
    return BadKey(key, absl::StrCat("incarnation '", inc, "' is not 1-16 hex digits"));
  }
  TANDEM_RETURN_IF_ERROR(ParseFullDevice(key, "destination device", parts[2], &out.dst));
  out.dst_device = std::string(parts[2]);
  if (parts[3].empty()) return BadKey(key, "empty tensor name");
  out.edge_name = std::string(parts[3]);
  std::vector<absl::string_view> fi = absl::StrSplit(parts[4], ':');
  if (fi.size() != 2 || !absl::SimpleAtoi(fi[0], &out.frame_id) ||
      !absl::SimpleAtoi(fi[1], &out.iter_id) || out.frame_id < 0 || out.iter_id < 0) {
    return BadKey(key, absl::StrCat("frame and iteration '", parts[4], "' are not <int>:<int>"));
  }
  return out;
}

}  // namespace tandem
