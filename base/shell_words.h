// Shell quoting for command lines shown to people (--dry-run, `muster status`) or written
// for a shell (debug mode's rank-N.env): what a user can paste back into sh.
#ifndef MUSTER_BASE_SHELL_WORDS_H_
#define MUSTER_BASE_SHELL_WORDS_H_

#include <string>
#include <vector>

namespace muster {

// 'text' with every ' escaped; always quoted.
std::string ShellQuote(const std::string& text);

// The words joined by spaces, each quoted only where the shell would split or expand it.
std::string ShellJoin(const std::vector<std::string>& words);

}  // namespace muster

#endif  // MUSTER_BASE_SHELL_WORDS_H_
