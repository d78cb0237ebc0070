// ClosestName: the "did you mean" of an unknown word (a flag, a variable) among the names
// it could have meant. Thread-safe (pure).
#ifndef MUSTER_BASE_CLOSEST_NAME_H_
#define MUSTER_BASE_CLOSEST_NAME_H_

#include <string>
#include <string_view>
#include <vector>

namespace muster {

// The number of single-character insertions, deletions, substitutions and swaps of two
// neighbours that turn `a` into `b` (optimal string alignment distance).
int EditDistance(std::string_view a, std::string_view b);

// The candidate `word` most likely misspells, or "" when none is close: the nearest by
// EditDistance within a third of the word's length (at least 1, at most 3; ties go to the
// earlier candidate). Not an abbreviation: the flag parser takes a unique prefix itself and
// names the flags of a shared one (agent/config/flag_table.cc), so no word left unknown is a
// prefix. Compares as given: the caller folds spellings first (dashes and underscores,
// case).
std::string ClosestName(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace muster

#endif  // MUSTER_BASE_CLOSEST_NAME_H_
