// JobRoutes (which jobs the worker holds, the hang rule for cancels, how a worker's loss
// concerns each job) and WorkerSupervisor's watchdog against a stand-in worker that never
// answers (a shell script that sends Ready and sleeps).
#include "server/job_routes.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <utility>

#include "server/worker_supervisor.h"
#include "worker/protocol.h"

#include <gtest/gtest.h>

namespace tessera::server {
namespace {

using std::chrono::seconds;

std::string DoneFrame(uint64_t job_id) {
  worker::DoneMessage done;
  done.job_id = job_id;
  done.finish_reason = worker::FinishReason::kCancelled;
  return worker::Encode(done);
}

std::string DeltaFrame(uint64_t job_id) {
  worker::DeltaMessage delta;
  delta.job_id = job_id;
  delta.text = "x";
  return worker::Encode(delta);
}

// The next event already in `channel` (never waits).
std::optional<WorkerEvent> Next(JobChannel& channel) {
  return channel.Wait(Clock::now());
}

TEST(JobRoutes, EveryAnswerEndsItsJobAndNothingElseDoes) {
  using worker::MessageType;
  for (MessageType t : {MessageType::kDone, MessageType::kJobError, MessageType::kTokens,
                        MessageType::kText, MessageType::kTaskResult}) {
    EXPECT_TRUE(EndsJob(t)) << static_cast<int>(t);
  }
  for (MessageType t : {MessageType::kStarted, MessageType::kDelta, MessageType::kReady}) {
    EXPECT_FALSE(EndsJob(t)) << static_cast<int>(t);
  }
}

TEST(JobRoutes, ATaskResultAcknowledgesACancel) {
  JobRoutes routes(seconds(30));
  routes.Add(1, std::make_shared<JobChannel>());
  const Clock::time_point t0 = Clock::now();
  ASSERT_TRUE(routes.Cancel(1, t0));
  worker::TaskResultMessage result;
  result.job_id = 1;
  routes.Deliver(worker::Encode(result));  // it finished before the cancel was read
  EXPECT_FALSE(routes.Overdue(t0 + seconds(3600)));
}

TEST(JobRoutes, MessagesReachTheirJobAndAnEndRemovesIt) {
  JobRoutes routes(seconds(30));
  auto a = std::make_shared<JobChannel>();
  auto b = std::make_shared<JobChannel>();
  routes.Add(1, a);
  routes.Add(2, b);
  routes.Deliver(DeltaFrame(2));
  routes.Deliver(DoneFrame(1));
  auto ev = Next(*b);
  ASSERT_TRUE(ev);
  EXPECT_FALSE(ev->worker_died);
  EXPECT_EQ(*worker::PeekMessageType(ev->frame), worker::MessageType::kDelta);
  ASSERT_TRUE(Next(*a));
  EXPECT_FALSE(Next(*a));
  EXPECT_EQ(routes.jobs_in_worker(), 1u);  // 1 ended; 2 is still in the worker
  routes.Deliver("");                      // not a message: ignored
  routes.Deliver(DoneFrame(99));           // no such job: ignored
  EXPECT_EQ(routes.jobs_in_worker(), 1u);
}

TEST(JobRoutes, AnUnacknowledgedCancelIsOverdueAfterTheHangTimeout) {
  JobRoutes routes(seconds(30));
  routes.Add(1, std::make_shared<JobChannel>());
  routes.Add(2, std::make_shared<JobChannel>());
  const Clock::time_point t0 = Clock::now();
  EXPECT_FALSE(routes.NextCancelBound());
  EXPECT_TRUE(routes.Cancel(1, t0));
  EXPECT_FALSE(routes.Cancel(1, t0 + seconds(5)));  // once: the first cancel's clock runs
  EXPECT_EQ(routes.NextCancelBound(), t0 + seconds(30));
  routes.Release(1);  // the request answered 504 and left; the job is still timed
  EXPECT_FALSE(routes.Overdue(t0 + seconds(29)));
  EXPECT_EQ(routes.Overdue(t0 + seconds(30)), 1u);
}

TEST(JobRoutes, AnAcknowledgedCancelIsNeverOverdue) {
  JobRoutes routes(seconds(30));
  routes.Add(1, std::make_shared<JobChannel>());
  const Clock::time_point t0 = Clock::now();
  ASSERT_TRUE(routes.Cancel(1, t0));
  routes.Release(1);
  routes.Deliver(DoneFrame(1));  // Done(cancelled) after the request left
  EXPECT_FALSE(routes.Overdue(t0 + seconds(3600)));
  EXPECT_FALSE(routes.NextCancelBound());
  EXPECT_EQ(routes.jobs_in_worker(), 0u);
}

TEST(JobRoutes, AJobThatEndedNeedsNoCancel) {
  JobRoutes routes(seconds(30));
  auto a = std::make_shared<JobChannel>();
  routes.Add(1, a);
  routes.Deliver(DoneFrame(1));
  // Its end crossed the cancel: no Cancel is written and nothing is timed.
  EXPECT_FALSE(routes.Cancel(1, Clock::now()));
  EXPECT_FALSE(routes.NextCancelBound());
}

TEST(JobRoutes, AReleasedJobThatWasNotCancelledIsForgotten) {
  JobRoutes routes(seconds(30));
  routes.Add(1, std::make_shared<JobChannel>());
  routes.Release(1);
  EXPECT_EQ(routes.jobs_in_worker(), 0u);
}

// Jobs 1 and 2 in the worker when it goes: how the loss concerns each.
std::pair<WorkerLoss, WorkerLoss> LossesOfTwoJobs(bool server_stopping,
                                                  std::optional<uint64_t> hung_job) {
  JobRoutes routes(seconds(30));
  auto a = std::make_shared<JobChannel>();
  auto b = std::make_shared<JobChannel>();
  routes.Add(1, a);
  routes.Add(2, b);
  routes.WorkerGone(server_stopping, hung_job);
  EXPECT_EQ(routes.jobs_in_worker(), 0u);
  auto ea = Next(*a);
  auto eb = Next(*b);
  EXPECT_TRUE(ea && ea->worker_died && eb && eb->worker_died);
  return {ea ? ea->loss : WorkerLoss::kBystander, eb ? eb->loss : WorkerLoss::kBystander};
}

TEST(JobRoutes, TheHungJobIsTheCauseAndTheOthersAreBystanders) {
  EXPECT_EQ(LossesOfTwoJobs(false, 1), std::pair(WorkerLoss::kCause, WorkerLoss::kBystander));
}

TEST(JobRoutes, ACrashWithOneJobIsThatJobsDoing) {
  JobRoutes routes(seconds(30));
  auto alone = std::make_shared<JobChannel>();
  routes.Add(1, alone);
  routes.WorkerGone(false, std::nullopt);
  auto ev = Next(*alone);
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->loss, WorkerLoss::kCause);
}

TEST(JobRoutes, ACrashWithSeveralJobsLeavesEachABystander) {
  EXPECT_EQ(LossesOfTwoJobs(false, std::nullopt),
            std::pair(WorkerLoss::kBystander, WorkerLoss::kBystander));
}

TEST(JobRoutes, AServerStopConcernsEveryJobAlike) {
  EXPECT_EQ(LossesOfTwoJobs(true, 1),
            std::pair(WorkerLoss::kServerStopping, WorkerLoss::kServerStopping));
}

// A stand-in worker: announces Ready on fd 3, then sleeps, reading nothing (a hung step).
// A stand-in worker: a shell script that says Ready on fd 3, then runs `rest`.
std::string WriteStandInWorker(const std::string& name, const std::string& rest) {
  const std::string path = ::testing::TempDir() + "/" + name + "_" + std::to_string(::getpid());
  const std::string ready = worker::Encode(worker::ReadyMessage{"m"});
  std::string octal;  // printf's escapes: the frame's bytes through the shell unharmed
  const uint32_t n = static_cast<uint32_t>(ready.size());
  const std::string length{static_cast<char>(n & 0xff), static_cast<char>((n >> 8) & 0xff),
                           static_cast<char>((n >> 16) & 0xff), static_cast<char>(n >> 24)};
  for (unsigned char c : length + ready) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\%03o", c);
    octal += buf;
  }
  std::ofstream(path) << "#!/bin/sh\nprintf '" << octal << "' >&3\n" << rest << "\n";
  ::chmod(path.c_str(), 0755);
  return path;
}

std::string WriteHungWorker() {
  return WriteStandInWorker("hung_worker", "exec sleep 600");
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

worker::JobRequest Job(uint64_t id) {
  worker::JobRequest job;
  job.job_id = id;
  job.model = "m";
  job.payload = worker::CompletionPayload{"Once", {}};
  return job;
}

TEST(WorkerSupervisor, AHungWorkerIsKilledOnceACancelGoesUnacknowledged) {
  const std::string script = WriteHungWorker();
  WorkerSupervisor sup({script, {}, std::chrono::milliseconds(50)});
  sup.Start();
  ASSERT_TRUE(sup.WaitReady(Clock::now() + seconds(30)));
  const pid_t first = sup.worker_pid();
  auto hung = std::make_shared<JobChannel>();
  auto bystander = std::make_shared<JobChannel>();
  ASSERT_TRUE(sup.Submit(Job(1), hung).ok());
  ASSERT_TRUE(sup.Submit(Job(2), bystander).ok());
  sup.Cancel(1);
  auto h = hung->Wait(Clock::now() + seconds(30));
  auto b = bystander->Wait(Clock::now() + seconds(30));
  ASSERT_TRUE(h && b);
  EXPECT_TRUE(h->worker_died && b->worker_died);
  EXPECT_EQ(h->loss, WorkerLoss::kCause);
  EXPECT_EQ(b->loss, WorkerLoss::kBystander);
  EXPECT_EQ(sup.hang_kills(), 1);
  // The monitor starts a new worker.
  ASSERT_TRUE(sup.WaitReady(Clock::now() + seconds(30)));
  EXPECT_NE(sup.worker_pid(), first);
  EXPECT_EQ(sup.restarts(), 1);
  sup.Stop();
  ::unlink(script.c_str());
}

TEST(WorkerSupervisor, WithoutACancelNothingIsKilledAndAStopSaysSo) {
  const std::string script = WriteHungWorker();
  WorkerSupervisor sup({script, {}, std::chrono::milliseconds(50)});
  sup.Start();
  ASSERT_TRUE(sup.WaitReady(Clock::now() + seconds(30)));
  auto waiting = std::make_shared<JobChannel>();
  ASSERT_TRUE(sup.Submit(Job(1), waiting).ok());
  // A job that is slow but not cancelled is never a reason to kill.
  EXPECT_FALSE(waiting->Wait(Clock::now() + std::chrono::milliseconds(200)));
  EXPECT_EQ(sup.hang_kills(), 0);
  sup.Stop();
  auto ev = waiting->Wait(Clock::now() + seconds(30));
  ASSERT_TRUE(ev);
  EXPECT_TRUE(ev->worker_died);
  EXPECT_EQ(ev->loss, WorkerLoss::kServerStopping);
  ::unlink(script.c_str());
}

// A model added while serving reaches the running worker as an AddModelMessage frame, and
// every worker started later has it on its command line.
TEST(WorkerSupervisor, AnAddedModelReachesTheWorkerAndItsSuccessors) {
  const std::string dir = ::testing::TempDir();
  const std::string args_file = dir + "/added_args_" + std::to_string(::getpid());
  const std::string frames_file = dir + "/added_frames_" + std::to_string(::getpid());
  ::unlink(args_file.c_str());
  ::unlink(frames_file.c_str());
  // Before Ready: its arguments, one line per start; after: every frame it is sent.
  const std::string script = WriteStandInWorker(
      "recording_worker", "echo \"$*\" >> " + args_file + "\nexec cat <&3 >> " + frames_file);
  WorkerSupervisor sup({script, {"--model", "m=/d/m"}, std::chrono::milliseconds(50)});
  sup.Start();
  ASSERT_TRUE(sup.WaitReady(Clock::now() + seconds(30)));
  const worker::AddModelMessage added{"pulled", "/d/pulled", ModelKind::kChat};
  sup.AddModel(added);
  const std::string frame = worker::Encode(added);
  const auto deadline = Clock::now() + seconds(30);
  while (ReadAll(frames_file).find(frame) == std::string::npos && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_NE(ReadAll(frames_file).find(frame), std::string::npos);
  // A worker started after it (this one dies) is given the model on its command line.
  const pid_t first = sup.worker_pid();
  ::kill(first, SIGKILL);
  while ((sup.worker_pid() == first || !sup.ready()) && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(sup.ready());
  const std::string args = ReadAll(args_file);
  const size_t second_start = args.find('\n') + 1;
  EXPECT_EQ(args.substr(0, second_start).find("pulled"), std::string::npos) << args;
  EXPECT_NE(args.find("--model m=/d/m --model pulled=/d/pulled --kind pulled=chat", second_start),
            std::string::npos)
      << args;
  sup.Stop();
  for (const std::string& f : {script, args_file, frames_file}) ::unlink(f.c_str());
}

}  // namespace
}  // namespace tessera::server
