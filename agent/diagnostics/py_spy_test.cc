#include "agent/diagnostics/py_spy.h"

#include <unistd.h>

#include <string>

#include "agent/diagnostics/stack_report.h"
#include "gtest/gtest.h"

namespace muster {
namespace {

// `py-spy dump --native --full-filenames` of a rank in ctypes' call to libc's sleep (py-spy
// 0.4.2, Python 3.11), as the stack report must read it.
constexpr char kNativeDump[] = R"(Process 13660: /usr/bin/python3 /tmp/sic.py
Python v3.11.2 (/usr/bin/python3.11)

Thread 13660 (idle): "MainThread"
    clock_nanosleep (libc.so.6)
    sleep (libc.so.6)
    0x7f383ac91f7a (libffi.so.8.1.2)
    ffi_call (libffi.so.8.1.2)
    stuck_in_c (/tmp/sic.py:3)
    <module> (/tmp/sic.py:4)
    0x7f383afab24a (libc.so.6)
    __libc_start_main (libc.so.6)
Thread 0x7F0011223344 (idle): "pt_elastic"
    wait (/usr/lib/python3.11/threading.py:324)
)";

TEST(PySpyTest, NativeFramesBetweenPythonOnesAreKeptAndStartUpIsLeftOut) {
  std::string text = PySpyToFaulthandler(kNativeDump);
  std::vector<ThreadStack> threads = ParseFaulthandler(text);
  ASSERT_EQ(threads.size(), 2u) << text;
  EXPECT_EQ(threads[0].id, "0x000000000000355c");
  const ThreadStack* main = MainThread(threads);
  ASSERT_EQ(main, &threads[0]) << text;
  EXPECT_EQ(OneLine(main->frames),
            "clock_nanosleep <- libc.so.6:0 sleep <- libffi.so.8.1.2:0 ffi_call <- sic.py:3 "
            "stuck_in_c <- sic.py:4 <module>");
  EXPECT_EQ(threads[1].id, "0x00007f0011223344");
  ASSERT_EQ(threads[1].frames.size(), 1u);
  EXPECT_EQ(threads[1].frames[0].line, 324);
  EXPECT_EQ(text.substr(0, text.find('\n')), "py-spy dump (the stack hook did not answer)");
}

TEST(PySpyTest, AnErrorIsNoStack) {
  EXPECT_EQ(PySpyToFaulthandler("Error: Failed to find python version from target process\n"
                                "\nStack backtrace:\n   0: anyhow::error\n"),
            "");
}

TEST(PySpyTest, ThisTestIsAPythonlessProcess) {
  EXPECT_FALSE(IsPythonProcess(getpid()));
  EXPECT_FALSE(IsPythonProcess(0));
  EXPECT_EQ(FindPySpy("/nonexistent"), "");
}

}  // namespace
}  // namespace muster
