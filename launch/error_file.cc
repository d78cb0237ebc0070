#include "launch/error_file.h"

#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/errno_status.h"
#include "nlohmann/json.hpp"

namespace muster {
namespace {

int64_t TimestampOf(const nlohmann::json& v) {
  if (v.is_number_integer()) return v.get<int64_t>();
  int64_t t = 0;
  if (v.is_string() && absl::SimpleAtoi(v.get<std::string>(), &t)) return t;
  return 0;
}

}  // namespace

absl::StatusOr<std::optional<WorkerError>> ReadErrorFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return std::optional<WorkerError>();
    return ErrnoStatus("open " + path, errno);
  }
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json doc = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("message")) {
    return absl::InvalidArgumentError(
        absl::StrCat("error file ", path, " is not torch's error.json format"));
  }
  WorkerError e;
  const nlohmann::json& m = doc["message"];
  if (m.is_string()) {
    e.message = m.get<std::string>();
    if (doc.contains("timestamp")) e.timestamp = TimestampOf(doc["timestamp"]);
  } else if (m.is_object()) {
    if (m.contains("message") && m["message"].is_string()) e.message = m["message"];
    if (m.contains("extraInfo") && m["extraInfo"].is_object()) {
      const nlohmann::json& x = m["extraInfo"];
      if (x.contains("py_callstack") && x["py_callstack"].is_string()) {
        e.traceback = x["py_callstack"];
      }
      if (x.contains("timestamp")) e.timestamp = TimestampOf(x["timestamp"]);
    }
  }
  return std::optional<WorkerError>(std::move(e));
}

absl::Status WriteAgentErrorFile(const std::string& path, const WorkerError& error, int exit_code) {
  nlohmann::json doc = {
      {"message",
       {{"message", error.message},
        {"errorCode", exit_code},
        {"extraInfo",
         {{"py_callstack", error.traceback}, {"timestamp", std::to_string(error.timestamp)}}}}}};
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return ErrnoStatus("open " + tmp, errno);
    out << doc.dump();
    if (!out.flush()) return ErrnoStatus("write " + tmp, errno);
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) return ErrnoStatus("rename " + tmp, errno);
  return absl::OkStatus();
}

}  // namespace muster
