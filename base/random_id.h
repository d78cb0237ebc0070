// Random identifiers from the kernel's CSPRNG: node ids, run ids. Thread-safe.
#ifndef MUSTER_BASE_RANDOM_ID_H_
#define MUSTER_BASE_RANDOM_ID_H_

#include <string>

namespace muster {

// `bytes` (at most 32) random bytes as lower-case hex.
std::string RandomHex(int bytes);

// An RFC 4122 version-4 UUID, "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx" (torchrun's run id for
// --standalone).
std::string Uuid4();

}  // namespace muster

#endif  // MUSTER_BASE_RANDOM_ID_H_
