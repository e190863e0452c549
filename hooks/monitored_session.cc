// hooks/monitored_session.cc
#include "hooks/monitored_session.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/status.h"
#include "framework/core/termination.h"
#include "glog/logging.h"
#include "hooks/checkpoint_saver_hook.h"
#include "hooks/logging_hooks.h"
#include "hooks/summary_saver_hook.h"

namespace tandem {
namespace {

// "node" and "node:0" name the same tensor.
std::string CanonicalTensorName(const std::string& name) {
  std::string node;
  int index = 0;
  bool control = false;
  if (!ParseTensorName(name, &node, &index, &control) || control) return name;
  return absl::StrCat(node, ":", index);
}

// "a, b, c" for the first `max` names, then "... (N more)".
std::string JoinFirst(const std::vector<std::string>& names, size_t max) {
  std::vector<std::string> shown(names.begin(), names.begin() + std::min(max, names.size()));
  std::string out = absl::StrJoin(shown, ", ");
  if (names.size() > max) absl::StrAppend(&out, ", ... (", names.size() - max, " more)");
  return out;
}

// Finalises the scaffold (creating a default one if needed) and creates a session for
// the graph through the options' factory.
absl::StatusOr<std::unique_ptr<Session>> NewSessionForGraph(SessionCreatorOptions& options,
                                                            Graph* graph) {
  if (graph == nullptr) return absl::InvalidArgumentError("CreateSession: null graph");
  if (options.scaffold == nullptr) options.scaffold = std::make_shared<Scaffold>();
  TANDEM_RETURN_IF_ERROR(options.scaffold->Finalize(graph));
  proto::GraphDef def;
  graph->ToGraphDef(&def);
  SessionFactory factory = options.factory ? options.factory : DefaultSessionFactory();
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, factory(def, options.session_options));
  if (session == nullptr) return absl::InternalError("CreateSession: the factory returned null");
  return session;
}

absl::Status RunLocalInitOp(Session* session, const Scaffold& scaffold) {
  if (scaffold.local_init_op().empty()) return absl::OkStatus();
  VLOG(1) << "Running local_init_op.";
  absl::StatusOr<std::vector<Tensor>> out = session->Run({}, {}, {scaffold.local_init_op()});
  if (!out.ok()) return AnnotateStatus(out.status(), "running local_init_op");
  return absl::OkStatus();
}

// Closes `session` (logging a failure) and returns `status`.
absl::Status CloseAndReturn(Session* session, absl::Status status) {
  absl::Status closed = session->Close();
  if (!closed.ok()) LOG(WARNING) << "Closing a session that failed to start: " << closed;
  return status;
}

}  // namespace

bool IsLostTaskError(const absl::Status& s) { return absl::IsAborted(s) || absl::IsUnavailable(s); }

bool IsRecoverableStepError(const absl::Status& s) {
  return IsLostTaskError(s) || absl::IsDeadlineExceeded(s);
}

SessionFactory DefaultSessionFactory() {
  return [](const proto::GraphDef& def,
            const SessionOptions& options) -> absl::StatusOr<std::unique_ptr<Session>> {
    if (!options.target.empty()) {
      return absl::UnimplementedError(
          absl::StrCat("DefaultSessionFactory creates in-process sessions only; target '",
                       options.target, "' needs a SessionFactory that creates remote sessions"));
    }
    return NewDirectSession(def, options);
  };
}

// ---------------------------------------------------------------------------------------
// ChiefSessionCreator

ChiefSessionCreator::ChiefSessionCreator(SessionCreatorOptions options, std::string checkpoint_dir,
                                         std::string checkpoint_filename_with_path)
    : options_(std::move(options)),
      checkpoint_dir_(std::move(checkpoint_dir)),
      checkpoint_filename_with_path_(std::move(checkpoint_filename_with_path)) {}

absl::StatusOr<std::unique_ptr<Session>> ChiefSessionCreator::CreateSession(Graph* graph) {
  restored_from_.clear();
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, NewSessionForGraph(options_, graph));
  const Scaffold& scaffold = *options_.scaffold;
  checkpoint::Saver* saver = scaffold.saver();
  const bool want_restore = !checkpoint_filename_with_path_.empty() || !checkpoint_dir_.empty();
  if (want_restore && saver == nullptr) {
    return CloseAndReturn(session.get(), absl::FailedPreconditionError(
                                             "ChiefSessionCreator: the scaffold has no saver"));
  }

  std::string restored;
  if (options_.keep_ready_variables) {
    absl::StatusOr<std::vector<std::string>> uninitialized =
        scaffold.UninitializedVariables(session.get());
    if (!uninitialized.ok()) return CloseAndReturn(session.get(), uninitialized.status());
    if (uninitialized->empty()) {
      LOG(INFO) << "Every variable is initialised (the ps tasks kept them): continuing with "
                   "their values, not restoring a checkpoint";
      LOG(INFO) << "event=model_ready source=ps";
      absl::Status s = RunLocalInitOp(session.get(), scaffold);
      if (!s.ok()) return CloseAndReturn(session.get(), s);
      return session;
    }
  }
  if (!checkpoint_filename_with_path_.empty()) {
    LOG(INFO) << "Restoring parameters from " << checkpoint_filename_with_path_;
    absl::Status s = saver->Restore(session.get(), checkpoint_filename_with_path_);
    if (!s.ok()) return CloseAndReturn(session.get(), s);
    restored = checkpoint_filename_with_path_;
  } else if (!checkpoint_dir_.empty()) {
    absl::StatusOr<std::string> prefix =
        saver->RestoreLatest(session.get(), checkpoint_dir_, options_.set_aside_unreadable);
    if (prefix.ok()) {
      LOG(INFO) << "Restoring parameters from " << *prefix;
      restored = *prefix;
    } else if (checkpoint::IsNoCheckpoint(prefix.status())) {
      // No checkpoint yet: initialise below. (A checkpoint that lacks one of the
      // model's variables is also NOT_FOUND, but is an error, returned below.)
      LOG(INFO) << "No checkpoint in " << checkpoint_dir_ << "; initializing variables";
    } else {
      return CloseAndReturn(session.get(), prefix.status());
    }
  }

  if (restored.empty()) {
    LOG(INFO) << "Running init_op";
    if (!scaffold.init_op().empty()) {
      absl::StatusOr<std::vector<Tensor>> out =
          session->Run(scaffold.init_feed(), {}, {scaffold.init_op()});
      if (!out.ok()) {
        return CloseAndReturn(session.get(), AnnotateStatus(out.status(), "running init_op"));
      }
    }
    if (scaffold.init_fn()) {
      absl::Status s = scaffold.init_fn()(session.get());
      if (!s.ok()) return CloseAndReturn(session.get(), AnnotateStatus(s, "running init_fn"));
    }
  }
  absl::StatusOr<std::vector<std::string>> uninitialized =
      scaffold.UninitializedVariables(session.get());
  if (!uninitialized.ok()) return CloseAndReturn(session.get(), uninitialized.status());
  if (!uninitialized->empty()) {
    return CloseAndReturn(session.get(),
                          absl::FailedPreconditionError(absl::StrCat(
                              restored.empty() ? "Init operations did not make the model ready"
                                               : absl::StrCat("Restoring ", restored,
                                                              " did not make the model ready"),
                              "; uninitialized variables: ", JoinFirst(*uninitialized, 10))));
  }
  absl::Status s = RunLocalInitOp(session.get(), scaffold);
  if (!s.ok()) return CloseAndReturn(session.get(), s);
  restored_from_ = restored;
  LOG(INFO) << "event=model_ready source="
            << (restored.empty() ? "init" : absl::StrCat("checkpoint checkpoint=", restored));
  return session;
}

// ---------------------------------------------------------------------------------------
// WorkerSessionCreator

WorkerSessionCreator::WorkerSessionCreator(SessionCreatorOptions options, double max_wait_secs,
                                           double poll_secs)
    : options_(std::move(options)), max_wait_secs_(max_wait_secs), poll_secs_(poll_secs) {}

absl::StatusOr<std::unique_ptr<Session>> WorkerSessionCreator::CreateSession(Graph* graph) {
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, NewSessionForGraph(options_, graph));
  const Scaffold& scaffold = *options_.scaffold;
  if (options_.before_ready_wait) {
    absl::Status s = options_.before_ready_wait(session.get());
    if (!s.ok()) return CloseAndReturn(session.get(), s);
  }
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  while (true) {
    absl::StatusOr<std::vector<std::string>> uninitialized =
        scaffold.UninitializedVariables(session.get());
    if (!uninitialized.ok()) return CloseAndReturn(session.get(), uninitialized.status());
    if (uninitialized->empty()) break;
    if (termination::Requested()) {
      return CloseAndReturn(
          session.get(), absl::CancelledError("stopped while waiting for the model to be ready"));
    }
    const double waited = elapsed();
    if (waited >= max_wait_secs_) {
      return CloseAndReturn(
          session.get(),
          absl::DeadlineExceededError(absl::StrCat(
              "Session was not ready after waiting ", waited, " secs (max_wait_secs ",
              max_wait_secs_, "); uninitialized variables: ", JoinFirst(*uninitialized, 10))));
    }
    LOG(INFO) << "Waiting for model to be ready; uninitialized variables: "
              << JoinFirst(*uninitialized, 10);
    const double sleep = std::max(0.0, std::min(poll_secs_, max_wait_secs_ - waited));
    std::this_thread::sleep_for(std::chrono::duration<double>(sleep));
  }
  absl::Status s = RunLocalInitOp(session.get(), scaffold);
  if (!s.ok()) return CloseAndReturn(session.get(), s);
  return session;
}

// ---------------------------------------------------------------------------------------
// MonitoredSession

MonitoredSession::MonitoredSession(Graph* graph, std::unique_ptr<SessionCreator> creator,
                                   std::vector<std::shared_ptr<SessionRunHook>> hooks,
                                   RecoveryPolicy recovery)
    : graph_(graph),
      creator_(std::move(creator)),
      hooks_(std::move(hooks)),
      recovery_(std::move(recovery)) {}

MonitoredSession::~MonitoredSession() {
  if (closed_ || session_ == nullptr) return;
  absl::Status s = session_->Close();
  if (!s.ok()) LOG(WARNING) << "Closing the session of an unclosed MonitoredSession: " << s;
}

absl::StatusOr<std::unique_ptr<MonitoredSession>> MonitoredSession::Create(
    Graph* graph, std::unique_ptr<SessionCreator> creator,
    std::vector<std::shared_ptr<SessionRunHook>> hooks, RecoveryPolicy recovery) {
  if (graph == nullptr) return absl::InvalidArgumentError("MonitoredSession: null graph");
  if (creator == nullptr) return absl::InvalidArgumentError("MonitoredSession: null creator");
  for (const auto& hook : hooks) {
    if (hook == nullptr) return absl::InvalidArgumentError("MonitoredSession: null hook");
  }
  for (const auto& hook : hooks) TANDEM_RETURN_IF_ERROR(hook->Begin(graph));
  std::unique_ptr<MonitoredSession> ms(
      new MonitoredSession(graph, std::move(creator), std::move(hooks), std::move(recovery)));
  absl::Status created = ms->CreateWithRetries();
  if (!created.ok() && !ms->finished_elsewhere_) return created;
  return ms;
}

absl::Status MonitoredSession::CreateWithRetries() {
  const int attempts = std::max(1, recovery_.create_attempts);
  for (int attempt = 1;; ++attempt) {
    absl::Status s = CreateAndNotify();
    if (s.ok() || !IsLostTaskError(s) || EndedElsewhere()) return s;
    if (attempt >= attempts || termination::Requested()) return s;
    LOG(WARNING) << "Creating the session failed (attempt " << attempt << " of " << attempts
                 << "), retrying in a second: " << s;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

bool MonitoredSession::EndedElsewhere() {
  if (finished_elsewhere_) return true;
  if (!recovery_.finished_elsewhere || !recovery_.finished_elsewhere()) return false;
  finished_elsewhere_ = true;
  stop_requested_ = true;
  return true;
}

bool MonitoredSession::MayRetry(const absl::Status& s) {
  if (EndedElsewhere()) return false;
  if (++consecutive_failures_ > recovery_.max_consecutive_failures) {
    LOG(WARNING) << "MonitoredSession: " << recovery_.max_consecutive_failures
                 << " failed steps in a row; giving up after: " << s;
    return false;
  }
  return true;
}

absl::Status MonitoredSession::Recover(const absl::Status& s) {
  if (session_ != nullptr) {
    absl::Status closed = session_->Close();
    if (!closed.ok()) LOG(WARNING) << "Closing the failed session: " << closed;
    session_.reset();
  }
  if (!MayRetry(s)) return s;
  recovered_ = true;
  LOG(WARNING) << "MonitoredSession: recreating the session after: " << s;
  absl::Status created = CreateWithRetries();
  if (created.ok()) {
    ++recoveries_;
    LOG(INFO) << "event=session_recreated after=" << absl::StatusCodeToString(s.code())
              << " recoveries=" << recoveries_;
    return s;
  }
  if (!IsLostTaskError(created)) {
    failed_ = true;
    recovered_ = false;
  }
  return AnnotateStatus(created,
                        absl::StrCat("recreating the session after \"", s.message(), "\""));
}

absl::Status MonitoredSession::CreateAndNotify() {
  TANDEM_ASSIGN_OR_RETURN(session_, creator_->CreateSession(graph_));
  for (const auto& hook : hooks_) {
    absl::Status s = hook->AfterCreateSession(session_.get());
    if (!s.ok()) {
      absl::Status closed = session_->Close();
      if (!closed.ok()) LOG(WARNING) << "Closing the session after a hook failed: " << closed;
      session_.reset();
      return s;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Tensor>> MonitoredSession::Run(const SessionRunRequest& request) {
  if (closed_) return absl::FailedPreconditionError("MonitoredSession::Run after Close");
  recovered_ = false;
  if (finished_elsewhere_) {
    return absl::FailedPreconditionError("MonitoredSession::Run: training ended on another task");
  }
  if (session_ == nullptr) {
    // A previous recovery could not create the session: try again.
    absl::Status s = CreateWithRetries();
    if (!s.ok()) {
      if (IsLostTaskError(s)) {
        recovered_ = MayRetry(s);
      } else {
        failed_ = true;
      }
      return s;
    }
    ++recoveries_;
  }

  SessionRunContext context(&request, session_.get());
  // One merged step: fetches deduplicated by tensor, targets by node; a tensor may be
  // fed by one party only.
  std::vector<std::string> fetches;
  absl::flat_hash_map<std::string, size_t> fetch_index;
  const auto add_fetch = [&](const std::string& name) {
    auto [it, inserted] = fetch_index.emplace(CanonicalTensorName(name), fetches.size());
    if (inserted) fetches.push_back(name);
    return it->second;
  };
  std::vector<std::string> targets;
  absl::flat_hash_set<std::string> target_set;
  const auto add_targets = [&](const std::vector<std::string>& names) {
    for (const std::string& t : names) {
      if (target_set.insert(t).second) targets.push_back(t);
    }
  };
  FeedMap feeds;
  absl::flat_hash_map<std::string, std::string> feeder;  // Tensor -> who feeds it.
  const auto add_feeds = [&](const FeedMap& more, const std::string& who) -> absl::Status {
    for (const auto& [name, value] : more) {
      const std::string tensor = CanonicalTensorName(name);
      auto [it, inserted] = feeder.emplace(tensor, who);
      if (!inserted) {
        return absl::InvalidArgumentError(absl::StrCat("MonitoredSession::Run: tensor ", tensor,
                                                       " is fed twice (by ", it->second, " and by ",
                                                       who, ")"));
      }
      feeds.emplace_back(name, value);
    }
    return absl::OkStatus();
  };

  // The error of any phase: ABORTED/UNAVAILABLE/DEADLINE_EXCEEDED go to the recovery
  // policy (and are still returned); any other error but OUT_OF_RANGE marks the
  // session failed (no End).
  const auto fail = [&](absl::Status s) -> absl::Status {
    if (IsRecoverableStepError(s)) return Recover(s);
    // As TensorFlow: running off the end of the input is a normal end of training.
    if (!absl::IsOutOfRange(s)) failed_ = true;
    return s;
  };

  std::vector<size_t> caller_index;
  for (const std::string& f : request.fetches) caller_index.push_back(add_fetch(f));
  add_targets(request.targets);
  if (absl::Status s = add_feeds(request.feeds, "the caller"); !s.ok()) return fail(s);

  std::vector<std::vector<size_t>> hook_index(hooks_.size());
  bool trace = false;
  for (size_t h = 0; h < hooks_.size(); ++h) {
    absl::StatusOr<SessionRunArgs> args = hooks_[h]->BeforeRun(context);
    if (!args.ok()) return fail(args.status());
    for (const std::string& f : args->fetches) hook_index[h].push_back(add_fetch(f));
    add_targets(args->targets);
    if (absl::Status s = add_feeds(args->feeds, absl::StrCat("hook #", h)); !s.ok()) {
      return fail(s);
    }
    trace = trace || args->trace;
  }

  RunOptions options;
  options.trace = trace;
  RunMetadata metadata;
  absl::StatusOr<std::vector<Tensor>> outputs =
      session_->Run(feeds, fetches, targets, options, trace ? &metadata : nullptr);
  if (!outputs.ok()) return fail(outputs.status());
  if (outputs->size() != fetches.size()) {
    return fail(
        absl::InternalError(absl::StrCat("MonitoredSession: the session returned ", outputs->size(),
                                         " values for ", fetches.size(), " fetches")));
  }

  for (size_t h = 0; h < hooks_.size(); ++h) {
    SessionRunValues values;
    values.results.reserve(hook_index[h].size());
    for (size_t i : hook_index[h]) values.results.push_back((*outputs)[i]);
    if (trace) values.run_metadata = metadata;
    absl::Status s = hooks_[h]->AfterRun(context, values);
    if (!s.ok()) return fail(s);
  }
  if (context.stop_requested()) stop_requested_ = true;
  consecutive_failures_ = 0;

  std::vector<Tensor> result;
  result.reserve(caller_index.size());
  for (size_t i : caller_index) result.push_back((*outputs)[i]);
  return result;
}

absl::Status MonitoredSession::Close() {
  if (closed_) return absl::OkStatus();
  closed_ = true;
  absl::Status status;
  if (session_ != nullptr) {
    if (!failed_) {
      for (const auto& hook : hooks_) {
        status = hook->End(session_.get());
        if (!status.ok()) break;
      }
    }
    absl::Status s = session_->Close();
    if (status.ok()) status = s;
    session_.reset();
  }
  return status;
}

// ---------------------------------------------------------------------------------------
// NewMonitoredTrainingSession

namespace {

// Forwards to a session it shares; Close leaves that session open.
class ForwardingSession : public Session {
 public:
  explicit ForwardingSession(std::shared_ptr<Session> target) : target_(std::move(target)) {}
  absl::Status Extend(const proto::GraphDef& graph) override { return target_->Extend(graph); }
  absl::StatusOr<std::vector<Tensor>> Run(const FeedMap& feeds,
                                          absl::Span<const std::string> fetches,
                                          absl::Span<const std::string> targets,
                                          const RunOptions& options,
                                          RunMetadata* metadata) override {
    return target_->Run(feeds, fetches, targets, options, metadata);
  }
  absl::Status Close() override { return absl::OkStatus(); }

 private:
  std::shared_ptr<Session> target_;
};

// `base`'s first session, made once, handed out as ForwardingSessions
// (MonitoredTrainingSessionOptions::persistent_session); it lives as long as the factory.
SessionFactory PersistentSessionFactory(SessionFactory base) {
  auto shared = std::make_shared<std::shared_ptr<Session>>();
  return [shared, base = std::move(base)](
             const proto::GraphDef& def,
             const SessionOptions& options) -> absl::StatusOr<std::unique_ptr<Session>> {
    if (*shared == nullptr) {
      TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Session> s, base(def, options));
      *shared = std::move(s);
    }
    return std::unique_ptr<Session>(new ForwardingSession(*shared));
  };
}

// A creator followed by a step of the caller's (MonitoredTrainingSessionOptions::after_restore).
class ThenCreator : public SessionCreator {
 public:
  ThenCreator(std::unique_ptr<SessionCreator> inner, std::function<absl::Status(Session*)> then)
      : inner_(std::move(inner)), then_(std::move(then)) {}
  absl::StatusOr<std::unique_ptr<Session>> CreateSession(Graph* graph) override {
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, inner_->CreateSession(graph));
    if (then_) TANDEM_RETURN_IF_ERROR(then_(session.get()));
    return session;
  }

 private:
  std::unique_ptr<SessionCreator> inner_;
  std::function<absl::Status(Session*)> then_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<MonitoredSession>> NewMonitoredTrainingSession(
    Graph* graph, MonitoredTrainingSessionOptions options) {
  std::shared_ptr<Scaffold> scaffold =
      options.scaffold ? options.scaffold : std::make_shared<Scaffold>();
  SessionCreatorOptions creator_options;
  creator_options.scaffold = scaffold;
  creator_options.session_options = options.session_options;
  creator_options.factory = options.factory;
  if (options.persistent_session) {
    creator_options.factory =
        PersistentSessionFactory(options.factory ? options.factory : DefaultSessionFactory());
  }
  creator_options.keep_ready_variables = options.keep_ready_variables;
  creator_options.before_ready_wait = options.before_ready_wait;

  auto then =
      [&options](std::unique_ptr<SessionCreator> creator) -> std::unique_ptr<SessionCreator> {
    if (!options.after_restore) return creator;
    return std::make_unique<ThenCreator>(std::move(creator), options.after_restore);
  };
  if (!options.is_chief) {
    std::unique_ptr<SessionCreator> creator;
    if (options.initialize_locally) {
      creator =
          std::make_unique<ChiefSessionCreator>(std::move(creator_options), options.checkpoint_dir);
    } else {
      creator =
          std::make_unique<WorkerSessionCreator>(std::move(creator_options), options.max_wait_secs);
    }
    return MonitoredSession::Create(graph, then(std::move(creator)), std::move(options.hooks),
                                    std::move(options.recovery));
  }

  // The chief writes the checkpoints of checkpoint_dir.
  creator_options.set_aside_unreadable = true;
  std::vector<std::shared_ptr<SessionRunHook>> hooks = options.chief_only_hooks;
  const std::string summary_dir =
      options.summary_dir.empty() ? options.checkpoint_dir : options.summary_dir;
  if (!summary_dir.empty()) {
    if (options.log_step_count_steps > 0) {
      hooks.push_back(std::make_shared<StepCounterHook>(Every::Steps(options.log_step_count_steps),
                                                        summary_dir));
    }
    // Seconds win when both are set: save_summaries_steps defaults to 100, so a caller
    // setting seconds means seconds (TensorFlow's USE_DEFAULT rule).
    const bool summary_secs = options.save_summaries_secs.value_or(0) > 0;
    const bool summary_steps = options.save_summaries_steps.value_or(0) > 0;
    if (summary_secs) {
      hooks.push_back(std::make_shared<SummarySaverHook>(Every::Secs(*options.save_summaries_secs),
                                                         summary_dir));
    } else if (summary_steps) {
      hooks.push_back(std::make_shared<SummarySaverHook>(
          Every::Steps(*options.save_summaries_steps), summary_dir));
    }
  }
  if (!options.checkpoint_dir.empty()) {
    // The default is save_checkpoint_secs = 600, so a caller setting steps means steps.
    const bool ckpt_steps = options.save_checkpoint_steps.value_or(0) > 0;
    const bool ckpt_secs = options.save_checkpoint_secs.value_or(0) > 0;
    if (ckpt_steps || ckpt_secs) {
      Every every = ckpt_steps ? Every::Steps(*options.save_checkpoint_steps)
                               : Every::Secs(*options.save_checkpoint_secs);
      hooks.push_back(std::make_shared<CheckpointSaverHook>(
          options.checkpoint_dir, every, scaffold.get(), options.saving_listeners));
    }
  }
  for (auto& hook : options.hooks) hooks.push_back(std::move(hook));

  return MonitoredSession::Create(graph,
                                  then(std::make_unique<ChiefSessionCreator>(
                                      std::move(creator_options), options.checkpoint_dir)),
                                  std::move(hooks), std::move(options.recovery));
}

}  // namespace tandem
