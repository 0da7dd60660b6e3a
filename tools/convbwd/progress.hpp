// The progress line on a terminal: one line on stderr, rewritten in place,
// for the two things that run long without printing: a batch (which case,
// how many failed so far) and the reference of a large check (which
// gradient, how many of its elements are done). Both share the line, so a
// check inside a batch extends the batch's line instead of fighting it.
//
// It never writes to stdout, and it writes nothing unless enabled: run()
// enables the process's line (status_line()) when stderr is a terminal, or
// when --progress=always asks for it (for logs and tests).
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>

namespace convbwd::cli {

enum class Progress { auto_, always, never };

class StatusLine {
 public:
  using Clock = std::function<double()>;  // seconds, monotonic

  struct Config {
    std::FILE* out = nullptr;  // null: disabled, every call returns at once
    Clock clock;               // default: std::chrono::steady_clock
    double delay_s = 1.0;      // a task shows nothing before this: quick checks stay quiet
    double interval_s = 0.25;  // at most 4 redraws a second
    int width = 0;             // the terminal's columns; 0: lines are not cut
  };

  StatusLine() = default;
  explicit StatusLine(Config config);

  // Replaces the config (run() sets the process's line once, before any work).
  void configure(Config config);
  bool enabled() const { return config_.out != nullptr; }

  // The batch's part: "case 3/17, 0 FAIL, 0 errors so far" about `subject`
  // (a descriptor). Drawn at once: it changes once per case. Ends any task.
  void set_case(std::string head, std::string subject);

  // A long task's part: begin_task("checking gradInput"), then update_task
  // from any thread with the elements done of the total, then end_task,
  // which erases it (the case's part, if any, stays). update_task draws only
  // once the task has run delay_s and then at most every interval_s; it
  // costs one clock read when enabled and nothing when not.
  void begin_task(std::string what);
  void update_task(int64_t done, int64_t total);
  void end_task();

  // Erases the line before other output on the same terminal (an error
  // message); the next draw brings it back.
  void interrupt();

  // Erases the line and, if `last` is not empty, leaves "convbwd: <last>"
  // on it with a newline.
  void finish(const std::string& last);

 private:
  double now() const;
  void draw();   // with mutex_ held
  void erase();  // with mutex_ held

  Config config_;
  std::mutex mutex_;
  std::string head_, subject_, task_;
  int64_t done_ = 0, total_ = 0;
  bool in_task_ = false, shown_ = false, task_shown_ = false;
  double task_start_ = 0, last_draw_ = 0;
};

// Whether progress goes to stderr: --progress=always, or auto with stderr on
// a terminal.
bool progress_wanted(Progress mode, bool stderr_is_terminal);

// The width of the terminal on `fd`; 0 when it is not one or does not say.
int terminal_columns(int fd);

// The process's line on stderr (disabled until run() configures it).
StatusLine& status_line();

// "checking gradInput: 1.23M of 4.5M elements (27%)".
std::string task_text(const std::string& what, int64_t done, int64_t total);

}  // namespace convbwd::cli
