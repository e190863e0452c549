// framework/distributed/collective/collective_executor.cc
//
// The group's state, the transport (push, keep until asked) and failure detection.
// The algorithms are in collective_algorithms.cc.
#include "framework/distributed/collective/collective_executor.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/env.h"
#include "framework/core/random.h"
#include "framework/core/status.h"
#include "framework/graph/device_spec.h"
#include "glog/logging.h"

namespace tandem {
namespace {

// A leader answers a pending join after this long with the members still missing, so
// that every member can say what it waits for.
constexpr int64_t kJoinReplyAfterMs = 5000;
// How long one join call waits for its answer.
constexpr int64_t kJoinCallTimeoutMs = 15000;
// Join logs what it waits for this often.
constexpr int64_t kJoinLogEveryMs = 30000;
// A health probe waits at most this long for GetStatus.
constexpr int64_t kProbeTimeoutMs = 5000;
constexpr int64_t kWatchdogTickMs = 200;

// One CollectiveData call in flight.
struct DataCall {
  WireMessage<proto::CollectiveDataRequest> request;
  WireMessage<proto::CollectiveDataResponse> response;
  CallOptions options;
};

}  // namespace

CollectiveExecutor::CollectiveExecutor(std::string task_name, uint64_t incarnation,
                                       WorkerCacheInterface* workers)
    : task_name_(std::move(task_name)), incarnation_(incarnation), workers_(workers) {
  watchdog_ = std::thread([this] { Watchdog(); });
}

CollectiveExecutor::~CollectiveExecutor() {
  Abort(absl::CancelledError("the collective executor is shutting down"), /*tell_peers=*/false,
        /*leaving=*/true);
  std::vector<Done> joiners;
  {
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;
    for (auto& [rank, j] : round_) {
      if (j.done) joiners.push_back(std::move(j.done));
    }
    round_.clear();
  }
  for (Done& d : joiners) d(absl::CancelledError("the group's leader is shutting down"));
  watchdog_.join();
  // Every RPC has a deadline, so this wait ends.
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int* n) { return *n == 0; }, &rpcs_in_flight_));
}

std::shared_ptr<void> CollectiveExecutor::RpcInFlight() {
  {
    absl::MutexLock lock(&mu_);
    ++rpcs_in_flight_;
  }
  return std::shared_ptr<void>(nullptr, [this](void*) {
    absl::MutexLock lock(&mu_);
    --rpcs_in_flight_;
  });
}
absl::Status CollectiveExecutor::Configure(CollectiveGroup group, CollectiveOptions options) {
  if (group.rank < 0 || group.rank >= static_cast<int>(group.members.size())) {
    return absl::InvalidArgumentError(absl::StrCat("collective group: rank ", group.rank,
                                                   " is not in a group of ", group.members.size()));
  }
  if (group.members[group.rank] != task_name_) {
    return absl::InvalidArgumentError(absl::StrCat("collective group: rank ", group.rank, " is ",
                                                   group.members[group.rank], ", not this task ",
                                                   task_name_));
  }
  if (options.timeout_ms <= 0 || options.piece_bytes == 0) {
    return absl::InvalidArgumentError("collective group: timeout and piece size must be positive");
  }
  absl::MutexLock lock(&mu_);
  if (configured_) {
    if (group.members == group_.members && group.rank == group_.rank) {
      options_ = options;
      return absl::OkStatus();
    }
    return absl::FailedPreconditionError("collective group: this task is already in another group");
  }
  group_ = std::move(group);
  options_ = options;
  configured_ = true;
  return absl::OkStatus();
}

bool CollectiveExecutor::configured() const {
  absl::MutexLock lock(&mu_);
  return configured_;
}
int CollectiveExecutor::rank() const {
  absl::MutexLock lock(&mu_);
  return group_.rank;
}
int CollectiveExecutor::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(group_.members.size());
}
int CollectiveExecutor::source() const {
  absl::MutexLock lock(&mu_);
  return source_;
}

std::string CollectiveExecutor::MemberName(int rank) const {
  absl::MutexLock lock(&mu_);
  return MemberNameLocked(rank);
}

std::string CollectiveExecutor::MemberNameLocked(int rank) const {
  if (rank < 0 || rank >= static_cast<int>(group_.members.size())) return "?";
  absl::StatusOr<DeviceSpec> spec = DeviceSpec::Parse(group_.members[rank]);
  if (!spec.ok() || !spec->job || !spec->task) return group_.members[rank];
  return absl::StrCat(*spec->job, ":", *spec->task);
}

// --- Forming the group -----------------------------------------------------------------

absl::StatusOr<CollectiveExecutor::Formation> CollectiveExecutor::Join(
    int64_t global_step, const std::string& fingerprint, int64_t wait_ms) {
  proto::CollectiveJoinRequest request;
  std::string leader;
  {
    absl::MutexLock lock(&mu_);
    if (!configured_) return absl::FailedPreconditionError("collective group: not configured");
    request.set_task(task_name_);
    request.set_rank(group_.rank);
    request.set_group_size(static_cast<int>(group_.members.size()));
    request.set_incarnation(incarnation_);
    request.set_global_step(global_step);
    request.set_last_generation(generation_);
    request.set_fingerprint(fingerprint);
    leader = group_.members[0];
  }
  const int64_t start = env::NowMicros();
  int64_t next_log = start + kJoinLogEveryMs * 1000;
  absl::Status last;
  while (true) {
    TANDEM_ASSIGN_OR_RETURN(WorkerInterface * w, workers_->GetWorker(leader));
    WireMessage<proto::CollectiveJoinRequest> req;
    req.proto = request;
    WireMessage<proto::CollectiveJoinResponse> resp;
    CallOptions call;
    call.set_timeout_ms(kJoinCallTimeoutMs);
    last = CallAndWait(w, &WorkerInterface::CollectiveJoinAsync, req, &resp, &call);
    if (last.ok()) {
      const proto::CollectiveJoinResponse& r = resp.proto;
      Formation f;
      f.generation = r.generation();
      f.global_steps.assign(r.global_step().begin(), r.global_step().end());
      for (size_t i = 0; i < f.global_steps.size(); ++i) {
        if (f.global_steps[i] > f.global_steps[f.source]) f.source = static_cast<int>(i);
      }
      absl::MutexLock lock(&mu_);
      if (r.incarnation_size() != static_cast<int>(group_.members.size()) ||
          r.global_step_size() != r.incarnation_size()) {
        return absl::InternalError("collective group: the leader's answer has the wrong size");
      }
      if (generation_ != 0) {
        past_generations_.push_back(generation_);
        if (past_generations_.size() > kPastGenerations) past_generations_.pop_front();
      }
      generation_ = f.generation;
      source_ = f.source;
      incarnations_.assign(r.incarnation().begin(), r.incarnation().end());
      aborted_ = absl::OkStatus();
      left_.clear();
      next_sequence_.clear();
      probing_.clear();
      for (auto it = slots_.begin(); it != slots_.end();) {
        // Data of another formation can only be stale (generations are random ids).
        it = std::get<0>(it->first) != generation_ ? slots_.erase(it) : std::next(it);
      }
      return f;
    }
    if (last.code() == absl::StatusCode::kFailedPrecondition ||
        last.code() == absl::StatusCode::kInvalidArgument ||
        last.code() == absl::StatusCode::kUnauthenticated) {
      return last;
    }
    const int64_t now = env::NowMicros();
    if (now - start >= wait_ms * 1000) {
      return absl::UnavailableError(absl::StrCat("collective group: not formed after ",
                                                 wait_ms / 1000, " s: ", last.message()));
    }
    if (now >= next_log) {
      LOG(WARNING) << "Waiting " << (now - start) / 1000000
                   << " s for the collective group to form: " << last.message();
      next_log = now + kJoinLogEveryMs * 1000;
    }
    if (last.code() != absl::StatusCode::kDeadlineExceeded &&
        last.code() != absl::StatusCode::kAborted) {
      // The leader is not up (UNAVAILABLE) or answered with who is missing: try again soon.
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  }
}

void CollectiveExecutor::HandleJoin(const proto::CollectiveJoinRequest& request,
                                    proto::CollectiveJoinResponse* response, Done done) {
  Done superseded;
  {
    absl::MutexLock lock(&mu_);
    if (!configured_ || group_.rank != 0) {
      done(absl::FailedPreconditionError(
          absl::StrCat(task_name_, " does not lead a collective group")));
      return;
    }
    const int n = static_cast<int>(group_.members.size());
    if (request.group_size() != n || request.rank() < 0 || request.rank() >= n ||
        group_.members[request.rank()] != request.task()) {
      done(absl::InvalidArgumentError(
          absl::StrCat("collective group: ", request.task(), " asked to join as rank ",
                       request.rank(), " of ", request.group_size(), ", but the leader's group is ",
                       absl::StrJoin(group_.members, ", "))));
      return;
    }
    const int r = request.rank();
    // A member that missed the answer of the round it took part in gets it now.
    if (formed_.generation() != 0 && request.last_generation() != formed_.generation() &&
        formed_.incarnation(r) == request.incarnation()) {
      *response = formed_;
      done(absl::OkStatus());
      return;
    }
    Joiner& j = round_[r];
    superseded = std::move(j.done);
    j.request = request;
    j.response = response;
    j.done = std::move(done);
    j.since_us = env::NowMicros();
  }
  if (superseded) superseded(absl::AbortedError("collective group: a newer join of the same rank"));
  JoinReply();
}

void CollectiveExecutor::JoinReply() {
  std::vector<std::pair<Done, absl::Status>> replies;
  {
    absl::MutexLock lock(&mu_);
    const int n = static_cast<int>(group_.members.size());
    if (static_cast<int>(round_.size()) < n) return;
    absl::Status s;
    for (const auto& [rank, j] : round_) {
      if (j.request.fingerprint() != round_.begin()->second.request.fingerprint()) {
        s = absl::FailedPreconditionError(absl::StrCat(
            "collective group: ", MemberNameLocked(rank), " built other collective ops (",
            j.request.fingerprint(), ") than ", MemberNameLocked(round_.begin()->first), " (",
            round_.begin()->second.request.fingerprint(),
            "): every replica must run the same model"));
      }
    }
    proto::CollectiveJoinResponse formed;
    formed.set_generation(RandomId());
    for (const auto& [rank, j] : round_) {
      formed.add_incarnation(j.request.incarnation());
      formed.add_global_step(j.request.global_step());
    }
    if (s.ok()) formed_ = formed;
    for (auto& [rank, j] : round_) {
      if (!j.done) continue;
      if (s.ok()) *j.response = formed;
      replies.emplace_back(std::move(j.done), s);
    }
    round_.clear();
  }
  for (auto& [d, s] : replies) d(s);
}

// --- Transport -------------------------------------------------------------------------

absl::StatusOr<CollectiveExecutor::Start> CollectiveExecutor::Begin(int64_t instance_key) {
  absl::MutexLock lock(&mu_);
  if (!configured_ || generation_ == 0) {
    return absl::FailedPreconditionError(
        "collective op run before the collective group was formed (a session needs "
        "SessionOptions::collective and a Join)");
  }
  if (!aborted_.ok()) return aborted_;
  Start start;
  start.generation = generation_;
  start.sequence = next_sequence_[instance_key]++;
  start.rank = group_.rank;
  start.size = static_cast<int>(group_.members.size());
  start.source = source_;
  start.options = options_;
  return start;
}

void CollectiveExecutor::Send(const Key& key, int peer, Tensor data, bool stop, Done done) {
  std::string member;
  int64_t timeout_ms;
  absl::Status left;
  {
    absl::MutexLock lock(&mu_);
    member = group_.members[peer];
    timeout_ms = options_.timeout_ms;
    if (std::get<0>(key) == generation_) left = LeftLocked(peer);
  }
  if (!left.ok()) {
    // It no longer takes part: it cannot need this, so the collective it belongs to failed.
    Abort(left);
    done(left);
    return;
  }
  absl::StatusOr<WorkerInterface*> w = workers_->GetWorker(member);
  if (!w.ok()) {
    done(w.status());
    return;
  }
  auto call = std::make_shared<DataCall>();
  proto::CollectiveDataRequest& r = call->request.proto;
  r.set_generation(std::get<0>(key));
  r.set_instance_key(std::get<1>(key));
  r.set_sequence(std::get<2>(key));
  r.set_phase(std::get<3>(key));
  r.set_piece(std::get<4>(key));
  r.set_src_rank(std::get<5>(key));
  r.set_stop_requested(stop);
  call->request.tensors.push_back(std::move(data));
  call->options.set_timeout_ms(timeout_ms);
  // A peer that just joined may be behind a connection still backing off from its
  // previous run: wait for it (a dead peer is found by the health probe instead).
  call->options.set_wait_for_ready(true);
  const int64_t wait = StartWait(peer);
  (*w)->CollectiveDataAsync(
      &call->options, &call->request, &call->response,
      [this, call, wait, peer, guard = RpcInFlight(),
       done = std::move(done)](const absl::Status& s) {
        EndWait(wait);
        if (!s.ok()) {
          absl::Status failed = absl::UnavailableError(
              absl::StrCat("collective: sending to ", MemberName(peer), " failed: ", s.message()));
          Abort(failed);
          done(failed);
          return;
        }
        done(s);
      });
}

void CollectiveExecutor::Recv(const Key& key, RecvDone done) {
  absl::Status failed;
  Tensor data;
  bool stop = false;
  {
    absl::MutexLock lock(&mu_);
    const bool current = std::get<0>(key) == generation_;
    if (current && !aborted_.ok()) {
      failed = aborted_;
    } else {
      Slot& slot = slots_[key];
      if (!slot.has_data && current) failed = LeftLocked(std::get<5>(key));
      if (!failed.ok()) {
        slots_.erase(key);  // Its data never arrived and never will.
      } else if (slot.has_data) {
        data = std::move(slot.data);
        stop = slot.stop;
        slots_.erase(key);
      } else {
        slot.waiter = std::move(done);
        slot.wait_id = next_wait_++;
        waits_[slot.wait_id] = Wait{std::get<5>(key), env::NowMicros()};
        return;
      }
    }
  }
  if (!failed.ok()) Abort(failed);
  done(failed, std::move(data), stop);
}

void CollectiveExecutor::HandleData(const WireMessage<proto::CollectiveDataRequest>& request,
                                    Done done) {
  const proto::CollectiveDataRequest& r = request.proto;
  if (!r.abort_message().empty()) {
    bool current;
    {
      absl::MutexLock lock(&mu_);
      current = configured_ && r.generation() == generation_ && r.src_rank() >= 0 &&
                r.src_rank() < static_cast<int>(group_.members.size());
    }
    done(absl::OkStatus());
    if (!current) return;
    const absl::Status ended = absl::UnavailableError(absl::StrCat(
        "collective: ", MemberName(r.src_rank()), " ended its collectives: ", r.abort_message()));
    if (r.peer_leaving()) {
      PeerLeft(r.src_rank(), ended);
    } else {
      Abort(ended, /*tell_peers=*/false, /*leaving=*/false);
    }
    return;
  }
  if (request.tensors.size() != 1 || request.tensors[0].dtype() != DType::kUInt8 ||
      request.tensors[0].rank() != 1) {
    done(absl::InvalidArgumentError("CollectiveData: expected one uint8 vector"));
    return;
  }
  const Key key{r.generation(), r.instance_key(), r.sequence(), r.phase(), r.piece(), r.src_rank()};
  RecvDone waiter;
  {
    absl::MutexLock lock(&mu_);
    if (!configured_ || r.src_rank() < 0 ||
        r.src_rank() >= static_cast<int>(group_.members.size()) || r.src_rank() == group_.rank) {
      done(absl::InvalidArgumentError(absl::StrCat("CollectiveData: source rank ", r.src_rank(),
                                                   " is not a peer of ", task_name_)));
      return;
    }
    if (r.generation() != generation_ &&
        std::find(past_generations_.begin(), past_generations_.end(), r.generation()) !=
            past_generations_.end()) {
      done(absl::AbortedError(absl::StrCat("CollectiveData: ", task_name_,
                                           " has left that formation of the collective group")));
      return;
    }
    Slot& slot = slots_[key];
    if (slot.has_data) {
      done(absl::AlreadyExistsError("CollectiveData: this piece arrived twice"));
      return;
    }
    if (slot.waiter) {
      waiter = std::move(slot.waiter);
      waits_.erase(slot.wait_id);
      slots_.erase(key);
    } else {
      slot.has_data = true;
      slot.data = request.tensors[0];
      slot.stop = r.stop_requested();
    }
  }
  done(absl::OkStatus());
  if (waiter) waiter(absl::OkStatus(), request.tensors[0], r.stop_requested());
}

int64_t CollectiveExecutor::StartWait(int peer) {
  absl::MutexLock lock(&mu_);
  const int64_t id = next_wait_++;
  waits_[id] = Wait{peer, env::NowMicros()};
  return id;
}

void CollectiveExecutor::EndWait(int64_t id) {
  absl::MutexLock lock(&mu_);
  waits_.erase(id);
}

absl::Status CollectiveExecutor::LeftLocked(int peer) const {
  auto it = left_.find(peer);
  return it == left_.end() ? absl::OkStatus() : it->second;
}

void CollectiveExecutor::PeerLeft(int peer, const absl::Status& status) {
  bool waited_on = false;
  {
    absl::MutexLock lock(&mu_);
    if (!aborted_.ok()) return;
    left_.emplace(peer, status);
    for (const auto& [key, slot] : slots_) {
      if (std::get<0>(key) == generation_ && std::get<5>(key) == peer && slot.waiter) {
        waited_on = true;
      }
    }
  }
  if (waited_on) {
    Abort(status);
  } else {
    LOG(INFO) << "Collective group: " << MemberName(peer) << " left: " << status.message();
  }
}

void CollectiveExecutor::Abort(const absl::Status& status, bool tell_peers, bool leaving) {
  std::vector<RecvDone> waiters;
  std::vector<std::string> peers;
  uint64_t generation;
  int rank;
  {
    absl::MutexLock lock(&mu_);
    if (!aborted_.ok()) return;
    aborted_ = status;
    generation = generation_;
    rank = group_.rank;
    if (tell_peers && generation_ != 0) {
      for (int r = 0; r < static_cast<int>(group_.members.size()); ++r) {
        if (r != group_.rank) peers.push_back(group_.members[r]);
      }
    }
    for (auto it = slots_.begin(); it != slots_.end();) {
      if (std::get<0>(it->first) == generation_ && it->second.waiter) {
        waiters.push_back(std::move(it->second.waiter));
        waits_.erase(it->second.wait_id);
        it = slots_.erase(it);
      } else {
        ++it;
      }
    }
  }
  // A member that leaves is routine. A peer that failed fails this member's next step
  // even when none of its collectives was waiting yet, so that is logged as a failure.
  if (generation != 0 && !leaving) {
    LOG(WARNING) << "Collective group aborted: " << status;
  } else if (generation != 0) {
    LOG(INFO) << "Collective group closed: " << status.message();
  }
  for (RecvDone& w : waiters) w(status, Tensor(), false);
  for (const std::string& peer : peers) {
    absl::StatusOr<WorkerInterface*> w = workers_->GetWorker(peer);
    if (!w.ok()) continue;
    auto call = std::make_shared<DataCall>();
    call->request.proto.set_generation(generation);
    call->request.proto.set_src_rank(rank);
    call->request.proto.set_abort_message(std::string(status.message()));
    call->request.proto.set_peer_leaving(leaving);
    call->options.set_timeout_ms(kProbeTimeoutMs);
    call->options.set_wait_for_ready(true);
    (*w)->CollectiveDataAsync(&call->options, &call->request, &call->response,
                              [call, guard = RpcInFlight()](const absl::Status&) {});
  }
}

// --- Failure detection -----------------------------------------------------------------

void CollectiveExecutor::Watchdog() {
  absl::MutexLock lock(&mu_);
  while (!shutting_down_) {
    mu_.AwaitWithTimeout(absl::Condition(&shutting_down_), absl::Milliseconds(kWatchdogTickMs));
    if (shutting_down_) break;
    const int64_t now = env::NowMicros();
    std::vector<int> probe;
    std::optional<std::pair<int, int64_t>> overdue;
    for (const auto& [id, w] : waits_) {
      const int64_t waited_ms = (now - w.since_us) / 1000;
      if (waited_ms >= options_.timeout_ms) {
        overdue = {w.peer, waited_ms};
        break;
      }
      if (waited_ms >= options_.probe_after_ms && !probing_.count(w.peer) &&
          w.peer < static_cast<int>(incarnations_.size())) {
        probing_[w.peer] = now;
        probe.push_back(w.peer);
      }
    }
    std::vector<Done> missing_replies;
    std::string missing;
    if (!round_.empty()) {
      std::vector<std::string> names;
      for (int r = 0; r < static_cast<int>(group_.members.size()); ++r) {
        if (!round_.count(r)) names.push_back(MemberNameLocked(r));
      }
      missing = absl::StrJoin(names, ", ");
      for (auto& [rank, j] : round_) {
        if (j.done && (now - j.since_us) / 1000 >= kJoinReplyAfterMs) {
          missing_replies.push_back(std::move(j.done));
        }
      }
    }
    mu_.Unlock();
    for (Done& d : missing_replies) {
      d(absl::UnavailableError(absl::StrCat("waiting for ", missing, " to join")));
    }
    if (overdue) {
      Abort(absl::UnavailableError(absl::StrCat("collective: ", MemberName(overdue->first),
                                                " has not answered for ", overdue->second / 1000,
                                                " s ([distribute] collective_timeout_secs)")));
    }
    for (int peer : probe) Probe(peer);
    mu_.Lock();
  }
}

void CollectiveExecutor::Probe(int peer) {
  std::string member;
  uint64_t generation;
  {
    absl::MutexLock lock(&mu_);
    member = group_.members[peer];
    generation = generation_;
  }
  absl::StatusOr<WorkerInterface*> w = workers_->GetWorker(member);
  if (!w.ok()) return;
  struct Call {
    WireMessage<proto::GetStatusRequest> request;
    WireMessage<proto::GetStatusResponse> response;
    CallOptions options;
  };
  auto call = std::make_shared<Call>();
  call->options.set_timeout_ms(kProbeTimeoutMs);
  (*w)->GetStatusAsync(
      &call->options, &call->request, &call->response,
      [this, call, peer, generation, guard = RpcInFlight()](const absl::Status& s) {
        absl::Status verdict;
        {
          absl::MutexLock lock(&mu_);
          probing_.erase(peer);
          if (generation != generation_) return;
          if (!s.ok()) {
            verdict = absl::UnavailableError(
                absl::StrCat("collective: ", MemberNameLocked(peer),
                             " does not answer its health check: ", s.message()));
          } else {
            bool same = false;
            for (const auto& d : call->response.proto.device()) {
              if (d.incarnation() == incarnations_[peer]) same = true;
            }
            if (!same) {
              verdict = absl::UnavailableError(absl::StrCat("collective: ", MemberNameLocked(peer),
                                                            " restarted since the group formed"));
            }
          }
        }
        if (!verdict.ok()) Abort(verdict);
      });
}

}  // namespace tandem
