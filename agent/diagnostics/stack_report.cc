#include "agent/diagnostics/stack_report.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "launch/warm_source.h"

namespace muster {
namespace {

// `  File "/x/train.py", line 57 in step` -> the frame; false for any other line.
bool ParseFrame(absl::string_view line, StackFrame* frame) {
  line = absl::StripLeadingAsciiWhitespace(line);
  if (!absl::ConsumePrefix(&line, "File \"")) return false;
  size_t quote = line.rfind("\", line ");
  if (quote == absl::string_view::npos) return false;
  frame->file = std::string(line.substr(0, quote));
  absl::string_view rest = line.substr(quote + 8);
  size_t in = rest.find(" in ");
  if (in == absl::string_view::npos || !absl::SimpleAtoi(rest.substr(0, in), &frame->line)) {
    return false;
  }
  frame->function = std::string(rest.substr(in + 4));
  return true;
}

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

nlohmann::json FramesJson(const std::vector<StackFrame>& frames) {
  nlohmann::json out = nlohmann::json::array();
  for (const StackFrame& f : frames) {
    out.push_back({{"file", f.file}, {"line", f.line}, {"function", f.function}});
  }
  return out;
}

}  // namespace

std::vector<ThreadStack> ParseFaulthandler(std::string_view text) {
  std::vector<ThreadStack> threads;
  bool below_template = false;  // of the last thread: its frames (outermost last) are done
  for (absl::string_view line : absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    bool current = absl::StartsWith(line, "Current thread ");
    if (current || absl::StartsWith(line, "Thread ") || absl::StartsWith(line, "Stack (")) {
      ThreadStack& t = threads.emplace_back();
      below_template = false;
      t.current = current;
      absl::string_view id = line.substr(current ? 15 : line[0] == 'T' ? 7 : 0);
      if (absl::StartsWith(id, "0x")) t.id = std::string(id.substr(0, id.find(' ')));
      continue;
    }
    StackFrame frame;
    if (threads.empty() || !ParseFrame(line, &frame)) continue;
    // A warm rank's frames below its script are the template's (and its loader's): an exec'd
    // rank has none of them (launch/warm_source.h).
    below_template = below_template || frame.file == kWarmTemplateFileName;
    if (!below_template) threads.back().frames.push_back(frame);
  }
  return threads;
}

const ThreadStack* MainThread(const std::vector<ThreadStack>& threads) {
  for (const ThreadStack& t : threads) {
    if (!t.frames.empty() && t.frames.back().function == "<module>") return &t;
  }
  for (const ThreadStack& t : threads) {
    if (t.current) return &t;
  }
  return threads.empty() ? nullptr : &threads.front();
}

std::string OneLine(const std::vector<StackFrame>& frames, size_t max_frames) {
  if (frames.empty()) return "(no Python frame)";
  std::string out = frames[0].function;
  for (size_t i = 1; i < frames.size() && i < max_frames; ++i) {
    absl::StrAppend(&out, " <- ", BaseName(frames[i].file), ":", frames[i].line, " ",
                    frames[i].function);
  }
  if (frames.size() > max_frames) absl::StrAppend(&out, " <- ...");
  return out;
}

std::string RankRanges(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  std::vector<std::string> parts;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    parts.push_back(j == i ? absl::StrCat(ranks[i]) : absl::StrCat(ranks[i], "-", ranks[j]));
    i = j + 1;
  }
  return absl::StrJoin(parts, ",");
}

std::vector<StackGroup> GroupStacks(const std::vector<rdzv::NodeStacks>& nodes) {
  std::vector<StackGroup> stacks, missing;
  for (const rdzv::NodeStacks& n : nodes) {
    for (const rdzv::RankStack& r : n.ranks) {
      std::vector<StackFrame> frames;
      std::string why = r.unavailable;
      if (why.empty()) {
        std::vector<ThreadStack> threads = ParseFaulthandler(r.text);
        const ThreadStack* main = MainThread(threads);
        if (main != nullptr) frames = main->frames;
        if (main == nullptr) why = "the dump holds no thread";
      }
      std::vector<StackGroup>& into = why.empty() ? stacks : missing;
      auto same = std::find_if(into.begin(), into.end(), [&](const StackGroup& g) {
        return why.empty() ? g.frames == frames : g.unavailable == why;
      });
      if (same == into.end()) {
        into.push_back({.ranks = {r.rank}, .frames = frames, .unavailable = why});
      } else {
        same->ranks.push_back(r.rank);
      }
    }
  }
  for (StackGroup& g : stacks) std::sort(g.ranks.begin(), g.ranks.end());
  for (StackGroup& g : missing) std::sort(g.ranks.begin(), g.ranks.end());
  std::stable_sort(stacks.begin(), stacks.end(), [](const StackGroup& a, const StackGroup& b) {
    return a.ranks.size() != b.ranks.size() ? a.ranks.size() > b.ranks.size()
                                            : a.ranks[0] < b.ranks[0];
  });
  stacks.insert(stacks.end(), missing.begin(), missing.end());
  return stacks;
}

std::string RenderStacks(const std::vector<rdzv::NodeStacks>& nodes) {
  std::string out;
  for (const StackGroup& g : GroupStacks(nodes)) {
    std::string who = absl::StrCat(g.ranks.size() == 1 ? "rank " : "ranks ", RankRanges(g.ranks));
    if (!g.unavailable.empty()) {
      absl::StrAppend(&out, who, ": not available: ", g.unavailable, "\n");
      continue;
    }
    absl::StrAppend(&out, who, ": ", OneLine(g.frames), "\n");
    for (const StackFrame& f : g.frames) {
      absl::StrAppend(&out, "    File \"", f.file, "\", line ", f.line, " in ", f.function, "\n");
    }
  }
  for (const rdzv::NodeStacks& n : nodes) {
    if (!n.unavailable.empty()) {
      absl::StrAppend(&out, "node ", n.host, " (group rank ", n.group_rank,
                      "): not available: ", n.unavailable, "\n");
    }
  }
  return out;
}

nlohmann::json StacksJson(const std::vector<rdzv::NodeStacks>& nodes) {
  nlohmann::json j = {{"nodes", nlohmann::json::array()}, {"groups", nlohmann::json::array()}};
  for (const rdzv::NodeStacks& n : nodes) {
    nlohmann::json node = {{"node_id", n.node_id},
                           {"host", n.host},
                           {"group_rank", n.group_rank},
                           {"ranks", nlohmann::json::array()}};
    if (!n.unavailable.empty()) node["unavailable"] = n.unavailable;
    for (const rdzv::RankStack& r : n.ranks) {
      nlohmann::json rank = {
          {"rank", r.rank}, {"local_rank", r.local_rank}, {"pid", r.pid}, {"text", r.text}};
      if (!r.unavailable.empty()) rank["unavailable"] = r.unavailable;
      rank["threads"] = nlohmann::json::array();
      for (const ThreadStack& t : ParseFaulthandler(r.text)) {
        rank["threads"].push_back(
            {{"id", t.id}, {"current", t.current}, {"frames", FramesJson(t.frames)}});
      }
      node["ranks"].push_back(rank);
    }
    j["nodes"].push_back(node);
  }
  for (const StackGroup& g : GroupStacks(nodes)) {
    nlohmann::json group = {{"ranks", g.ranks}};
    if (g.unavailable.empty()) {
      group["summary"] = OneLine(g.frames);
      group["frames"] = FramesJson(g.frames);
    } else {
      group["unavailable"] = g.unavailable;
    }
    j["groups"].push_back(group);
  }
  return j;
}

std::vector<rdzv::RankStack> MainThreadLines(const std::vector<rdzv::RankStack>& ranks) {
  std::vector<rdzv::RankStack> out;
  for (const rdzv::RankStack& r : ranks) {
    rdzv::RankStack s{.rank = r.rank, .local_rank = r.local_rank, .pid = r.pid};
    if (r.unavailable.empty()) {
      std::vector<ThreadStack> threads = ParseFaulthandler(r.text);
      const ThreadStack* main = MainThread(threads);
      s.text = main != nullptr ? OneLine(main->frames) : "";
      if (main == nullptr) s.unavailable = "the dump holds no thread";
    } else {
      s.unavailable = r.unavailable;
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace muster
