// Bad input on the command line, found by trying posenc as a new user would: each is a clear error (exit 1,
// the flag and the value on stderr) that comes before any work, or a note on stderr where the run goes on.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "posenc/dist/mpi_support.h"
#include "test_util.h"

namespace posenc {
namespace {

using testing::CliResult;
using testing::RunPosenc;

std::string Temp(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("posenc_cli_errors_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

void ExpectErrorMentions(const CliResult& r, const std::vector<std::string>& parts) {
  EXPECT_EQ(r.status, 1) << r.out;
  for (const std::string& p : parts) EXPECT_NE(r.out.find(p), std::string::npos) << "'" << p << "' in: " << r.out;
}

// eval --json into a missing directory computed the whole table first, then failed. Outputs are checked before
// the inputs are even read: with a missing model too, the --json error comes first.
TEST(CliErrorsTest, OutputPathsAreCheckedBeforeTheWork) {
  ExpectErrorMentions(RunPosenc("eval --model /nonexistent/model.bin --json /nonexistent/x.json"),
                      {"--json /nonexistent/x.json", "does not exist"});
  ExpectErrorMentions(RunPosenc("eval --model /nonexistent/model.bin --csv /nonexistent/x.csv"), {"--csv"});
  ExpectErrorMentions(RunPosenc("eval --model /nonexistent/model.bin --plot /"), {"--plot", "not a regular file"});
  ExpectErrorMentions(RunPosenc("bench --filter gather --no-torch --quiet --json /nonexistent/b.json"), {"--json"});
}

// The library names its options as fields ("`steps` must be >= 1"); the command line shows them as the flags a
// user typed, with no backtick left.
TEST(CliErrorsTest, LibraryErrorsNameTheFlags) {
  const CliResult steps = RunPosenc("finetune --method none --ctx 64 --steps 0 --out " + Temp("never.bin"));
  ExpectErrorMentions(steps, {"--steps must be >= 1, got 0"});
  EXPECT_EQ(steps.out.find('`'), std::string::npos) << steps.out;
  const CliResult twice = RunPosenc("eval --methods none,none");
  ExpectErrorMentions(twice, {"--methods lists 'none' twice"});
  EXPECT_EQ(twice.out.find('`'), std::string::npos) << twice.out;
}

// --context-parallel splits windows over MPI ranks: started alone (or in a build without MPI) it says how to run.
TEST(CliErrorsTest, ContextParallelWithoutRanksSaysHowToRun) {
  if (BuiltWithMpi()) {
    ExpectErrorMentions(RunPosenc("eval --context-parallel"), {"--context-parallel", "mpirun -np N"});
  } else {
    ExpectErrorMentions(RunPosenc("eval --context-parallel"), {"--context-parallel needs posenc built with MPI"});
  }
  ExpectErrorMentions(RunPosenc("eval --context-parallel --context-split diagonal"), {"diagonal", "zigzag"});
  ExpectErrorMentions(RunPosenc("eval --context-split contiguous"), {"--context-split contiguous", "--context-parallel"});
  ExpectErrorMentions(RunPosenc("eval --rank-timeout 0"), {"--rank-timeout", "got 0"});
}

TEST(CliErrorsTest, ThreadCountsAreBounded) {
  ExpectErrorMentions(RunPosenc("eval --threads 100000"), {"threads", "[0, 1024]", "100000"});
  ExpectErrorMentions(RunPosenc("demo compare --threads 100000"), {"--threads", "[0, 1024]", "100000"});
  ExpectErrorMentions(RunPosenc("bench --threads 100000 --no-torch --quiet"), {"--threads", "100000"});
}

TEST(CliErrorsTest, SizesAreBoundedWithTheMemoryTheyWouldNeed) {
  ExpectErrorMentions(RunPosenc("inspect --head-dim 100000000"), {"head_dim must be <= 65536", "100000000", "MiB"});
  ExpectErrorMentions(RunPosenc("generate -n 1000000000000"), {"--steps", "1000000000000", "would need"});
}

// An allocation past the process's address-space limit (ulimit -v) that no size check foresaw: the message
// names the limit and the machine's memory instead of a bare "std::bad_alloc". (AddressSanitizer reserves its
// shadow memory up front and cannot run under such a limit: the sanitizer build skips.)
TEST(CliErrorsTest, OutOfMemoryNamesTheLimit) {
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
  GTEST_SKIP() << "AddressSanitizer cannot run under ulimit -v";
#endif
#endif
  // 3,000,000 positions of KV cache for the bundled model (5 layers x 2 x 32 floats each: 3.6 GiB) pass the
  // physical-memory check but not a 391 MiB limit.
  const CliResult r = RunPosenc("generate --steps 3000000 --method linear -t 0", "2>&1", "ulimit -v 400000;");
  ExpectErrorMentions(r, {"out of memory: an allocation failed", "ulimit -v 400000", "raise the limit"});
}

// OpenBLAS maps a 128 MiB work buffer for each thread that multiplies, and when the address-space limit leaves
// no room for one its allocator retries forever: eval with 8 threads under a 391 MiB limit (8 x 128 MiB cannot
// fit, whatever the process holds already) is refused before any product, naming the buffers, the limit and
// the flag. `timeout` turns a regression into a failure (status 124) instead of a hung test.
TEST(CliErrorsTest, BlasBuffersPastTheAddressLimitAreRefused) {
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
  GTEST_SKIP() << "AddressSanitizer cannot run under ulimit -v";
#endif
#endif
  const CliResult r = RunPosenc("eval --threads 8 --ctx 256", "2>&1", "ulimit -v 400000; timeout 120");
  ExpectErrorMentions(r, {"eval with 8 threads", "8 x 128 MiB of OpenBLAS work buffers", "ulimit -v 400000",
                          "raise the limit", "fewer threads (--threads)"});
}

// A thread team that the process's limits cannot hold (1000 stacks of 8 MiB under a 1.43 GiB address-space
// limit): libgomp would end the process with "libgomp: Thread creation failed" and no word of the limit; posenc
// proves the team startable first and names the count, where it came from and the limits. Both sources of the
// count: the flag and OMP_NUM_THREADS.
TEST(CliErrorsTest, ThreadsThatCannotStartNameTheLimit) {
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
  GTEST_SKIP() << "AddressSanitizer cannot run under ulimit -v";
#endif
#endif
  const CliResult flag = RunPosenc("eval --threads 1000 --ctx 256", "2>&1", "ulimit -s 8192; ulimit -v 1500000;");
  ExpectErrorMentions(flag, {"cannot start 1000 threads", "--threads", "pthread_create", "ulimit -s 8192",
                             "ulimit -v 1500000", "ask for fewer threads"});
  const CliResult env =
      RunPosenc("eval --ctx 256", "2>&1", "ulimit -s 8192; ulimit -v 1500000; export OMP_NUM_THREADS=1000;");
  ExpectErrorMentions(env, {"cannot start 1000 threads", "OMP_NUM_THREADS=1000", "ulimit -v 1500000"});
  EXPECT_EQ(flag.out.find("libgomp"), std::string::npos) << flag.out;
  EXPECT_EQ(env.out.find("libgomp"), std::string::npos) << env.out;
}

TEST(CliErrorsTest, StreamBytesZeroIsRefused) {
  ExpectErrorMentions(RunPosenc("bench --stream-bytes 0 --filter gather --no-torch --quiet"),
                      {"--stream-bytes must be >= 1048576", "got 0"});
}

TEST(CliErrorsTest, DirectoriesAndFifosAsInputs) {
  // A directory is a Hugging Face checkpoint folder: without config.json it is refused, naming both.
  ExpectErrorMentions(RunPosenc("eval --model /tmp"), {"/tmp", "config.json is missing"});
  ExpectErrorMentions(RunPosenc("inspect --config /tmp"), {"/tmp"});
  const std::string fifo = Temp("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ExpectErrorMentions(RunPosenc("inspect --config " + fifo), {"config file", "FIFO"});
  ExpectErrorMentions(RunPosenc("generate --tokenizer " + fifo), {"tokenizer", "FIFO"});
  std::remove(fifo.c_str());
}

TEST(CliErrorsTest, DeeplyNestedConfigIsAnErrorNotACrash) {
  const std::string path = Temp("deep.json");
  std::ofstream(path) << std::string(60000, '[') << std::string(60000, ']');
  ExpectErrorMentions(RunPosenc("inspect --config " + path), {"nesting depth exceeds the limit of 64"});
  std::remove(path.c_str());
}

// A full standard output is an error: `posenc inspect > /dev/full` exited 0 with nothing written.
TEST(CliErrorsTest, UnwritableStdoutFailsTheRun) {
  const std::string err = Temp("full_err.txt");
  for (const std::string args : {"inspect --head-dim 8 --positions 0", "inspect --head-dim 128 --positions 0,1,2",
                                 "eval --ctx 256 --methods none --tokens 256"}) {
    const CliResult r = RunPosenc(args + " > /dev/full", "2>" + err);
    EXPECT_EQ(r.status, 1) << args;
    std::ifstream in(err);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    EXPECT_NE(text.find("error: cannot write"), std::string::npos) << args << ": " << text;
  }
  // Nowhere to report it either (stderr full too): still a failure status, not a crash.
  EXPECT_EQ(RunPosenc("inspect --head-dim 128 --positions 0,1,2 > /dev/full", "2>/dev/full").status, 1);
  std::remove(err.c_str());
}

TEST(CliErrorsTest, GenerateSaysWhatItChanged) {
  const std::string err = Temp("gen_err.txt");
  const CliResult cut =
      RunPosenc("generate -n 4 -t 0 --prompt 'Once upon a time, there was a little girl'", "2>" + err);
  EXPECT_EQ(cut.status, 0);
  std::ifstream in(err);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(text.find("note: the prompt has"), std::string::npos) << text;
  EXPECT_NE(text.find("were not used"), std::string::npos) << text;
  const CliResult seed = RunPosenc("generate -n 8 -s 0");
  EXPECT_EQ(seed.status, 0) << seed.out;
  EXPECT_NE(seed.out.find("seed 0: seeded from the clock with"), std::string::npos) << seed.out;
  const CliResult help = RunPosenc("generate --help");
  EXPECT_NE(help.out.find("0 = seed from the clock"), std::string::npos) << help.out;
  std::remove(err.c_str());
}

}  // namespace
}  // namespace posenc
