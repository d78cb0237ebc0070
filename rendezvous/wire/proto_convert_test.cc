// Round trips of rendezvous/wire/proto_convert: every field of each struct set to a
// distinct non-default value (every enum value once), to the message and back, compared
// whole; and the message made from it has every field set (UnsetFields), so that a field
// added to the proto but not written by its ToProto fails here. Fields a conversion leaves
// out on purpose are named, with why, in the allow-lists below.
#include "rendezvous/wire/proto_convert.h"

#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "muster/v1/rendezvous.pb.h"
#include "rendezvous/wire/wire_test_util.h"

namespace muster::rdzv::wire {
namespace {

using wire_test::Distinct;
using wire_test::FullTracesSummary;
using wire_test::UnsetFields;
using Paths = std::set<std::string>;

// NodeInfo as round assignments and the status' participants carry it: the fields after
// wants_node_list (probe, command, log_dir, containment, excluded) travel with Join only
// (types.h: "Sent with Join only"), so a NodeInfo of a round leaves them empty.
NodeInfo RoundNodeInfo(Distinct& d) {
  return NodeInfo{.node_id = d.Str("node"),
                  .host = d.Str("host"),
                  .address = d.Str("addr"),
                  .rank_hint = d.Int(),
                  .local_world_size = d.Int(),
                  .store_port = d.Int(),
                  .wants_node_list = true};
}

NodeInfo FullNodeInfo(Distinct& d) {
  NodeInfo n = RoundNodeInfo(d);
  n.probe = d.Str("probe");
  n.command = d.Str("command");
  n.log_dir = d.Str("log_dir");
  n.containment = d.Str("containment");
  n.excluded = d.Str("excluded");
  return n;
}

// kind: kHung, not kWorker, whose wire value is the proto3 default (FAILURE_KIND_WORKER
// = 0) and would read as unset. Every kind is checked by FailureEveryKind.
Failure FullFailure(Distinct& d, FailureKind kind = FailureKind::kHung) {
  return Failure{.kind = kind,
                 .node_id = d.Str("node"),
                 .host = d.Str("host"),
                 .rank = d.Int(),
                 .local_rank = d.Int(),
                 .pid = d.Int(),
                 .code = d.Int(),
                 .what = d.Str("what"),
                 .message = d.Str("message"),
                 .stderr_tail = d.Str("tail"),
                 .restartable = true};
}

Outcome FullOutcome(Distinct& d) {
  return Outcome{.exit_code = d.Int(), .root_cause = FullFailure(d), .reason = d.Str("reason")};
}

Assignment FullAssignment(Distinct& d) {
  return Assignment{.round = d.Int(),
                    .restart_count = d.Int(),
                    .group_rank = d.Int(),
                    .group_world_size = d.Int(),
                    .rank_base = d.Int(),
                    .world_size = d.Int(),
                    .master_addr = d.Str("master"),
                    .master_port = d.Int(),
                    .nodes = {RoundNodeInfo(d), RoundNodeInfo(d)}};
}

StragglerVerdict FullVerdict(Distinct& d) {
  return StragglerVerdict{.rank = d.Int(),
                          .local_rank = d.Int(),
                          .node_id = d.Str("node"),
                          .host = d.Str("host"),
                          .share = d.Double(),
                          .samples = d.Int(),
                          .stack = d.Str("stack"),
                          .line = d.Str("line")};
}

TraceRound FullTraceRound(Distinct& d) {
  TraceRound r{.round = d.Int(), .location = d.Str("location")};
  for (int i = 0; i < 2; ++i) {
    r.nodes.push_back(TraceNode{.node_id = d.Str("node"),
                                .host = d.Str("host"),
                                .files = {d.Str("file"), d.Str("file")},
                                .bytes = d.Int64(),
                                .note = d.Str("note")});
  }
  // r.reported stays empty: it is the server's bookkeeping of whose upload is complete
  // (trace_rounds.cc), not part of the status; the wire does not carry it.
  return r;
}

TEST(ProtoConvertTest, JoinRoundTripsEveryField) {
  Distinct d;
  const NodeInfo node = FullNodeInfo(d);
  const JobSpec spec{.run_id = d.Str("run"),
                     .min_nodes = d.Int(),
                     .max_nodes = d.Int(),
                     .max_restarts = d.Int(),
                     .spares = d.Int(),
                     .restart_after_success = true,
                     .join_timeout = d.Ms(),
                     .last_call_timeout = d.Ms(),
                     .heartbeat_interval = d.Ms(),
                     .heartbeat_misses = d.Int(),
                     .stop_timeout = d.Ms(),
                     .quarantine_after = d.Int()};
  v1::Join join;
  ToProto(node, spec, &join);
  EXPECT_EQ(UnsetFields(join), Paths{});

  NodeInfo node_back;
  JobSpec spec_back;
  FromProto(join, &node_back, &spec_back);
  EXPECT_TRUE(node_back == node) << join.DebugString();
  EXPECT_TRUE(spec_back == spec) << join.DebugString();
}

TEST(ProtoConvertTest, FailureEveryKind) {
  for (FailureKind kind : {FailureKind::kWorker, FailureKind::kHung, FailureKind::kNodeLost,
                           FailureKind::kPreempted}) {
    Distinct d;
    const Failure f = FullFailure(d, kind);
    v1::Failure wire;
    ToProto(f, &wire);
    // FAILURE_KIND_WORKER is the enum's zero: the one kind that reads as unset.
    const Paths expected_unset = kind == FailureKind::kWorker ? Paths{"kind"} : Paths{};
    EXPECT_EQ(UnsetFields(wire), expected_unset) << FailureKindName(kind);
    EXPECT_TRUE(FromProto(wire) == f) << wire.DebugString();
  }
}

// Each kind of event carries its own fields; ToProto writes the ServerMessage's member for
// that kind, FromProto gives back the same event.
TEST(ProtoConvertTest, EventEveryKindRoundTrips) {
  Distinct d;
  const std::string recipient = d.Str("recipient");
  std::vector<Event> events;
  {
    Event e{.kind = Event::Kind::kProgress, .node_id = recipient, .text = d.Str("text")};
    e.spare = true;
    e.quarantined = d.Str("quarantined");
    events.push_back(e);
  }
  events.push_back(Event{
      .kind = Event::Kind::kRoundStarted, .node_id = recipient, .assignment = FullAssignment(d)});
  {
    Event e{.kind = Event::Kind::kStopWorkers, .node_id = recipient, .text = d.Str("text")};
    e.failure = FullFailure(d);
    e.counted = true;
    events.push_back(e);
  }
  {
    // The wire carries the outcome's reason once; FromProto fills text with it.
    Event e{.kind = Event::Kind::kFinished, .node_id = recipient, .outcome = FullOutcome(d)};
    e.text = e.outcome.reason;
    events.push_back(e);
  }
  {
    Event e{.kind = Event::Kind::kPreempt, .node_id = recipient, .text = d.Str("reason")};
    e.preempted_node = d.Str("node");
    e.preempted_host = d.Str("host");
    events.push_back(e);
  }
  {
    Event e{.kind = Event::Kind::kTraces, .node_id = recipient};
    e.traces = FullTracesSummary(d);
    events.push_back(e);
  }
  {
    // As for kFinished: text is the verdict's line.
    Event e{.kind = Event::Kind::kStraggler, .node_id = recipient};
    e.straggler = FullVerdict(d);
    e.text = e.straggler.line;
    events.push_back(e);
  }
  ASSERT_EQ(events.size(), 7u) << "one per Event::Kind";

  for (const Event& e : events) {
    v1::ServerMessage wire;
    ToProto(e, &wire);
    EXPECT_EQ(UnsetFields(wire), Paths{}) << wire.DebugString();
    Event back;
    ASSERT_TRUE(FromProto(wire, recipient, &back)) << wire.DebugString();
    EXPECT_TRUE(back == e) << wire.DebugString();
  }
}

TEST(ProtoConvertTest, ErrorAndEmptyServerMessagesAreNoEvents) {
  Event out;
  EXPECT_FALSE(FromProto(v1::ServerMessage(), "n", &out));
  v1::ServerMessage error;
  error.mutable_error()->set_code(5);
  EXPECT_FALSE(FromProto(error, "n", &out));
}

TEST(ProtoConvertTest, WorkersStartedAndEndedRoundTrip) {
  Distinct d;
  const int round = d.Int();
  std::vector<StartedWorker> started;
  for (int i = 0; i < 2; ++i) {
    started.push_back(StartedWorker{.local_rank = d.Int(),
                                    .rank = d.Int(),
                                    .pid = d.Int(),
                                    .start = d.Str("start"),
                                    .fallback = d.Str("fallback")});
  }
  v1::WorkersStarted started_wire;
  ToProto(round, started, &started_wire);
  EXPECT_EQ(UnsetFields(started_wire), Paths{});
  EXPECT_EQ(started_wire.round(), round);
  EXPECT_TRUE(FromProto(started_wire) == started) << started_wire.DebugString();

  const EndedWorker ended{.local_rank = d.Int(),
                          .pid = d.Int(),
                          .code = d.Int(),
                          .signal = d.Int(),
                          .what = d.Str("what"),
                          .stopped = true};
  v1::WorkerEnded ended_wire;
  ToProto(round, ended, &ended_wire);
  EXPECT_EQ(UnsetFields(ended_wire), Paths{});
  EXPECT_EQ(ended_wire.round(), round);
  EXPECT_TRUE(FromProto(ended_wire) == ended) << ended_wire.DebugString();
}

JobStatusSnapshot FullSnapshot(Distinct& d, JobPhase phase) {
  JobStatusSnapshot s{.run_id = d.Str("run"),
                      .phase = phase,
                      .round = d.Int(),
                      .attempt = d.Int(),
                      .round_started = d.UnixMs(),
                      .restarts_used = d.Int(),
                      .max_restarts = d.Int(),
                      .min_nodes = d.Int(),
                      .max_nodes = d.Int()};
  for (NodeState state : kNodeStates) {  // one node in each state, Spare and Quarantined too
    NodeInfo info = FullNodeInfo(d);
    s.nodes.push_back(NodeStatus{.node_id = info.node_id,
                                 .host = info.host,
                                 .address = info.address,
                                 .group_rank = d.Int(),
                                 .local_world_size = d.Int(),
                                 .last_heartbeat = d.UnixMs(),
                                 .state = state,
                                 .probe = info.probe,
                                 .command = info.command,
                                 .log_dir = info.log_dir,
                                 .containment = info.containment,
                                 .excluded = info.excluded});
  }
  s.participants = {RoundNodeInfo(d), RoundNodeInfo(d)};
  for (int i = 0; i < 2; ++i) {
    s.history.push_back(RestartRecord{.round = d.Int(),
                                      .attempt = d.Int(),
                                      .started = d.UnixMs(),
                                      .time = d.UnixMs(),
                                      .reason = d.Str("reason"),
                                      .counted = true,
                                      .failure = FullFailure(d)});
  }
  s.outcome = FullOutcome(d);
  for (bool status : {true, false}) {
    s.conditions.push_back(Condition{.type = d.Str("type"),
                                     .status = status,
                                     .reason = d.Str("reason"),
                                     .message = d.Str("message"),
                                     .last_transition = d.UnixMs()});
  }
  for (WorkerState state : {WorkerState::kPending, WorkerState::kRunning, WorkerState::kSucceeded,
                            WorkerState::kFailed, WorkerState::kStopped}) {
    s.workers.push_back(WorkerStatus{.node_id = d.Str("node"),
                                     .host = d.Str("host"),
                                     .group_rank = d.Int(),
                                     .rank = d.Int(),
                                     .local_rank = d.Int(),
                                     .pid = d.Int(),
                                     .state = state,
                                     .code = d.Int(),
                                     .signal = d.Int(),
                                     .what = d.Str("what"),
                                     .restarts = d.Int(),
                                     .start = d.Str("start"),
                                     .fallback = d.Str("fallback")});
  }
  for (int i = 0; i < 2; ++i) {
    s.preempting.push_back(Preemption{.node_id = d.Str("node"),
                                      .host = d.Str("host"),
                                      .reason = d.Str("reason"),
                                      .since = d.UnixMs()});
  }
  s.traces = {FullTraceRound(d), FullTraceRound(d)};
  s.straggler = FullVerdict(d);
  return s;
}

TEST(ProtoConvertTest, JobStatusRoundTripsEveryFieldAndPhase) {
  for (JobPhase phase : kJobPhases) {
    Distinct d;
    const JobStatusSnapshot s = FullSnapshot(d, phase);
    v1::JobStatusReply wire;
    ToProto(s, &wire);
    EXPECT_EQ(UnsetFields(wire), Paths{}) << JobPhaseName(phase);
    const JobStatusSnapshot back = FromProto(wire);
    EXPECT_TRUE(back == s) << JobPhaseName(phase) << "\n" << wire.DebugString();
    // Pinpoints a failure above: each part on its own.
    EXPECT_EQ(back.phase, s.phase);
    EXPECT_TRUE(back.nodes == s.nodes);
    EXPECT_TRUE(back.participants == s.participants);
    EXPECT_TRUE(back.history == s.history);
    EXPECT_TRUE(back.outcome == s.outcome);
    EXPECT_TRUE(back.conditions == s.conditions);
    EXPECT_TRUE(back.workers == s.workers);
    EXPECT_TRUE(back.preempting == s.preempting);
    EXPECT_TRUE(back.traces == s.traces);
    EXPECT_TRUE(back.straggler == s.straggler);
  }
}

// Times before the first round (InfinitePast) travel as 0 and come back the same; a job
// without outcome, straggler or history stays without them.
TEST(ProtoConvertTest, JobStatusEmptyStaysEmpty) {
  const JobStatusSnapshot empty;
  v1::JobStatusReply wire;
  ToProto(empty, &wire);
  EXPECT_EQ(wire.round_started_unix_ms(), 0);
  EXPECT_FALSE(wire.has_outcome());
  EXPECT_FALSE(wire.has_straggler());
  EXPECT_TRUE(FromProto(wire) == empty) << wire.DebugString();
}

TEST(ProtoConvertTest, JobSummaryRoundTripsEveryFieldAndPhase) {
  for (JobPhase phase : kJobPhases) {
    Distinct d;
    const JobSummary s{.run_id = d.Str("run"),
                       .phase = phase,
                       .round = d.Int(),
                       .restarts_used = d.Int(),
                       .max_restarts = d.Int(),
                       .nodes = d.Int(),
                       .min_nodes = d.Int(),
                       .max_nodes = d.Int(),
                       .outcome = FullOutcome(d)};
    v1::JobSummary wire;
    ToProto(s, &wire);
    EXPECT_EQ(UnsetFields(wire), Paths{}) << JobPhaseName(phase);
    EXPECT_TRUE(FromProto(wire) == s) << wire.DebugString();
  }
}

}  // namespace
}  // namespace muster::rdzv::wire
