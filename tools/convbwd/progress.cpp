#include "progress.hpp"

#include <algorithm>
#include <chrono>
#include <limits>

#include <sys/ioctl.h>

#include "report.hpp"

namespace convbwd::cli {

StatusLine::StatusLine(Config config) { configure(std::move(config)); }

void StatusLine::configure(Config config) {
  std::lock_guard<std::mutex> lock(mutex_);
  config_ = std::move(config);
  if (!config_.clock)
    config_.clock = [] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    };
}

double StatusLine::now() const { return config_.clock(); }

void StatusLine::draw() {
  std::string line = "convbwd: " + head_;
  if (in_task_) line += (head_.empty() ? "" : ", ") + task_text(task_, done_, total_);
  if (!subject_.empty()) line += ": " + subject_;
  // A line longer than the terminal wraps, and "\r" then returns only to the
  // start of its last row: cut it so that every redraw overwrites it all.
  if (config_.width > 1 && static_cast<int>(line.size()) >= config_.width)
    line.resize(static_cast<size_t>(config_.width - 1));
  std::fprintf(config_.out, "\r\x1b[K%s", line.c_str());
  std::fflush(config_.out);
  shown_ = true;
  last_draw_ = now();
}

void StatusLine::erase() {
  if (!shown_) return;
  std::fputs("\r\x1b[K", config_.out);
  std::fflush(config_.out);
  shown_ = false;
}

void StatusLine::set_case(std::string head, std::string subject) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  head_ = std::move(head);
  subject_ = std::move(subject);
  in_task_ = task_shown_ = false;
  draw();
}

void StatusLine::begin_task(std::string what) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  task_ = std::move(what);
  in_task_ = true;
  task_shown_ = false;
  done_ = total_ = 0;
  task_start_ = now();
  // The first update may draw at once (when the delay is 0).
  last_draw_ = -std::numeric_limits<double>::infinity();
}

void StatusLine::update_task(int64_t done, int64_t total) {
  if (!enabled()) return;
  // Workers report as they finish pieces; one that finds another drawing
  // skips its update rather than wait (the next one will show the count).
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock() || !in_task_) return;
  done_ = std::max(done_, done);  // workers may report out of order
  total_ = total;
  const double t = now();
  if (t - task_start_ < config_.delay_s || t - last_draw_ < config_.interval_s) return;
  draw();
  task_shown_ = true;
}

void StatusLine::end_task() {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  in_task_ = false;
  if (!shown_ || !task_shown_) return;  // the line does not show the task
  task_shown_ = false;
  // The batch's part stays; a lone check leaves a clean line.
  if (head_.empty()) erase();
  else draw();
}

void StatusLine::interrupt() {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  erase();
}

void StatusLine::finish(const std::string& last) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  erase();
  if (!last.empty()) {
    std::fprintf(config_.out, "convbwd: %s\n", last.c_str());
    std::fflush(config_.out);
  }
  head_.clear();
  subject_.clear();
  in_task_ = task_shown_ = false;
}

bool progress_wanted(Progress mode, bool stderr_is_terminal) {
  return mode == Progress::always || (mode == Progress::auto_ && stderr_is_terminal);
}

int terminal_columns(int fd) {
  winsize ws{};
  return ioctl(fd, TIOCGWINSZ, &ws) == 0 ? ws.ws_col : 0;
}

StatusLine& status_line() {
  static StatusLine line;
  return line;
}

std::string task_text(const std::string& what, int64_t done, int64_t total) {
  const int pct = total > 0 ? static_cast<int>(100.0 * static_cast<double>(done) / static_cast<double>(total)) : 100;
  return what + ": " + format_count(static_cast<double>(done)) + " of " + format_count(static_cast<double>(total)) +
         " elements (" + std::to_string(pct) + "%)";
}

}  // namespace convbwd::cli
